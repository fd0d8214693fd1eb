//! Batched turns: a guest that exports `batch` runs a queue of messages in one call, pulling
//! each from `turns.next`. Every call ends the running turn (its caller is answered before the
//! call returns) and starts the next with all a single turn has: its expiry checked as it
//! starts, its own `max_turn_ms`, its own span, its own count in the turn metrics. A message
//! is taken from the mailbox only when its turn starts, so a trap in turn k leaves every later
//! message queued, untouched, for the restarted instance; and the batch grows with the queue
//! (one message queued, one turn) up to `max_batch_turns`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cell::ActorCell;
use super::instance::{begin, record_outcome};
use crate::bindings::wit;
use crate::error::ActorError;
use crate::guest::{BatchEnd, Turn, TurnFeed};
use crate::message::Message;

/// One batch's view of its activation's mailbox.
pub(crate) struct Feed {
    cell: Arc<ActorCell>,
    /// The module version the batch runs: a deploy ends it, so later turns run the new code.
    version: u64,
    max_turns: u32,
    max_turn: Duration,
    started: u32,
    /// The message the supervisor took to start the batch with.
    first: Option<Message>,
    /// The message whose turn is running, and when it started.
    running: Option<(Message, Instant)>,
    /// The message taken when the batch ended (ending a turn and taking the next share one
    /// lock), for the supervisor's next turn.
    ready: Option<Message>,
    over: bool,
}

impl Feed {
    pub fn new(
        cell: Arc<ActorCell>,
        first: Message,
        version: u64,
        max_turns: u32,
        max_turn: Duration,
    ) -> Self {
        Self {
            cell,
            version,
            max_turns,
            max_turn,
            started: 0,
            first: Some(first),
            running: None,
            ready: None,
            over: false,
        }
    }
}

impl TurnFeed for Feed {
    fn next(
        &mut self,
        done: Option<Result<Vec<u8>, ActorError>>,
        turn: &mut Turn,
    ) -> Result<Option<wit::Envelope>, &'static str> {
        let mut candidate = match (self.running.take(), done) {
            (Some((msg, started)), Some(result)) => {
                self.cell.turn_ended(started, result.is_ok());
                record_outcome(&turn.span, &result);
                turn.span = tracing::Span::none();
                // The turn is over before its caller hears of it (see `ActorCell::pop`).
                let next = self.cell.pop();
                msg.answer(result);
                next
            }
            (None, None) if !self.over => self.first.take(),
            (None, None) => None,
            (Some(running), None) => {
                self.running = Some(running);
                return Err("turns.next: the running turn was not given its result");
            }
            (None, Some(_)) => return Err("turns.next: a result with no turn running"),
        };
        loop {
            let Some(mut msg) = candidate else {
                self.over = true;
                return Ok(None);
            };
            if self.over
                || self.started >= self.max_turns
                || self.cell.ty.current_version() != self.version
            {
                self.ready = Some(msg);
                self.over = true;
                return Ok(None);
            }
            let now = Instant::now();
            if msg.deadline.is_some_and(|d| d <= now) {
                let next = self.cell.pop();
                self.cell.skip(msg);
                candidate = next;
                continue;
            }
            self.started += 1;
            self.cell.turn_starts(&msg, now);
            let (env, span) = begin(turn, &self.cell.id, &mut msg, now, self.max_turn);
            turn.span = span;
            self.running = Some((msg, now));
            return Ok(Some(env));
        }
    }

    fn finish(&mut self) -> BatchEnd {
        BatchEnd {
            turns: self.started,
            // A first message the guest never asked for counts as running: it was the batch's.
            running: self.running.take().map(|(m, _)| m).or(self.first.take()),
            ready: self.ready.take(),
        }
    }
}
