//! The cluster's [`Route`]: every tell and ask this host makes finds the actor's owner —
//! this host under a claim it holds, the live member the directory names, or the member
//! placement picks for an actor that runs nowhere — and goes there. Turns, mailboxes and
//! flow control do not know: a refusal on another host comes back as the same typed error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use sluice_cluster::directory::ClaimOutcome;
use sluice_cluster::placement;
use sluice_cluster::transport::{self as t, CallKind, Outcome};
use sluice_runtime::{ActorError, ActorId, Outgoing, Route, TellReceipt};

use crate::claims::State;
use crate::errors::from_record;
use crate::shared::Shared;

/// How many times a call follows a move (an owner that changed while it was routed) before
/// it gives up with `UNAVAILABLE`.
const MAX_HOPS: usize = 6;
/// How long a call waits for a release under way on this host before placing again.
const RELEASE_WAIT: Duration = Duration::from_secs(2);

/// Where a call goes.
pub(crate) enum Target {
    Here,
    /// The member that runs it (shared with the owner hints: cloning it allocates nothing).
    There(Arc<str>),
}

/// What a delivery gave.
enum Delivered {
    Receipt(TellReceipt),
    Reply(Vec<u8>),
}

/// The route a clustered host installs.
pub struct ClusterRoute(pub(crate) Arc<Shared>);

#[async_trait]
impl Route for ClusterRoute {
    async fn tell(&self, to: &ActorId, msg: Outgoing) -> Result<TellReceipt, ActorError> {
        match self.deliver(to, msg, CallKind::Tell).await? {
            Delivered::Receipt(r) => Ok(r),
            Delivered::Reply(_) => Err(ActorError::internal("a tell was answered with a reply")),
        }
    }

    async fn ask(&self, to: &ActorId, msg: Outgoing) -> Result<Vec<u8>, ActorError> {
        match self.deliver(to, msg, CallKind::Ask).await? {
            Delivered::Reply(p) => Ok(p),
            Delivered::Receipt(_) => {
                Err(ActorError::internal("an ask was answered with a receipt"))
            }
        }
    }

    async fn deliver_here(
        &self,
        to: &ActorId,
        here: &mut (dyn FnMut() -> Result<TellReceipt, ActorError> + Send),
    ) -> Option<Result<TellReceipt, ActorError>> {
        let s = &self.0;
        let target = match s.known(to) {
            Some(known) => Ok(known),
            None => Box::pin(s.locate_by(to, None)).await,
        };
        match target {
            Err(e) => Some(Err(e)),
            Ok(Target::There(_)) => None,
            Ok(Target::Here) => {
                let r = here();
                // A claim won for this delivery that was then refused activates nothing.
                if r.is_err() && matches!(s.claims.state(to), State::Held) {
                    s.claims.settle(to);
                }
                Some(r)
            }
        }
    }
}

