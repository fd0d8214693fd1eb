//! The task that runs one activation: it takes one message at a time from the cell's mailbox
//! (so turns are sequential by construction; a guest with batched turns takes the queue behind
//! it the same way, one `turns.next` at a time, in one call), skips the expired, brings the instance up and
//! restarts it after a crash within the child's restart intensity, and ends the activation
//! when it is evicted, idle, stopped or the host shuts down — then gives its slot back.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sluice_flow::supervision::RestartIntensity;

use super::batch::Feed;
use super::cell::{ActorCell, InboxState};
use super::env::Env;
use super::instance::{Crash, Live, activate, turn};
use super::module::ModuleVersion;
use super::registry::TypeEntry;
use super::trap::Failure;
use crate::error::ActorError;
use crate::message::Message;

/// Runs the activation `cell` of `entry`'s type until it ends.
pub(crate) async fn run(cell: Arc<ActorCell>, entry: Arc<TypeEntry>, env: Arc<Env>) {
    activation_log(&cell, "activated");
    Supervisor::new(&cell, &entry, &env).serve().await;
    // The instance is gone by now; the slot goes back.
    drop(cell.slot.lock().take());
    cell.ty.metrics.deactivations.increment(1);
    activation_log(&cell, "deactivated");
    if let Some(hooks) = env.activations()
        && (!cell.eager || hooks.places_supervised())
    {
        hooks.ended(&cell.id);
    }
}

/// The activation log: one debug event as an activation starts and one as it has ended (before
/// a cluster releases its claim), target `sluice::activations`, with the wall clock in unix
/// ms so the logs of several hosts line up. `RUST_LOG=info,sluice::activations=debug` shows it;
/// the cluster tests read it to prove no key ran on two hosts at once.
fn activation_log(cell: &ActorCell, what: &str) {
    let at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    tracing::debug!(target: "sluice::activations", actor = %cell.id, at_ms, "{what}");
}

struct Supervisor<'a> {
    cell: &'a Arc<ActorCell>,
    entry: &'a TypeEntry,
    env: &'a Env,
    live: Option<Live>,
    intensity: RestartIntensity,
    /// How long a keyed actor may idle before it is deactivated; `None` = never.
    idle: Option<Duration>,
}

impl<'a> Supervisor<'a> {
    fn new(cell: &'a Arc<ActorCell>, entry: &'a TypeEntry, env: &'a Env) -> Self {
        let spec = &cell.ty.current().spec;
        Self {
            cell,
            entry,
            env,
            live: None,
            intensity: RestartIntensity::new(
                spec.max_restarts,
                Duration::from_millis(spec.restart_window_ms),
            ),
            idle: (!cell.eager && env.config.idle_deactivate_ms > 0)
                .then(|| Duration::from_millis(env.config.idle_deactivate_ms)),
        }
    }

