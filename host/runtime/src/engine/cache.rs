//! Components compiled once and kept on disk, keyed by content hash, wasmtime version and the
//! engine's compatibility hash.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::error::LoadError;

/// The pinned wasmtime version (Cargo.toml pins it exactly); part of the cache key.
const WASMTIME_VERSION: &str = "48.0.8";

/// Compiles components once and keeps the machine code on disk, keyed by the component's
/// content hash, the wasmtime version and the engine's compatibility hash (which covers the
/// pooling limits and every other setting that changes generated code). Loaded entries are
/// mapped, not copied, so entries are only ever replaced by rename: rewriting a file in place
/// under a running host would fault it (SIGBUS) when it next touches the truncated pages.
#[derive(Clone)]
pub struct ComponentCache {
    engine: Engine,
    dir: Option<PathBuf>,
    engine_key: String,
}

impl ComponentCache {
    /// A cache in `dir` (created on demand), or a pass-through when `None`.
    pub fn new(engine: Engine, dir: Option<PathBuf>) -> Self {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        let engine_key = format!("wasmtime{}-{:016x}", WASMTIME_VERSION, h.finish());
        Self {
            engine,
            dir,
            engine_key,
        }
    }

    /// Compiles `bytes` (or loads the cached machine code) for actor type `name`.
    pub fn load(&self, name: &str, bytes: &[u8]) -> Result<Component, LoadError> {
        self.load_reporting(name, bytes).map(|(c, _)| c)
    }

    /// As [`ComponentCache::load`], and whether the machine code came from the cache (`true`)
    /// or was compiled now.
    pub fn load_reporting(&self, name: &str, bytes: &[u8]) -> Result<(Component, bool), LoadError> {
        if wasmparser_is_core_module(bytes) {
            return Err(LoadError::Invalid {
                name: name.to_string(),
                reason: "this is a core WebAssembly module; Sluice runs components (build with `sluice build`)".into(),
            });
        }
        let invalid = |e: wasmtime::Error| LoadError::Invalid {
            name: name.to_string(),
            reason: format!("{e:#}"),
        };
        let Some(dir) = &self.dir else {
            return Component::new(&self.engine, bytes)
                .map(|c| (c, false))
                .map_err(invalid);
        };
        let digest = hex::encode(Sha256::digest(bytes));
        let path = dir.join(format!("{digest}-{}.cwasm", self.engine_key));
        if path.exists() {
            // SAFETY: the file was written by `Component::serialize` of an engine with the
            // same compatibility hash (it is in the file name) and is only written by
            // rename-into-place below, so it is complete and trusted.
            match unsafe { Component::deserialize_file(&self.engine, &path) } {
                Ok(c) => return Ok((c, true)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "discarding unreadable cached component")
                }
            }
        }
        let component = Component::new(&self.engine, bytes).map_err(invalid)?;
        if let Err(e) = write_atomically(dir, &path, component.serialize().map_err(invalid)?) {
            tracing::warn!(path = %path.display(), error = %e, "could not cache compiled component");
        }
        Ok((component, false))
    }
}

fn write_atomically(dir: &Path, path: &Path, data: Vec<u8>) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, data)?;
    std::fs::rename(tmp, path)
}

/// A core module's preamble is `\0asm` + version 1; a component's is `\0asm` + 0x0d 0x00 0x01 0x00.
fn wasmparser_is_core_module(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && &bytes[0..4] == b"\0asm" && bytes[4..8] == [1, 0, 0, 0]
}
