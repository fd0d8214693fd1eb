//! The one wasmtime `Engine` of a host, its epoch ticker, and the on-disk component cache.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::config::HostConfig;
use crate::error::LoadError;

/// The pinned wasmtime version (Cargo.toml pins it exactly); part of the cache key.
const WASMTIME_VERSION: &str = "48.0.8";

/// How often the epoch advances; the granularity of turn interruption and of yielding.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Hard per-memory ceiling of the pool; a child's `memory_limit_mb` may only lower it.
const POOL_MAX_MEMORY: usize = 512 << 20;

/// Bytes of a freed linear memory kept resident for the slot's next activation.
const KEEP_RESIDENT: usize = 1 << 20;

/// Builds the engine: pooling allocator sized for `max_activations`, copy-on-write memory
/// images, epoch interruption.
pub fn build_engine(cfg: &HostConfig) -> wasmtime::Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config.memory_init_cow(true);
    let n = cfg.max_activations + 16;
    let mut pool = PoolingAllocationConfig::default();
    // Core-instance slots are only counted (no memory behind them), so every component may
    // use its per-component maximum: a Python actor holds ~14, and `max_activations` must
    // mean actors of any language. Memory and table slots reserve address space; every
    // toolchain here uses 1 memory and 2 tables per component, so 2 and 4 leave room.
    pool.total_component_instances(n)
        .total_core_instances(n.saturating_mul(50))
        .total_memories(n.saturating_mul(2))
        .total_tables(n.saturating_mul(4))
        .total_stacks(n)
        .max_core_instances_per_component(50)
        .max_memories_per_component(8)
        .max_tables_per_component(16)
        .table_elements(100_000)
        .max_memory_size(POOL_MAX_MEMORY)
        .max_component_instance_size(1 << 20)
        .max_core_instance_size(1 << 20)
        // A deactivated actor's slot is reset by zeroing only its resident pages (found with
        // PAGEMAP_SCAN where the kernel has it) instead of unmapping them, so the next
        // activation in that slot does not fault its stack and heap back in.
        .pagemap_scan(wasmtime::Enabled::Auto)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(64 << 10);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config)
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a thread of its own until dropped.
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    /// Starts ticking `engine`.
    pub fn start(engine: Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("sluice-epoch".into())
            .spawn(move || {
                // Relaxed: the flag only ends the loop; nothing else is published through it.
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                    crate::actor::tick_coarse_clock();
                }
            })
            .expect("spawn epoch thread");
        Self { stop }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

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
            return Component::new(&self.engine, bytes).map_err(invalid);
        };
        let digest = hex::encode(Sha256::digest(bytes));
        let path = dir.join(format!("{digest}-{}.cwasm", self.engine_key));
        if path.exists() {
            // SAFETY: the file was written by `Component::serialize` of an engine with the
            // same compatibility hash (it is in the file name) and is only written by
            // rename-into-place below, so it is complete and trusted.
            match unsafe { Component::deserialize_file(&self.engine, &path) } {
                Ok(c) => return Ok(c),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "discarding unreadable cached component")
                }
            }
        }
        let component = Component::new(&self.engine, bytes).map_err(invalid)?;
        if let Err(e) = write_atomically(dir, &path, component.serialize().map_err(invalid)?) {
            tracing::warn!(path = %path.display(), error = %e, "could not cache compiled component");
        }
        Ok(component)
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
