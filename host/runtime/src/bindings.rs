//! Host-side bindings of the `sluice:actor@0.1.0` world, generated once from `wit/`.
//!
//! Imports are async (an `ask` awaits another actor) and trappable: a guest-handleable
//! failure is an `actor-error` value, never a trap; only host bugs trap.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "actor-world",
    imports: { default: async | trappable },
    exports: { default: async },
});

pub use sluice::actor::types as wit;
