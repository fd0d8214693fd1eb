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
    let mut msg = format!("actor {id} trapped during {phase}: {cause}");
    if let Some(bt) = e.downcast_ref::<WasmBacktrace>() {
        let frames = bt.frames();
        if !frames.is_empty() {
            msg.push_str(" at ");
            for (i, f) in frames.iter().take(MAX_FRAMES).enumerate() {
                if i > 0 {
                    msg.push_str(" <- ");
                }
                match f.func_name() {
                    Some(name) => msg.push_str(name),
                    None => {
                        let _ = write!(msg, "func[{}]", f.func_index());
                    }
                }
            }
            if frames.len() > MAX_FRAMES {
                let _ = write!(msg, " <- … ({} more)", frames.len() - MAX_FRAMES);
            }
        }
    }
    msg.push_str("; instance restarted");
    (ActorError::internal(msg), Failure::Trapped)
}