    async fn serve(mut self) {
        let cell = self.cell;
        if cell.eager {
            let module = cell.ty.current();
            if let Err(c) = self.bring_up(&module).await {
                tracing::warn!(actor = %cell.id, error = %c.error, "eager activation failed");
                if !self.may_restart(&module, c.failure) {
                    self.stop();
                    return;
                }
            }
        }
        // The message taken when the previous turn ended (under the same lock), if any.
        let mut ready: Option<Message> = None;
        loop {
            let mut msg = match ready.take() {
                Some(m) => m,
                None => match next(cell, self.entry, self.env, self.idle).await {
                    Some(m) => m,
                    None => return,
                },
            };
            if self.env.fences(cell.eager) {
                msg.answer(Err(fenced(&cell.id)));
                self.end_fenced();
                return;
            }
            let now = Instant::now();
            if msg.deadline.is_some_and(|d| d <= now) {
                cell.inbox.lock().running = false;
                cell.skip(msg);
                continue;
            }
            if self
                .live
                .as_ref()
                .is_some_and(|l| l.version != cell.ty.current_version())
            {
                // A deploy happened: the previous turn finished on the old code; this one and
                // every later one run on the new code.
                self.live = None;
            }
            if self.live.is_none() {
                let module = cell.ty.current();
                if let Err(c) = self.bring_up(&module).await {
                    cell.inbox.lock().running = false;
                    let restart = self.may_restart(&module, c.failure);
                    msg.answer(Err(c.error));
                    if !restart {
                        self.stop();
                        return;
                    }
                    continue;
                }
            }
            let l = self.live.as_ref().expect("brought up above");
            // One message queued is one call to `handle`; more, and a guest with batched
            // turns takes them in one call.
            if l.batches() && cell.has_queued() {
                match self.batch(msg).await {
                    Some(next) => ready = next,
                    None => return,
                }
                continue;
            }
            let l = self.live.as_mut().expect("brought up above");
            cell.turn_starts(&msg, now);
            self.env.inflight.fetch_add(1, Ordering::Relaxed);
            let max_turn = Duration::from_millis(self.env.config.max_turn_ms);
            let outcome = turn(l, max_turn, &mut msg, now).await;
            self.env.inflight.fetch_sub(1, Ordering::Relaxed);
            match outcome {
                Ok(reply) => {
                    cell.turn_ended(now, reply.is_ok());
                    // The turn is over before anyone hears of it: a caller that got its reply
                    // must never find this actor still counted as mid-turn (admission depth,
                    // LRU eviction). Ending it and taking the next message share one lock.
                    ready = cell.pop();
                    msg.answer(reply);
                }
                Err(c) => {
                    if !self.crashed(c, Some(msg)).await {
                        return;
                    }
                }
            }
        }
    }

    /// Runs `first` and the messages queued behind it in one guest call (see `batch.rs`).
    /// The message taken for the next turn, or `None` when the actor was stopped.
    async fn batch(&mut self, first: Message) -> Option<Option<Message>> {
        let cell = self.cell;
        let l = self.live.as_mut().expect("a live instance runs the batch");
        let config = &self.env.config;
        let feed = Feed::new(
            cell.clone(),
            first,
            l.version,
            config.max_batch_turns,
            Duration::from_millis(config.max_turn_ms),
        );
        self.env.inflight.fetch_add(1, Ordering::Relaxed);
        let (mut feed, outcome) = l.batch(Box::new(feed)).await;
        self.env.inflight.fetch_sub(1, Ordering::Relaxed);
        let end = feed.finish();
        cell.ty.metrics.batches.increment(1);
        cell.ty
            .metrics
            .batched_turns
            .increment(u64::from(end.turns));
        match outcome {
            Ok(()) => {
                // Taking the next message ends the running turn's count (see `ActorCell::pop`).
                let ready = end.ready.or_else(|| cell.pop());
                if let Some(m) = end.running {
                    cell.ty.metrics.turns_err.increment(1);
                    m.answer(Err(ActorError::internal(
                        "the guest's batch.run returned before ending its turn",
                    )));
                }
                Some(ready)
            }
            Err(c) => {
                if !self.crashed(c, end.running).await {
                    // The message already taken for the next turn goes the way of the queue.
                    if let Some(m) = end.ready {
                        m.answer(Err(if self.env.fences(cell.eager) {
                            fenced(&cell.id)
                        } else {
                            ActorError::unavailable(STOPPED)
                        }));
                    }
                    return None;
                }
                if end.ready.is_some() {
                    cell.inbox.lock().running = true;
                }
                Some(end.ready)
            }
        }
    }