impl ClusterRoute {
    async fn deliver(
        &self,
        to: &ActorId,
        mut msg: Outgoing,
        kind: CallKind,
    ) -> Result<Delivered, ActorError> {
        let s = &self.0;
        // An ask travels with its whole budget, resolved here as the local path would.
        if kind == CallKind::Ask && msg.opts.deadline.is_none() && !msg.opts.internal {
            msg.opts.deadline = s.host.config().call_timeout().map(|t| Instant::now() + t);
        }
        let payload = Bytes::from(msg.payload);
        for _ in 0..MAX_HOPS {
            // Finding the owner can take directory round trips; the call's deadline bounds
            // them too. Dropping `locate` part-way is safe: a claim it won but did not record
            // is this incarnation's, and counts as claimed the next time it is claimed.
            let target = match s.known(to) {
                Some(known) => known,
                // Boxed: the directory's futures are kilobytes, and the common case (an owner
                // already known) should not carry them in every call's future.
                None => Box::pin(s.locate_by(to, msg.opts.deadline)).await?,
            };
            match target {
                Target::Here => {
                    let r = match kind {
                        CallKind::Tell => s
                            .host
                            .tell_here(to, &msg.msg_type, payload.to_vec(), &msg.opts)
                            .map(Delivered::Receipt),
                        CallKind::Ask => match s.host.offer_ask_here(
                            to,
                            msg.msg_type.clone(),
                            payload.to_vec(),
                            &msg.opts,
                        ) {
                            Ok(wait) => wait.await.map(Delivered::Reply),
                            Err(e) => Err(e),
                        },
                    };
                    match r {
                        Err(_) if !matches!(s.claims.state(to), State::Held) => continue,
                        Err(e) => {
                            s.claims.settle(to);
                            return Err(e);
                        }
                        ok => return ok,
                    }
                }
                Target::There(node) => {
                    let call = t::Outgoing {
                        kind,
                        target: to.as_str().to_string(),
                        msg_type: msg.msg_type.clone(),
                        payload: payload.clone(),
                        sender: msg.opts.sender.as_ref().map(|a| a.as_str().to_string()),
                        principal: msg.opts.principal.as_deref().map(str::to_string),
                        deadline: msg.opts.deadline,
                        internal: msg.opts.internal,
                        trace: msg.opts.trace.map(|t| t.to_string()),
                    };
                    let outcome = match kind {
                        CallKind::Tell => {
                            Some(s.batcher.tell(&node, call).await.unwrap_or_else(|| {
                                Outcome::Failed(t::ErrorRecord::unavailable(&format!(
                                    "the sender to host {node} stopped before a receipt came"
                                )))
                            }))
                        }
                        CallKind::Ask => Box::pin(s.client.send(&node, vec![call])).await.pop(),
                    };
                    match outcome {
                        Some(Outcome::Receipt(r)) => {
                            return Ok(Delivered::Receipt(match r {
                                t::TellReceipt::Queued => TellReceipt::Queued,
                                t::TellReceipt::DisplacedOldest => TellReceipt::DisplacedOldest,
                                t::TellReceipt::DroppedNewest => TellReceipt::DroppedNewest,
                            }));
                        }
                        Some(Outcome::Replied(p)) => return Ok(Delivered::Reply(p.to_vec())),
                        Some(Outcome::Moved(owner)) => {
                            s.note_owner(to, (!owner.is_empty()).then(|| owner.into()));
                        }
                        Some(Outcome::Failed(e)) => {
                            if e.code != t::ErrorCode::Unavailable {
                                return Err(from_record(&e));
                            }
                            // The owner may be gone: look it up afresh next time.
                            s.note_owner(to, None);
                            return Err(s.cut_off(from_record(&e)));
                        }
                        None => return Err(ActorError::internal("remote call gave no outcome")),
                    }
                }
            }
        }
        Err(ActorError::unavailable(format!(
            "{to} moved between hosts {MAX_HOPS} times while this call was routed"
        )))
    }
}

impl Shared {
    /// Where `to` runs, when this host knows without a wait: it holds the claim, or a live
    /// member was last seen owning it. `None` sends the caller to [`Shared::locate`], which
    /// starts with this check.
    pub(crate) fn known(&self, to: &ActorId) -> Option<Target> {
        match self.claims.state(to) {
            State::Held => Some(Target::Here),
            State::Releasing(_) => None,
            State::Absent => self
                .owner_hint(to)
                .filter(|node| self.view.borrow().get(node).is_some())
                .map(Target::There),
        }
    }

    /// [`Shared::locate`] for a call of this host's, bounded by the call's deadline when it
    /// has one: `DEADLINE_EXCEEDED`, skipped, when the owner is not found in time.
    async fn locate_by(
        &self,
        to: &ActorId,
        deadline: Option<Instant>,
    ) -> Result<Target, ActorError> {
        match deadline {
            Some(d) => tokio::time::timeout_at(d.into(), self.locate(to, false))
                .await
                .map_err(|_| ActorError::deadline_exceeded(true))?,
            None => self.locate(to, false).await,
        }
    }

