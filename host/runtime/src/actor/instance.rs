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
use super::trap::{Failure, TurnFenced, TurnInterrupted, classify};
use crate::bindings::batched::BatchedActorWorld;
use crate::bindings::{ActorWorld, wit};
use crate::error::ActorError;
use crate::guest::{StoreState, Turn, TurnFeed, from_wit};
use crate::id::ActorId;
use crate::message::Message;

/// An instance's exports: one call per message, or batched turns as well.
enum World {
    One(ActorWorld),
    Batched(BatchedActorWorld),
}

/// A live instance.
pub(crate) struct Live {
    store: Store<StoreState>,
    world: World,
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
    // Only activations under the hooks watch the fence (one relaxed load per tick).
    let fenced = env.hooked(cell.eager).then(|| env.fenced.clone());
    store.epoch_deadline_callback(move |ctx| {
        if ctx.data().turn_over_budget() {
            return Err(wasmtime::Error::new(TurnInterrupted));
        }
        if fenced
            .as_ref()
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
        {
            return Err(wasmtime::Error::new(TurnFenced));
        }
        // Yield every tick so a long turn never monopolises a worker thread.
        Ok(UpdateDeadline::Yield(1))
    });
    store.set_epoch_deadline(1);
    store.data_mut().turn.started = Instant::now();
    let world = match &module.batched {
        Some(pre) => pre.instantiate_async(&mut store).await.map(World::Batched),
        None => module
            .pre
            .instantiate_async(&mut store)
            .await
            .map(World::One),
    };
    let world = match world {
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
    let init = match &live.world {
        World::One(w) => {
            w.sluice_actor_actor()
                .call_init(&mut live.store, &module.init_json)
                .await
        }
        World::Batched(w) => {
            w.sluice_actor_actor()
                .call_init(&mut live.store, &module.init_json)
                .await
        }
    };
    match init {
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

/// Moves `msg`'s type and payload into the envelope of its turn (no copy) and sets the
/// store's turn up for it: its start, budget, deadline, principal and span. The caller keeps
/// the reply slot.
pub(crate) fn begin(
    t: &mut Turn,
    id: &ActorId,
    msg: &mut Message,
    now: Instant,
    max_turn: Duration,
) -> (wit::Envelope, tracing::Span) {
    let env = wit::Envelope {
        sender: msg.sender.as_ref().map(|s| String::from(s.as_str())),
        msg_type: std::mem::take(&mut msg.msg_type),
        payload: std::mem::take(&mut msg.payload),
        principal: String::from(&*msg.principal),
        deadline_ms: msg
            .deadline
            .map(|d| d.saturating_duration_since(now).as_millis() as u64),
    };
    let span = turn_span(id, &env.msg_type, msg.trace);
    t.trace = sluice_trace::of(&span);
    t.started = now;
    t.waited = Duration::ZERO;
    t.deadline = msg.deadline;
    t.max_turn = max_turn;
    // The turn's principal moves in; the message keeps the previous one (no refcount churn).
    std::mem::swap(&mut t.principal, &mut msg.principal);
    (env, span)
}

/// Records how a turn ended on its span.
pub(crate) fn record_outcome(span: &tracing::Span, outcome: &Result<Vec<u8>, ActorError>) {
    match outcome {
        Ok(_) => {
            span.record("outcome", "ok");
        }
        Err(e) => {
            span.record("outcome", "error");
            span.record("error", tracing::field::display(e));
        }
    }
}

impl Live {
    /// Whether the guest runs batched turns (it exports `batch`).
    pub fn batches(&self) -> bool {
        matches!(self.world, World::Batched(_))
    }

    /// Runs the turns `feed` hands out in one guest call (`batch.run`); the feed says which
    /// ran and what is left. A trap is the running turn's (see [`TurnFeed::finish`]).
    pub async fn batch(
        &mut self,
        feed: Box<dyn TurnFeed>,
    ) -> (Box<dyn TurnFeed>, Result<(), Crash>) {
        let World::Batched(w) = &self.world else {
            unreachable!("batch called on a guest without batched turns")
        };
        self.store.data_mut().feed = Some(feed);
        self.store.set_epoch_deadline(1);
        let r = w.sluice_actor_batch().call_run(&mut self.store).await;
        let data = self.store.data_mut();
        let feed = data
            .feed
            .take()
            .expect("the feed stays installed through the call");
        let r = r.map_err(|e| {
            let c = crash(&self.store, &e, "handle");
            let span = &self.store.data().turn.span;
            span.record("outcome", "crash");
            span.record("error", tracing::field::display(&c.error));
            c
        });
        // The last turn's span ends with the call.
        self.store.data_mut().turn.span = tracing::Span::none();
        (feed, r)
    }
}

/// Runs one turn on `l`. The message's type and payload move into the envelope (no copy);
/// the caller keeps the reply slot.
pub(crate) async fn turn(
    l: &mut Live,
    max_turn: Duration,
    msg: &mut Message,
    now: Instant,
) -> Result<Result<Vec<u8>, ActorError>, Crash> {
    let data = l.store.data_mut();
    let (env, span) = begin(&mut data.turn, &data.self_id, msg, now, max_turn);
    l.store.set_epoch_deadline(1);
    let r = match &l.world {
        World::One(w) => {
            w.sluice_actor_actor()
                .call_handle(&mut l.store, &env)
                .instrument(span.clone())
                .await
        }
        World::Batched(w) => {
            w.sluice_actor_actor()
                .call_handle(&mut l.store, &env)
                .instrument(span.clone())
                .await
        }
    };
    match r {
        Ok(r) => {
            let r = r.map_err(from_wit);
            record_outcome(&span, &r);
            Ok(r)
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
    actor: &ActorId,
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