    /// A turn crashed: count it, answer its caller, and restart the instance (before the
    /// next message, as a supervisor would) unless restart intensity is exceeded. False when
    /// the actor was stopped.
    async fn crashed(&mut self, c: Crash, msg: Option<Message>) -> bool {
        let cell = self.cell;
        if c.failure == Failure::Fenced {
            tracing::warn!(actor = %cell.id, "cluster lease lapsed: turn interrupted, activation ended");
            if let Some(msg) = msg {
                msg.answer(Err(c.error));
            }
            self.end_fenced();
            return false;
        }
        match c.failure {
            Failure::Interrupted => cell.ty.metrics.turns_interrupted.increment(1),
            _ => cell.ty.metrics.turns_trapped.increment(1),
        }
        cell.ty.metrics.traps.increment(1);
        tracing::warn!(actor = %cell.id, error = %c.error, "actor instance crashed; discarding it");
        self.live = None;
        let module = cell.ty.current();
        let restart = self.may_restart(&module, c.failure);
        if let Some(msg) = msg {
            msg.answer(Err(c.error));
        }
        if !restart {
            cell.inbox.lock().running = false;
            self.stop();
            return false;
        }
        cell.ty.metrics.restarts.increment(1);
        // The actor still counts as busy meanwhile, so it is never evicted mid-restart.
        if let Err(c) = self.bring_up(&module).await {
            tracing::warn!(actor = %cell.id, error = %c.error, "restart failed; will retry on the next message");
        }
        cell.inbox.lock().running = false;
        true
    }

    async fn bring_up(&mut self, module: &ModuleVersion) -> Result<(), Crash> {
        self.live = Some(activate(self.cell, self.env, module).await?);
        Ok(())
    }

    /// Records a failure; false when the restart intensity (N in T) is exceeded. A capacity
    /// failure is not the actor's fault and never counts.
    fn may_restart(&mut self, module: &ModuleVersion, failure: Failure) -> bool {
        if failure == Failure::Capacity {
            return true;
        }
        let spec = &module.spec;
        self.intensity.set_limits(
            spec.max_restarts,
            Duration::from_millis(spec.restart_window_ms),
        );
        self.intensity.record(Instant::now())
    }

    /// The host was fenced: the activation ends here, its queued messages fail
    /// `UNAVAILABLE`, and senders look the key up afresh (where the hooks refuse it until the
    /// fence is lifted, or route it to the host that holds it now).
    fn end_fenced(&mut self) {
        let cell = self.cell;
        self.live = None;
        let queued: Vec<Message> = {
            let mut inbox = cell.inbox.lock();
            if inbox.state == InboxState::Open {
                inbox.state = InboxState::Closed;
            }
            inbox.running = false;
            inbox.mb.drain().collect()
        };
        self.entry.forget(cell);
        for m in queued {
            m.answer(Err(fenced(&cell.id)));
        }
    }

    /// The supervisor gave up: refuse new messages and fail the queued ones.
    fn stop(&mut self) {
        let cell = self.cell;
        self.live = None;
        cell.ty.metrics.stopped.increment(1);
        tracing::error!(actor = %cell.id, "restart intensity exceeded; actor stopped");
        let queued: Vec<Message> = {
            let mut inbox = cell.inbox.lock();
            inbox.state = InboxState::Stopped;
            inbox.mb.drain().collect()
        };
        for m in queued {
            m.answer(Err(ActorError::unavailable(STOPPED)));
        }
    }
}

/// What the queue of an actor its supervisor stopped gets.
const STOPPED: &str = "actor stopped by its supervisor (restart intensity exceeded)";

/// What a message to an activation that a fence ended gets.
fn fenced(id: &crate::id::ActorId) -> ActorError {
    ActorError::unavailable(format!(
        "actor {id} stopped here: this host's cluster lease lapsed (retry: the actor moves to a host that holds it)"
    ))
}

/// Waits for the next message of `cell`; `None` when the activation should end: closed (evicted to
/// make room), idle for `idle`, fenced, or the host is shutting down.
async fn next(
    cell: &ActorCell,
    entry: &TypeEntry,
    env: &Env,
    idle: Option<Duration>,
) -> Option<Message> {
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
        if env.is_shutting_down() {
            return None;
        }
        if env.fences(cell.eager) && entry.close_if(cell, |inbox| inbox.mb.is_empty()) {
            return None;
        }
        // notify_one stores a permit when nobody waits, so a push (or a close) between
        // the check above and here is not lost.
        match idle {
            None => cell.notify.notified().await,
            Some(d) => {
                if tokio::time::timeout(d, cell.notify.notified())
                    .await
                    .is_err()
                    && entry.close_if(cell, |inbox| inbox.mb.is_empty())
                {
                    return None;
                }
            }
        }
    }
}
