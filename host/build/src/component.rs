//! In-process component work: embed the WIT into a core module and wrap it with the preview1
//! reactor adapter (what `wasm-tools component embed` + `component new` do), and inspect a
//! finished component's world.

use std::path::Path;

use wit_component::{ComponentEncoder, StringEncoding, embed_component_metadata};
use wit_parser::decoding::{DecodedWasm, decode};
use wit_parser::{Resolve, WorldItem, WorldKey};

use crate::error::{BuildError, Result};

/// The world every Sluice actor targets.
pub const WORLD: &str = "actor-world";
/// The world of a guest that also runs batched turns (`actor-world` plus `turns` and `batch`):
/// the Python and TypeScript SDKs build against it, and the host falls back to one call per
/// message for a component that lacks the `batch` export.
pub const BATCHED_WORLD: &str = "batched-actor-world";
/// The interface every Sluice actor exports.
pub const ACTOR_EXPORT: &str = "sluice:actor/actor@0.1.0";

/// Turns a wasip1 core module (reactor, `-buildmode=c-shared`) into a component: embeds the
/// `batched-actor-world` of `wit_dir` (the Go SDK exports `batch` as well as `actor`) and adapts `wasi_snapshot_preview1` with the reactor adapter of
/// wasmtime 48.0.8.
pub fn componentize_core(core: &[u8], wit_dir: &Path) -> Result<Vec<u8>> {
    let mut resolve = Resolve::default();
    let (pkg, _) = resolve
        .push_dir(wit_dir)
        .map_err(|e| BuildError::Component(format!("parsing {}: {e:#}", wit_dir.display())))?;
    let world = resolve
        .select_world(&[pkg], Some(BATCHED_WORLD))
        .map_err(|e| BuildError::Component(format!("{e:#}")))?;
    let mut module = core.to_vec();
    embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8)
        .map_err(|e| BuildError::Component(format!("embedding WIT: {e:#}")))?;
    ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .and_then(|enc| {
            enc.adapter(
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
            )
        })
        .and_then(|mut enc| enc.encode())
        .map_err(|e| BuildError::Component(format!("{e:#}")))
}

/// The imports and exports of a component, as fully qualified interface names
/// (`sluice:actor/host@0.1.0`, `wasi:io/streams@0.2.6`, ...) or bare function names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ComponentInfo {
    /// What the component imports.
    pub imports: Vec<String>,
    /// What the component exports.
    pub exports: Vec<String>,
}

/// Decodes a component's world.
pub fn inspect(bytes: &[u8]) -> Result<ComponentInfo> {
    let decoded = decode(bytes).map_err(|e| BuildError::Component(format!("decoding: {e:#}")))?;
    let DecodedWasm::Component(resolve, world) = decoded else {
        return Err(BuildError::Component(
            "a WIT package, not a component".into(),
        ));
    };
    let w = &resolve.worlds[world];
    let name = |key: &WorldKey, item: &WorldItem| -> String {
        match (key, item) {
            (WorldKey::Interface(id), _) => resolve
                .id_of(*id)
                .unwrap_or_else(|| resolve.name_world_key(key)),
            (WorldKey::Name(n), _) => n.clone(),
        }
    };
    let mut info = ComponentInfo {
        imports: w.imports.iter().map(|(k, i)| name(k, i)).collect(),
        exports: w.exports.iter().map(|(k, i)| name(k, i)).collect(),
    };
    info.imports.sort();
    info.exports.sort();
    Ok(info)
}

/// Checks that `bytes` is a Sluice actor: it exports `sluice:actor/actor@0.1.0` and imports
/// nothing but `sluice:actor/*` and WASI.
pub fn validate_actor(bytes: &[u8], path: &Path) -> Result<ComponentInfo> {
    let info = inspect(bytes).map_err(|e| BuildError::NotAnActor {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    if !info.exports.iter().any(|e| e == ACTOR_EXPORT) {
        return Err(BuildError::NotAnActor {
            path: path.to_path_buf(),
            reason: format!(
                "it does not export {ACTOR_EXPORT} (exports: {:?})",
                info.exports
            ),
        });
    }
    let foreign: Vec<_> = info
        .imports
        .iter()
        .filter(|i| !(i.starts_with("sluice:actor/") || i.starts_with("wasi:")))
        .collect();
    if !foreign.is_empty() {
        return Err(BuildError::NotAnActor {
            path: path.to_path_buf(),
            reason: format!("it imports {foreign:?}, which no Sluice host provides"),
        });
    }
    Ok(info)
}
