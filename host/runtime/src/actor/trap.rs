//! What a failed instantiation, `init` or turn becomes for its caller: a trap named by its
//! cause (memory limit, turn time limit, stack overflow, `unreachable`, out-of-bounds access…)
//! with the guest frames it happened in, or a capacity refusal when the engine's instance pool
//! ran out of a kind of slot. Classified by the error's type, never by its text.

use std::fmt::Write as _;

use wasmtime::{PoolConcurrencyLimitError, Trap, WasmBacktrace};

use crate::error::{ActorError, ErrorCode};
use crate::guest::StoreState;
use crate::id::ActorId;

/// Raised from the epoch callback when a turn overruns `max_turn_ms`.
#[derive(Debug)]
pub(crate) struct TurnInterrupted;

impl std::fmt::Display for TurnInterrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("turn interrupted: exceeded max_turn_ms")
    }
}

impl std::error::Error for TurnInterrupted {}

/// Raised from the epoch callback when the host is fenced (see `Host::fence`).
#[derive(Debug)]
pub(crate) struct TurnFenced;

impl std::fmt::Display for TurnFenced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("turn interrupted: this host may no longer run the actor")
    }
}

impl std::error::Error for TurnFenced {}

/// How an instance failed, for metrics and supervision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A trap (including a memory-limit hit): the instance is discarded and restarted.
    Trapped,
    /// A turn ran past `max_turn_ms`: discarded and restarted.
    Interrupted,
    /// The engine's pool had no slot of some kind: not the actor's fault, never counted
    /// toward restart intensity.
    Capacity,
    /// The host was fenced (`Host::fence`): the activation ends; not the actor's fault.
    Fenced,
}

/// Guest frames quoted in a trap's message, innermost first.
const MAX_FRAMES: usize = 6;

/// The error `e` (raised in `phase` of actor `id`) as its caller sees it.
pub(crate) fn classify(
    state: &StoreState,
    id: &ActorId,
    e: &wasmtime::Error,
    phase: &str,
) -> (ActorError, Failure) {
    if state.limiter.hit {
        let mb = state.limiter.limit >> 20;
        let msg = format!(
            "actor {id} exceeded its memory limit of {mb} MiB during {phase}; instance restarted"
        );
        return (
            ActorError::new(ErrorCode::ResourceExhausted, msg),
            Failure::Trapped,
        );
    }
    if e.downcast_ref::<TurnInterrupted>().is_some() {
        let msg = format!(
            "actor {id} interrupted: {phase} ran longer than max_turn_ms={}; instance restarted",
            state.turn.max_turn.as_millis()
        );
        return (ActorError::internal(msg), Failure::Interrupted);
    }
    if e.downcast_ref::<TurnFenced>().is_some() {
        let msg = format!(
            "actor {id} stopped during {phase}: this host's cluster lease lapsed (the turn may have run in part; retry: the actor moves to a host that holds it)"
        );
        return (ActorError::unavailable(msg), Failure::Fenced);
    }
    if let Some(p) = e.downcast_ref::<PoolConcurrencyLimitError>() {
        // The host's slots already hold activations to `max_activations`: this is the pool
        // running out of one kind of slot first (a component using more memories or tables
        // than the pool was sized for).
        let msg =
            format!("instance pool exhausted before max_activations ({p}); cannot activate {id}");
        return (
            ActorError::new(ErrorCode::ResourceExhausted, msg).with_retry_after(100),
            Failure::Capacity,
        );
    }
    let cause = match e.downcast_ref::<Trap>() {
        Some(t) => t.to_string(),
        None => e.root_cause().to_string(),
    };
    let cause = cause.strip_prefix("wasm trap: ").unwrap_or(&cause);
    let mut msg = format!("actor {id} trapped during {phase}: {cause}");
    if let Some(bt) = e.downcast_ref::<WasmBacktrace>() {
        let frames: Vec<String> = bt
            .frames()
            .iter()
            .map(|f| match f.func_name() {
                // `{:#}` leaves out the hash suffix of a Rust symbol.
                Some(name) => format!("{:#}", rustc_demangle::demangle(name)),
                None => format!("func[{}]", f.func_index()),
            })
            .collect();
        // From the innermost frame of the guest's own code: the panic and abort machinery of
        // its language's runtime says nothing the cause does not.
        let own = frames
            .iter()
            .position(|f| !is_language_runtime(f))
            .unwrap_or(0);
        let shown = &frames[own..];
        if !shown.is_empty() {
            msg.push_str(" at ");
            msg.push_str(&shown[..shown.len().min(MAX_FRAMES)].join(" <- "));
            if shown.len() > MAX_FRAMES {
                let _ = write!(msg, " <- … ({} more)", shown.len() - MAX_FRAMES);
            }
        }
    }
    msg.push_str("; instance restarted");
    (ActorError::internal(msg), Failure::Trapped)
}

/// A frame of a language runtime's panic/abort path rather than of the actor's code.
fn is_language_runtime(frame: &str) -> bool {
    const PREFIXES: [&str; 10] = [
        "std::",
        "core::",
        "alloc::",
        "__rustc::",
        "__rust_",
        "rust_panic",
        "abort",
        "runtime.",
        "wit_bindgen::",
        "cabi_",
    ];
    PREFIXES.iter().any(|p| frame.starts_with(p))
}
