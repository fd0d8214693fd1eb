//! Host-side bindings of the `sluice:actor@0.1.0` worlds, generated once from `wit/`.
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

/// `batched-actor-world`: `actor-world` plus the `turns` import and the `batch` export. Its
/// shared interfaces are the ones above, so a guest of either world takes the same types.
pub mod batched {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "batched-actor-world",
        // `turns.next` only touches the mailbox: synchronous, no future per turn.
        imports: { "sluice:actor/turns.next": trappable, default: async | trappable },
        exports: { default: async },
        with: {
            "sluice:actor/types": crate::bindings::sluice::actor::types,
            "sluice:actor/host": crate::bindings::sluice::actor::host,
            "sluice:actor/outbox": crate::bindings::sluice::actor::outbox,
            "sluice:actor/bus": crate::bindings::sluice::actor::bus,
        },
    });
}
