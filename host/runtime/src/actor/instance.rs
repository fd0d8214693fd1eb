//! A live instance of an actor: bringing one up in its cell's slot (instantiate, `init`) and
//! running one turn on it. A failure here is classified (see `trap.rs`); what to do about it
//! is the supervisor's.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tracing::Instrument;
use wasmtime::{Store, UpdateDeadline};

use super::cell::ActorCell;
use super::env::Env;
use super::module::ModuleVersion;
use super::slots::{Slot, Slots, wait_until_dropped};
use super::trap::{Failure, TurnInterrupted, classify};
use crate::bindings::{ActorWorld, wit};
use crate::error::ActorError;
use crate::guest::{StoreState, from_wit};
use crate::message::Message;

/// A live instance.
pub(crate) struct Live {
    store: Store<StoreState>,
    world: ActorWorld,
    pub version: u64,
    /// Declared after the store, so it drops after it: clears `live` once the instance's
    /// memory is back in the pool.
    _dropped: InstanceDropped,
}

/// Marks the cell's instance gone and tells a successor waiting for its memory.
struct InstanceDropped {
    cell: Arc<ActorCell>,
    slots: Arc<Slots>,
}

impl Drop for InstanceDropped {
    fn drop(&mut self) {
        self.cell.live.store(false, Ordering::Release);
        self.slots.instance_dropped.notify_waiters();
    }
}

/// Why an instance could not be brought up, or a turn did not end with a reply.
pub(crate) struct Crash {
    pub error: ActorError,
    pub failure: Failure,
}

impl Crash {
    /// A failure that is not the instance's (no services: the host is going away).
    fn unavailable(why: &'static str) -> Self {
        Self {
            error: ActorError::unavailable(why),
            failure: Failure::Capacity,
        }
    }
}

/// Instantiates `module` and runs `init`, in the cell's slot (after the instance of the
/// activation that slot was taken from, if any, is gone).
pub(crate) async fn activate(
    cell: &Arc<ActorCell>,
    env: &Env,
    module: &ModuleVersion,
) -> Result<Live, Crash> {
    let predecessor = cell.slot.lock().as_mut().and_then(Slot::take_predecessor);
    if let Some(p) = predecessor {
        wait_until_dropped(&p, &env.slots).await;
    }
    let Some(services) = env.services() else {
        return Err(Crash::unavailable("host is shutting down"));
    };
    let max_turn = Duration::from_millis(env.config.max_turn_ms);
    let state = StoreState::new(
        &services,
        cell.id.clone(),
        module.wasi.clone(),
        module.memory_limit,
        max_turn,
    );
    let mut store = Store::new(&env.engine, state);
    store.limiter(|s| &mut s.limiter);
    store.epoch_deadline_callback(|ctx| {
        if ctx.data().turn_over_budget() {
            return Err(wasmtime::Error::new(TurnInterrupted));
        }
        // Yield every tick so a long turn never monopolises a worker thread.
        Ok(UpdateDeadline::Yield(1))
    });
    store.set_epoch_deadline(1);
    store.data_mut().turn.started = Instant::now();
    let world = match module.pre.instantiate_async(&mut store).await {
        Ok(w) => w,
        Err(e) => return Err(crash(&store, &e, "instantiating")),
    };
    cell.live.store(true, Ordering::Release);
    let mut live = Live {
        store,
        world,
        version: module.version,
        _dropped: InstanceDropped {
            cell: cell.clone(),
            slots: env.slots.clone(),
        },
    };
    match live
        .world
        .sluice_actor_actor()
        .call_init(&mut live.store, &module.init_json)
        .await
    {
        Ok(Ok(())) => {}
        // `init` said no: the actor cannot start with this config; a restart may not help,
        // so it counts toward restart intensity like a trap.
        Ok(Err(e)) => {
            return Err(Crash {
                error: from_wit(e),
                failure: Failure::Trapped,
            });
        }
        Err(e) => return Err(crash(&live.store, &e, "init")),
    }
    cell.ty.metrics.activations.increment(1);
    Ok(live)
}

fn crash(store: &Store<StoreState>, e: &wasmtime::Error, phase: &str) -> Crash {
    let (error, failure) = classify(store.data(), &store.data().self_id, e, phase);
    Crash { error, failure }
}

/// Runs one turn on `l`. The message's type and payload move into the envelope (no copy);
/// the caller keeps the reply slot.
pub(crate) async fn turn(
    l: &mut Live,
    max_turn: Duration,
    msg: &mut Message,
    now: Instant,
) -> Result<Result<Vec<u8>, ActorError>, Crash> {
    let env = wit::Envelope {
        sender: msg.sender.as_ref().map(|s| String::from(s.as_str())),
        msg_type: std::mem::take(&mut msg.msg_type),
        payload: std::mem::take(&mut msg.payload),
        principal: String::from(&*msg.principal),
        deadline_ms: msg
            .deadline
            .map(|d| d.saturating_duration_since(now).as_millis() as u64),
    };
    let span = turn_span(&l.store.data().self_id, &env.msg_type, msg.trace);
    let t = &mut l.store.data_mut().turn;
    t.trace = sluice_trace::of(&span);
    t.started = now;
    t.waited = Duration::ZERO;
    t.deadline = msg.deadline;
    t.max_turn = max_turn;
    // The turn's principal moves in; the message keeps the previous one (no refcount churn).
    std::mem::swap(&mut t.principal, &mut msg.principal);
    l.store.set_epoch_deadline(1);
    match l
        .world
        .sluice_actor_actor()
        .call_handle(&mut l.store, &env)
        .instrument(span.clone())
        .await
    {
        Ok(Ok(bytes)) => {
            span.record("outcome", "ok");
            Ok(Ok(bytes))
        }
        Ok(Err(e)) => {
            let e = from_wit(e);
            span.record("outcome", "error");
            span.record("error", tracing::field::display(&e));
            Ok(Err(e))
        }
        Err(e) => {
            let c = crash(&l.store, &e, "handle");
            span.record("outcome", "crash");
            span.record("error", tracing::field::display(&c.error));
            Err(c)
        }
    }
}

/// The span a turn runs in, a child of the message's trace context (a root when the message
/// carries none). Disabled, and free, while traces are off: the hot path then allocates
/// nothing for tracing. A guest's `host.log` lines are events of this span.
fn turn_span(
    actor: &crate::id::ActorId,
    msg_type: &str,
    parent: Option<sluice_trace::TraceParent>,
) -> tracing::Span {
    if !sluice_trace::enabled() {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(
        "turn",
        actor = %actor,
        msg_type,
        outcome = tracing::field::Empty,
        error = tracing::field::Empty,
    );
    sluice_trace::set_parent(&span, parent);
    span
}