    /// Where `to` runs now, claiming it for this host when placement picks this host — or,
    /// when `placed_here` (another host's placement sent the call), whenever no live member
    /// holds it.
    pub(crate) async fn locate(
        &self,
        to: &ActorId,
        placed_here: bool,
    ) -> Result<Target, ActorError> {
        for _ in 0..MAX_HOPS {
            if let Some(known) = self.known(to) {
                return Ok(known);
            }
            if let State::Releasing(mut rx) = self.claims.state(to) {
                let _ = tokio::time::timeout(RELEASE_WAIT, rx.wait_for(|done| *done)).await;
                continue;
            }
            let view = self.view.borrow().clone();
            let held = self.directory.lookup(to.as_str()).await.map_err(|e| {
                self.cut_off(ActorError::unavailable(format!(
                    "cluster directory unreachable: {e}"
                )))
            })?;
            if let Some(owner) = held.as_ref().and_then(|h| h.owner.as_ref())
                && owner.node != self.node
                && view.is_live(&owner.node, &owner.incarnation)
            {
                let node: Arc<str> = owner.node.as_str().into();
                self.note_owner(to, Some(node.clone()));
                return Ok(Target::There(node));
            }
            // Nobody live runs it (or this incarnation's own entry): place it.
            if placed_here {
                return Ok(match self.claim(to).await? {
                    Some(node) => Target::There(node.into()),
                    None => Target::Here,
                });
            }
            let placed =
                placement::place(to.as_str(), view.candidates(to.actor_type())).map(str::to_string);
            match placed {
                None => {
                    return Err(ActorError::not_found(format!(
                        "no member of the cluster has actor type {:?} deployed",
                        to.actor_type()
                    )));
                }
                Some(node) if node != self.node => return Ok(Target::There(node.into())),
                Some(_) => match self.claim(to).await? {
                    Some(node) => return Ok(Target::There(node.into())),
                    None => return Ok(Target::Here),
                },
            }
        }
        Err(ActorError::unavailable(format!(
            "{to} could not be placed: its claim kept changing hands"
        )))
    }

    /// `e` (an `UNAVAILABLE` of routing), marked as this host's own cut-off from the cluster
    /// when it has no NATS connection or no valid lease now: then neither the call nor its
    /// receiver is at fault, and the outbox relay does not count the attempt against the
    /// message ([`ActorError::isolated`]).
    fn cut_off(&self, e: ActorError) -> ActorError {
        if !self.client.is_connected() || !self.claims.lease_valid() {
            e.into_isolated()
        } else {
            e
        }
    }

    /// Claims `to` for this host (taking it over from a member that is gone). `None` when
    /// this host now holds it, else the live owner that does.
    pub(crate) async fn claim(&self, to: &ActorId) -> Result<Option<String>, ActorError> {
        if !self.claims.lease_valid() {
            return Err(ActorError::isolated(
                "this host's cluster lease has lapsed: it cannot take actors now",
            ));
        }
        let outcome = self
            .directory
            .claim_or_take_over(to.as_str(), &self.me())
            .await
            .map_err(|e| {
                self.cut_off(ActorError::unavailable(format!("cluster directory: {e}")))
            })?;
        match outcome {
            ClaimOutcome::Claimed(c) => {
                self.claims.insert(to, c);
                Ok(None)
            }
            ClaimOutcome::Held(h) => match h.owner {
                Some(o) if o.node != self.node => {
                    self.note_owner(to, Some(o.node.as_str().into()));
                    Ok(Some(o.node))
                }
                _ => Err(ActorError::unavailable(format!(
                    "{to} is being taken over by another member; retry"
                ))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future `f` returns, without calling it.
    fn future_size<'a, F, Fut>(_: F) -> usize
    where
        F: Fn(&'a ClusterRoute, &'a ActorId, Outgoing, CallKind) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    /// Every remote tell boxes this future (the route is a trait object). Over ~1 KiB, glibc
    /// serves the box from its large bins and consolidates its fast bins on the way, which
    /// cost remote tells ~10% in `remote_ask`; the directory's kilobyte-sized futures belong
    /// behind boxes of their own on the slow path.
    #[test]
    fn a_delivery_future_stays_small() {
        let size = future_size(ClusterRoute::deliver);
        assert!(
            size <= 640,
            "ClusterRoute::deliver's future is {size} bytes"
        );
    }
}
