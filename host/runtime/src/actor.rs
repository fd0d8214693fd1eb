//! One activation: its bounded mailbox, and the task that runs its turns one at a time.
//!
//! Turns are sequential by construction: a single task owns the instance's `Store` and pops
//! one message per turn. A trap, an interrupted turn or a memory-limit hit discards only this
//! instance; the supervisor logic here restarts it within the child's restart intensity.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sluice_flow::mailbox::{Mailbox, MailboxStrategy, Offer, ewma_micros, retry_after_ms};
use tokio::sync::{Notify, oneshot};
use wasmtime::{Store, UpdateDeadline};

use crate::admission::HostPermit;
use crate::bindings::{ActorWorld, wit};
use crate::error::{ActorError, OverloadScope, TellReceipt};
use crate::host::HostInner;
use crate::registry::{ActorId, ActorType, ModuleVersion};
use crate::slots::{Slot, Slots};
use crate::state::{StoreState, from_wit};

/// A reply slot for `ask`; `started` tells a timed-out caller whether its turn ever ran.
pub(crate) struct Reply {
    pub tx: oneshot::Sender<Result<Vec<u8>, ActorError>>,
    pub started: Arc<AtomicBool>,
}

/// A queued message.
pub(crate) struct Message {
    pub msg_type: String,
    pub payload: Vec<u8>,
    pub sender: Option<ActorId>,
    pub principal: Arc<str>,
    pub deadline: Option<Instant>,
    pub enqueued: Instant,
    pub reply: Option<Reply>,
    /// The message's slot in the host-wide admission depth (when that cap is on); released
    /// when the message is dropped — after its turn, a skip, a displacement or a stop.
    pub permit: Option<HostPermit>,
    /// A bus delivery's slot in its subscription's delivery window, released likewise.
    pub window_permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Message {
    fn answer(self, r: Result<Vec<u8>, ActorError>) {
        // Release the admission slot before the caller can observe the reply, so a caller
        // that got its answer never finds its own finished turn still counted.
        drop(self.permit);
        drop(self.window_permit);
        if let Some(reply) = self.reply {
            // The caller may have given up (timeout); that is not an error here.
            let _ = reply.tx.send(r);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InboxState {
    Open,
    /// Deactivated: senders must look the actor up again (a fresh activation).
    Closed,
    /// The supervisor gave up: senders get `UNAVAILABLE` until the type is redeployed.
    Stopped,
}

pub(crate) struct Inbox {
    pub mb: Mailbox<Message>,
    pub state: InboxState,
    /// The actor's task holds a popped message (its turn is running or about to). Set by
    /// every `pop`, so admission's actor depth `mb.len() + running` is read under one lock.
    pub running: bool,
}

/// What the rest of the host holds of an activation.
pub(crate) struct ActorCell {
    pub id: ActorId,
    pub ty: Arc<ActorType>,
    pub inbox: Mutex<Inbox>,
    pub notify: Notify,
    /// Mean turn time, for the mailbox-full retry hint. Relaxed: a statistic.
    pub mean_turn_us: AtomicU64,
    /// Pending `schedule` timers.
    pub timers: AtomicUsize,
    /// Supervised instances are activated eagerly and never idle-deactivated.
    pub eager: bool,
    /// When its last turn started, as nanoseconds since [`clock_origin`] (LRU order).
    pub last_active: AtomicU64,
    /// An instance of this activation is alive (set once it is instantiated, cleared when it
    /// is dropped).
    pub live: AtomicBool,
    /// The activation's counted slot under `max_activations`, taken when the cell was
    /// created and held until it ends (across crashes, restarts and deploys); taken away by
    /// an eviction (see `slots.rs`).
    pub slot: Mutex<Option<Slot>>,
}

/// Why an offer did not land in this cell.
pub(crate) enum OfferError {
    /// The cell was deactivated meanwhile; look it up again.
    Closed,
    Refused(ActorError),
}

impl ActorCell {
    pub fn new(
        id: ActorId,
        ty: Arc<ActorType>,
        capacity: usize,
        strategy: MailboxStrategy,
        eager: bool,
        slot: Slot,
    ) -> Self {
        Self {
            id,
            ty,
            inbox: Mutex::new(Inbox {
                mb: Mailbox::new(capacity, strategy),
                state: InboxState::Open,
                running: false,
            }),
            notify: Notify::new(),
            mean_turn_us: AtomicU64::new(0),
            timers: AtomicUsize::new(0),
            eager,
            last_active: AtomicU64::new(since_origin(Instant::now())),
            live: AtomicBool::new(false),
            slot: Mutex::new(Some(slot)),
        }
    }

    /// Offers the message `make` builds. The message is only built once it will be queued
    /// (or displace another), so a refusal by a full `error` or `drop_newest` mailbox
    /// allocates nothing. `make` is called at most once.
    ///
    /// `cap` is the admission cap for this offer (0 = none; always 0 for calls from inside a
    /// chain): the offer is refused `OVERLOADED` when queued + running already reach it.
    pub fn offer(
        &self,
        make: &mut dyn FnMut() -> Message,
        cap: u64,
    ) -> Result<TellReceipt, OfferError> {
        let mut inbox = self.inbox.lock();
        match inbox.state {
            InboxState::Open => {}
            InboxState::Closed => return Err(OfferError::Closed),
            InboxState::Stopped => {
                return Err(OfferError::Refused(ActorError::unavailable(
                    "actor stopped by its supervisor (restart intensity exceeded)",
                )));
            }
        }
        if cap > 0 {
            let depth = inbox.mb.len() as u64 + u64::from(inbox.running);
            if depth >= cap {
                drop(inbox);
                return Err(OfferError::Refused(ActorError::overloaded(
                    OverloadScope::Actor,
                    depth,
                    cap,
                )));
            }
        }
        if inbox.mb.is_full() {
            match inbox.mb.strategy() {
                MailboxStrategy::Error => {
                    let depth = inbox.mb.len();
                    let running = inbox.running;
                    drop(inbox);
                    self.ty.metrics.refused.increment(1);
                    // The coarse clock (one atomic load, no syscall) keeps this path cheap;
                    // `last_active` is stamped when a turn starts.
                    let running_us = if running {
                        coarse_now().saturating_sub(self.last_active.load(Ordering::Relaxed)) / 1000
                    } else {
                        0
                    };
                    let hint = retry_after_ms(
                        depth,
                        self.mean_turn_us.load(Ordering::Relaxed),
                        running_us,
                    );
                    return Err(OfferError::Refused(ActorError::mailbox_full(hint)));
                }
                MailboxStrategy::DropNewest => {
                    drop(inbox);
                    self.ty.metrics.dropped_newest.increment(1);
                    return Ok(TellReceipt::DroppedNewest);
                }
                MailboxStrategy::DropOldest => {}
            }
        }
        let out = match inbox.mb.offer(make()) {
            Offer::Queued => TellReceipt::Queued,
            Offer::DisplacedOldest(old) => {
                self.ty.metrics.dropped_oldest.increment(1);
                drop(inbox);
                old.answer(Err(ActorError::new(
                    crate::ErrorCode::ResourceExhausted,
                    "message dropped from a full mailbox (strategy=drop_oldest)",
                )));
                self.notify.notify_one();
                return Ok(TellReceipt::DisplacedOldest);
            }
            // Unreachable after the is_full check above; kept total for safety.
            Offer::DroppedNewest(_) => TellReceipt::DroppedNewest,
            Offer::Full(_) => return Err(OfferError::Refused(ActorError::mailbox_full(1))),
        };
        drop(inbox);
        self.notify.notify_one();
        Ok(out)
    }

    /// Messages queued and when the oldest of them arrived.
    pub fn queue(&self) -> (usize, Option<Instant>) {
        let inbox = self.inbox.lock();
        (inbox.mb.len(), inbox.mb.front().map(|m| m.enqueued))
    }

    /// Takes the next message, marking the actor as running it. Also ends the previous turn
    /// (if any) under the same lock, so a caller that got that turn's reply never finds it
    /// still counted: the actor is then `running` only for the message it took here.
    fn pop(&self) -> Option<Message> {
        let mut inbox = self.inbox.lock();
        let m = inbox.mb.pop();
        inbox.running = m.is_some();
        m
    }
}

/// A live instance.
struct Live {
    store: Store<StoreState>,
    world: ActorWorld,
    version: u64,
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

/// The process-wide origin of `last_active` stamps.
fn clock_origin() -> Instant {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// `t` as nanoseconds since [`clock_origin`] (0 for instants before it).
fn since_origin(t: Instant) -> u64 {
    t.saturating_duration_since(clock_origin()).as_nanos() as u64
}

/// [`since_origin`] of the last epoch tick (at most [`crate::engine::EPOCH_TICK`] old): a
/// clock for paths that must not pay for reading the real one.
static COARSE_NOW: AtomicU64 = AtomicU64::new(0);

/// Advances the coarse clock; the epoch ticker calls it every tick.
pub(crate) fn tick_coarse_clock() {
    COARSE_NOW.fetch_max(since_origin(Instant::now()), Ordering::Relaxed);
}

pub(crate) fn coarse_now() -> u64 {
    COARSE_NOW.load(Ordering::Relaxed)
}

/// Marker error raised from the epoch callback when a turn overruns `max_turn_ms`.
#[derive(Debug)]
struct TurnInterrupted;

impl std::fmt::Display for TurnInterrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("turn interrupted: exceeded max_turn_ms")
    }
}

impl std::error::Error for TurnInterrupted {}

/// Runs an activation until it is deactivated, stopped, or the host shuts down; then gives
/// its slot back (after its instance is gone).
pub(crate) async fn run(cell: Arc<ActorCell>, host: Arc<HostInner>) {
    serve(&cell, &host).await;
    drop(cell.slot.lock().take());
    cell.ty.metrics.deactivations.increment(1);
}

async fn serve(cell: &Arc<ActorCell>, host: &Arc<HostInner>) {
    let mut live: Option<Live> = None;
    let mut crashes: VecDeque<Instant> = VecDeque::new();
    let idle = (!cell.eager && host.config.idle_deactivate_ms > 0)
        .then(|| Duration::from_millis(host.config.idle_deactivate_ms));

    if cell.eager {
        let module = cell.ty.current();
        match activate(cell, host, &module).await {
            Ok(l) => live = Some(l),
            Err(e) => {
                tracing::warn!(actor = %cell.id, error = %e, "eager activation failed");
                if !may_restart(&mut crashes, &module, &e) {
                    stop(cell);
                    return;
                }
            }
        }
    }

    // The message taken when the previous turn ended (under the same lock), if one was queued.
    let mut ready: Option<Message> = None;
    loop {
        let mut msg = match ready.take() {
            Some(m) => m,
            None => match next(cell, host, idle).await {
                Some(m) => m,
                None => return,
            },
        };
        let now = Instant::now();
        if msg.deadline.is_some_and(|d| d <= now) {
            // The caller has given up; running the turn would spend capacity on a reply
            // nobody reads.
            cell.ty.metrics.turns_skipped.increment(1);
            cell.inbox.lock().running = false;
            msg.answer(Err(ActorError::deadline_exceeded(true)));
            continue;
        }
        if let Some(r) = &msg.reply {
            r.started.store(true, Ordering::Release);
        }
        cell.ty
            .metrics
            .queue_seconds
            .record(now.duration_since(msg.enqueued).as_secs_f64());

        if live
            .as_ref()
            .is_some_and(|l| l.version != cell.ty.current_version())
        {
            // A deploy happened: the previous turn finished on the old code; this one and
            // every later one run on the new code.
            live = None;
        }
        if live.is_none() {
            let module = cell.ty.current();
            match activate(cell, host, &module).await {
                Ok(l) => live = Some(l),
                Err(e) => {
                    cell.inbox.lock().running = false;
                    let restart = may_restart(&mut crashes, &module, &e);
                    msg.answer(Err(e));
                    if !restart {
                        stop(cell);
                        return;
                    }
                    continue;
                }
            }
        }
        let l = live.as_mut().expect("activated above");
        cell.last_active.store(since_origin(now), Ordering::Relaxed);
        host.inflight.fetch_add(1, Ordering::Relaxed);
        let outcome = turn(l, host, &mut msg, now).await;
        host.inflight.fetch_sub(1, Ordering::Relaxed);
        let took = now.elapsed();
        cell.ty.metrics.turn_seconds.record(took.as_secs_f64());
        let prev = cell.mean_turn_us.load(Ordering::Relaxed);
        cell.mean_turn_us.store(
            ewma_micros(prev, took.as_micros() as u64),
            Ordering::Relaxed,
        );
        match outcome {
            TurnOutcome::Reply(r) => {
                if r.is_ok() {
                    cell.ty.metrics.turns_ok.increment(1);
                } else {
                    cell.ty.metrics.turns_err.increment(1);
                }
                // The turn is over before anyone hears of it: a caller that got its reply
                // must never find this actor still counted as mid-turn (admission depth, LRU
                // eviction). Ending it and taking the next message share one lock.
                ready = cell.pop();
                msg.answer(r);
            }
            TurnOutcome::Crashed(e) => {
                cell.ty.metrics.traps.increment(1);
                let module = cell.ty.current();
                tracing::warn!(actor = %cell.id, error = %e, "actor instance crashed; discarding it");
                live = None;
                let restart = may_restart(&mut crashes, &module, &e);
                msg.answer(Err(e));
                if !restart {
                    cell.inbox.lock().running = false;
                    stop(cell);
                    return;
                }
                cell.ty.metrics.restarts.increment(1);
                // Restart now so `init` runs before the next message, as a supervisor would.
                // The actor still counts as busy meanwhile, so it is never evicted mid-restart.
                match activate(cell, host, &module).await {
                    Ok(l) => live = Some(l),
                    Err(e) => {
                        tracing::warn!(actor = %cell.id, error = %e, "restart failed; will retry on the next message")
                    }
                }
                cell.inbox.lock().running = false;
            }
        }
    }
}

/// Waits for the next message; `None` when the activation should end: closed (evicted to
/// make room, see `slots.rs`), idle for `idle`, or the host is shutting down.
async fn next(cell: &Arc<ActorCell>, host: &HostInner, idle: Option<Duration>) -> Option<Message> {
    loop {
        {
            let mut inbox = cell.inbox.lock();
            let m = inbox.mb.pop();
            inbox.running = m.is_some();
            if m.is_some() {
                return m;
            }
            if inbox.state == InboxState::Closed {
                return None;
            }
        }
        if host.is_shutting_down() {
            return None;
        }
        // notify_one stores a permit when nobody waits, so a push (or a close) between the
        // check above and here is not lost.
        match idle {
            None => cell.notify.notified().await,
            Some(d) => {
                if tokio::time::timeout(d, cell.notify.notified())
                    .await
                    .is_err()
                    && try_deactivate(cell)
                {
                    return None;
                }
            }
        }
    }
}

/// Deactivates an idle cell unless a message slipped in. Lock order: type's cell map, then
/// the inbox — the same order senders never hold both in, so this cannot deadlock.
fn try_deactivate(cell: &Arc<ActorCell>) -> bool {
    let mut cells = cell.ty.cells.lock();
    let mut inbox = cell.inbox.lock();
    if !inbox.mb.is_empty() {
        return false;
    }
    inbox.state = InboxState::Closed;
    if cells
        .get(cell.id.key())
        .is_some_and(|c| Arc::ptr_eq(c, cell))
    {
        cells.remove(cell.id.key());
    }
    true
}

/// The supervisor gave up: refuse new messages and fail the queued ones.
fn stop(cell: &ActorCell) {
    cell.ty.metrics.stopped.increment(1);
    tracing::error!(actor = %cell.id, "restart intensity exceeded; actor stopped");
    let queued: Vec<Message> = {
        let mut inbox = cell.inbox.lock();
        inbox.state = InboxState::Stopped;
        inbox.mb.drain().collect()
    };
    for m in queued {
        m.answer(Err(ActorError::unavailable(
            "actor stopped by its supervisor (restart intensity exceeded)",
        )));
    }
}

/// Records a failure; false when the restart intensity (N in T) is exceeded. A capacity
/// refusal (the engine's pool momentarily out of a kind of slot) is not the actor's fault and
/// never counts.
fn may_restart(crashes: &mut VecDeque<Instant>, module: &ModuleVersion, e: &ActorError) -> bool {
    if e.is_capacity() {
        return true;
    }
    let window = Duration::from_millis(module.spec.restart_window_ms);
    record_crash(crashes, module.spec.max_restarts, window, Instant::now())
}

/// Records a crash at `now`; false when more than `max` crashes fall within `window`.
fn record_crash(crashes: &mut VecDeque<Instant>, max: u32, window: Duration, now: Instant) -> bool {
    while crashes
        .front()
        .is_some_and(|t| now.duration_since(*t) > window)
    {
        crashes.pop_front();
    }
    crashes.push_back(now);
    crashes.len() <= max as usize
}

/// Instantiates the module and runs `init`, in the cell's slot (after the instance of the
/// activation it was taken from, if any, is gone).
async fn activate(
    cell: &Arc<ActorCell>,
    host: &Arc<HostInner>,
    module: &ModuleVersion,
) -> Result<Live, ActorError> {
    let predecessor = cell.slot.lock().as_mut().and_then(Slot::take_predecessor);
    if let Some(p) = predecessor {
        crate::slots::wait_until_dropped(&p, &host.slots).await;
    }
    let max_turn = Duration::from_millis(host.config.max_turn_ms);
    let state = StoreState::new(
        host.clone(),
        cell.id.clone(),
        module.wasi.clone(),
        module.memory_limit,
        max_turn,
    );
    let mut store = Store::new(&host.engine, state);
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
        Err(e) => return Err(classify(&store, &cell.id, e, "instantiating")),
    };
    cell.live.store(true, Ordering::Release);
    let mut live = Live {
        store,
        world,
        version: module.version,
        _dropped: InstanceDropped {
            cell: cell.clone(),
            slots: host.slots.clone(),
        },
    };
    match live
        .world
        .sluice_actor_actor()
        .call_init(&mut live.store, &module.init_json)
        .await
    {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(from_wit(e)),
        Err(e) => return Err(classify(&live.store, &cell.id, e, "init")),
    }
    cell.ty.metrics.activations.increment(1);
    Ok(live)
}

enum TurnOutcome {
    Reply(Result<Vec<u8>, ActorError>),
    Crashed(ActorError),
}

/// Runs one turn. The message's type and payload move into the envelope (no copy); the
/// caller keeps the reply slot.
async fn turn(l: &mut Live, host: &HostInner, msg: &mut Message, now: Instant) -> TurnOutcome {
    let env = wit::Envelope {
        sender: msg.sender.as_ref().map(|s| String::from(s.as_str())),
        msg_type: std::mem::take(&mut msg.msg_type),
        payload: std::mem::take(&mut msg.payload),
        principal: String::from(&*msg.principal),
        deadline_ms: msg
            .deadline
            .map(|d| d.saturating_duration_since(now).as_millis() as u64),
    };
    let t = &mut l.store.data_mut().turn;
    t.started = now;
    t.waited = Duration::ZERO;
    t.deadline = msg.deadline;
    t.max_turn = Duration::from_millis(host.config.max_turn_ms);
    // The turn's principal moves in; the message keeps the previous one (no refcount churn).
    std::mem::swap(&mut t.principal, &mut msg.principal);
    l.store.set_epoch_deadline(1);
    match l
        .world
        .sluice_actor_actor()
        .call_handle(&mut l.store, &env)
        .await
    {
        Ok(Ok(bytes)) => TurnOutcome::Reply(Ok(bytes)),
        Ok(Err(e)) => TurnOutcome::Reply(Err(from_wit(e))),
        Err(e) => TurnOutcome::Crashed(classify(&l.store, &l.store.data().self_id, e, "handle")),
    }
}

/// Turns a trap into the error the caller sees.
fn classify(
    store: &Store<StoreState>,
    id: &ActorId,
    e: wasmtime::Error,
    phase: &str,
) -> ActorError {
    if store.data().limiter.hit {
        let mb = store.data().limiter.limit >> 20;
        return ActorError::new(
            crate::ErrorCode::ResourceExhausted,
            format!(
                "actor {id} exceeded its memory limit of {mb} MiB during {phase}; instance restarted"
            ),
        );
    }
    if e.downcast_ref::<TurnInterrupted>().is_some() {
        return ActorError::internal(format!(
            "actor {id} interrupted: {phase} ran longer than max_turn_ms={}; instance restarted",
            store.data().turn.max_turn.as_millis()
        ));
    }
    let text = format!("{e:#}");
    // `reserve_slot` already holds activations to `max_activations`: a pool limit here is the
    // pool running out of one kind of slot first (a component using more memories or tables
    // than the pool was sized for); say which.
    if let Some(what) = text
        .lines()
        .find(|l| l.contains("maximum concurrent") || l.contains("instance count"))
    {
        let what = what.trim();
        return ActorError::new(
            crate::ErrorCode::ResourceExhausted,
            format!(
                "instance pool exhausted before max_activations ({what}); cannot activate {id}"
            ),
        );
    }
    let first = text.lines().next().unwrap_or("trap").to_string();
    ActorError::internal(format!("actor {id} trapped during {phase}: {first}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_intensity_counts_only_crashes_within_the_window() {
        let (t0, w) = (Instant::now(), Duration::from_secs(10));
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut c = VecDeque::new();
        // 3 restarts in 10 s are allowed; a 4th crash within the window is not.
        assert!(record_crash(&mut c, 3, w, at(0)));
        assert!(record_crash(&mut c, 3, w, at(1)));
        assert!(record_crash(&mut c, 3, w, at(2)));
        assert!(!record_crash(&mut c.clone(), 3, w, at(3)));
        // At 11 s the crash at 0 s is more than 10 s old and no longer counts; 1, 2 and 11 do.
        assert!(record_crash(&mut c, 3, w, at(11)));
        assert_eq!(c, [at(1), at(2), at(11)]);
        // Without restarts allowed, the first crash stops the actor.
        assert!(!record_crash(&mut VecDeque::new(), 0, w, at(0)));
    }
}
