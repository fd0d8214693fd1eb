//! The calling side: sends a batch of calls to one host as a NATS request whose timeout comes
//! from the callers' deadlines, and maps what NATS says (no responders, timeout, size) to the
//! typed errors a local call would give.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::RequestErrorKind;
use bytes::Bytes;
use tokio::sync::watch;

use super::error::{ErrorRecord, TellReceipt};
use super::frame::{self, Call, CallKind, Limits, Outcome};
use crate::connect::{Connection, ConnectionState};
use crate::membership::MemberView;
use crate::metrics;
use crate::names::Names;

/// A call to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// Tell or ask.
    pub kind: CallKind,
    /// The receiving actor, `Type/key`.
    pub target: String,
    /// The message type.
    pub msg_type: String,
    /// The payload.
    pub payload: Bytes,
    /// The calling actor, if any.
    pub sender: Option<String>,
    /// On whose behalf; `None` = the system principal.
    pub principal: Option<String>,
    /// The caller's absolute deadline; what is left of it at send time travels.
    pub deadline: Option<Instant>,
    /// Made from inside a turn (non-empty call chain).
    pub internal: bool,
    /// The caller's span context (W3C `traceparent`), when traces are on.
    pub trace: Option<String>,
}

impl Outgoing {
    /// A call from outside any actor, with no deadline, principal or sender.
    pub fn new(kind: CallKind, target: &str, msg_type: &str, payload: impl Into<Bytes>) -> Self {
        Self {
            kind,
            target: target.to_string(),
            msg_type: msg_type.to_string(),
            payload: payload.into(),
            sender: None,
            principal: None,
            deadline: None,
            internal: false,
            trace: None,
        }
    }
}

/// Client options.
#[derive(Debug, Clone, Copy)]
pub struct ClientConfig {
    /// Payload limit checked before sending (the receiver checks its own too).
    pub limits: Limits,
    /// How long a tell waits for its receipt. Default 5 s.
    pub tell_timeout: Duration,
    /// How long an ask without a deadline waits. Default 30 s (the runtime always passes one).
    pub ask_timeout: Duration,
    /// Extra wait past an ask's deadline, so the owner's own `DEADLINE_EXCEEDED` (with its
    /// `skipped` flag) arrives before the caller gives up on its own. Default 100 ms: the
    /// owner's verdict comes one transit after the caller's deadline plus the way back, and
    /// 25 ms was not enough on a loaded 2-core machine (the caller then answered
    /// `skipped = false` for a turn that never ran).
    pub deadline_grace: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            tell_timeout: Duration::from_secs(5),
            ask_timeout: Duration::from_secs(30),
            deadline_grace: Duration::from_millis(100),
        }
    }
}

/// Sends remote calls to other hosts of the cluster.
#[derive(Clone, Debug)]
pub struct Client {
    nats: async_nats::Client,
    names: Names,
    origin: Arc<str>,
    config: ClientConfig,
    /// The members: a call in flight to one that leaves ends then (see [`Client::watching`]).
    members: Option<watch::Receiver<Arc<MemberView>>>,
    /// This host's connection: a call in flight when it is lost ends then.
    state: watch::Receiver<ConnectionState>,
}

impl Client {
    /// A client sending as `conn`'s node.
    pub fn new(conn: &Connection, config: ClientConfig) -> Self {
        Self {
            nats: conn.client().clone(),
            names: conn.names().clone(),
            origin: conn.node_id().into(),
            config,
            members: None,
            state: conn.state(),
        }
    }

    /// Ends the calls in flight to a member as soon as it leaves `members` (its entry expired
    /// or was deleted), with `UNAVAILABLE` saying the call may have run, instead of at their
    /// deadline: a host killed mid-call never answers, and its callers need not wait it out.
    pub fn watching(mut self, members: watch::Receiver<Arc<MemberView>>) -> Self {
        self.members = Some(members);
        self
    }

    /// Resolves once `node` is no longer a member; `None` when it is not one now (then the
    /// request's own timeout decides, as without a view).
    fn left(&self, node: &str) -> Option<impl Future<Output = ()> + use<>> {
        let mut members = self.members.clone()?;
        members.borrow_and_update().get(node)?;
        let node = node.to_string();
        Some(async move {
            loop {
                if members.changed().await.is_err() {
                    // The view is gone with its membership: nothing will say the node left.
                    return std::future::pending().await;
                }
                if members.borrow_and_update().get(&node).is_none() {
                    return;
                }
            }
        })
    }

    /// Whether this host is connected to NATS now (calls fail at once while it is not).
    pub fn is_connected(&self) -> bool {
        self.nats.connection_state() == async_nats::connection::State::Connected
    }

    /// Asks `call.target` on host `node`.
    pub async fn ask(&self, node: &str, mut call: Outgoing) -> Result<Bytes, ErrorRecord> {
        call.kind = CallKind::Ask;
        match self.send(node, vec![call]).await.pop() {
            Some(Outcome::Replied(p)) => Ok(p),
            Some(Outcome::Failed(e)) => Err(e),
            Some(Outcome::Moved(owner)) => Err(moved(&owner)),
            _ => Err(ErrorRecord::internal("ask answered with a tell receipt")),
        }
    }

    /// Tells `call.target` on host `node`; the receipt says what its mailbox did.
    pub async fn tell(&self, node: &str, call: Outgoing) -> Result<TellReceipt, ErrorRecord> {
        self.tell_batch(node, vec![call])
            .await
            .pop()
            .unwrap_or_else(|| Err(ErrorRecord::internal("tell answered with nothing")))
    }

    /// Tells several actors on host `node` in one frame; one receipt or error per tell, in
    /// order.
    pub async fn tell_batch(
        &self,
        node: &str,
        mut calls: Vec<Outgoing>,
    ) -> Vec<Result<TellReceipt, ErrorRecord>> {
        for c in &mut calls {
            c.kind = CallKind::Tell;
        }
        self.send(node, calls)
            .await
            .into_iter()
            .map(|o| match o {
                Outcome::Receipt(r) => Ok(r),
                Outcome::Failed(e) => Err(e),
                Outcome::Replied(_) => Err(ErrorRecord::internal("tell answered with a reply")),
                Outcome::Moved(owner) => Err(moved(&owner)),
            })
            .collect()
    }

    /// Sends `calls` to host `node` as one request; one outcome per call, in order.
    pub async fn send(&self, node: &str, calls: Vec<Outgoing>) -> Vec<Outcome> {
        let now = Instant::now();
        let kinds: Vec<CallKind> = calls.iter().map(|c| c.kind).collect();
        let mut outcomes: Vec<Option<Outcome>> = vec![None; calls.len()];
        let mut wire = Vec::with_capacity(calls.len());
        let mut sent_at = Vec::with_capacity(calls.len());
        let mut timeout = Duration::ZERO;
        // Calls sent, per kind: the metrics are recorded once per frame.
        let mut sent = [0u64; 2];
        for (i, c) in calls.into_iter().enumerate() {
            let max = self.config.limits.max_payload_bytes;
            if c.payload.len() > max {
                outcomes[i] = Some(Outcome::Failed(ErrorRecord::payload_too_large(
                    c.payload.len(),
                    max,
                )));
                continue;
            }
            let remaining = c.deadline.map(|d| d.saturating_duration_since(now));
            // Less than a whole millisecond left: it cannot be met remotely; never sent.
            if remaining.is_some_and(|r| r < Duration::from_millis(1)) {
                outcomes[i] = Some(Outcome::Failed(ErrorRecord::deadline_exceeded(true)));
                continue;
            }
            let wait = match (c.kind, remaining) {
                (CallKind::Tell, _) => self.config.tell_timeout,
                (CallKind::Ask, Some(r)) => r + self.config.deadline_grace,
                (CallKind::Ask, None) => self.config.ask_timeout,
            };
            timeout = timeout.max(wait);
            sent[c.kind.index()] += 1;
            sent_at.push(i);
            wire.push(Call {
                kind: c.kind,
                target: c.target,
                msg_type: c.msg_type,
                payload: c.payload,
                sender: c.sender,
                principal: c.principal,
                deadline_ms: remaining.map(|r| r.as_millis() as u64),
                internal: c.internal,
                trace: c.trace,
            });
        }
        if !wire.is_empty() {
            let kinds_sent = || {
                CallKind::ALL
                    .into_iter()
                    .map(|k| (k.label(), sent[k.index()]))
                    .filter(|&(_, n)| n > 0)
            };
            for (kind, n) in kinds_sent() {
                metrics::remote_sent(kind, node, n);
            }
            let replies = self.request(node, &wire, timeout).await;
            let elapsed = now.elapsed();
            for (kind, n) in kinds_sent() {
                metrics::remote_seconds(kind, node, elapsed, n as usize);
            }
            for (i, outcome) in sent_at.into_iter().zip(replies) {
                outcomes[i] = Some(outcome);
            }
        }
        outcomes
            .into_iter()
            .zip(kinds)
            .map(|(o, kind)| {
                let o =
                    o.unwrap_or_else(|| Outcome::Failed(ErrorRecord::internal("call not sent")));
                if let Outcome::Failed(e) = &o {
                    metrics::remote_failed(kind.label(), e.code.canonical(), node);
                }
                o
            })
            .collect()
    }

    /// One NATS request for `calls`; always one outcome per call.
    async fn request(&self, node: &str, calls: &[Call], timeout: Duration) -> Vec<Outcome> {
        let n = calls.len();
        let every = |e: ErrorRecord| vec![Outcome::Failed(e); n];
        // Not connected: fail now rather than queue the frame in the client until it
        // reconnects. A queued frame would wait out the whole timeout (a relay batch held
        // up for 5 s), and would still be sent after its caller gave up, to run late and out
        // of order with what was retried meanwhile (its deadline is relative, so it would
        // not be seen as expired).
        if self.nats.connection_state() != async_nats::connection::State::Connected {
            return every(ErrorRecord::unavailable(&format!(
                "this host is not connected to NATS now: the call to host {node} was not sent"
            )));
        }
        let subject = self.names.host_subject(node);
        let frame = frame::encode_request(&self.origin, calls);
        let len = frame.len();
        let request = async_nats::Request::new()
            .payload(frame)
            .timeout(Some(timeout));
        let reply = self.nats.send_request(subject, request);
        let left = async {
            match self.left(node) {
                Some(left) => left.await,
                None => std::future::pending().await,
            }
        };
        // A reply sent while this host is disconnected is lost (core NATS keeps nothing for
        // a subscriber that is away), so the call cannot end well once the connection drops.
        let mut state = self.state.clone();
        let lost = state.wait_for(|s| *s != ConnectionState::Connected);
        let reply = tokio::select! {
            r = reply => r,
            () = left => {
                return every(ErrorRecord::unavailable(&format!(
                    "host {node} left the cluster with the call in flight (it may have run)"
                )));
            }
            _ = lost => {
                return every(ErrorRecord::unavailable(&format!(
                    "this host lost its NATS connection with the call to host {node} in flight (it may have run)"
                )));
            }
        };
        let msg = match reply {
            Ok(m) => m,
            Err(e) => {
                return match e.kind() {
                    RequestErrorKind::NoResponders => every(ErrorRecord::unavailable(&format!(
                        "host {node} is not serving remote calls (no responders)"
                    ))),
                    RequestErrorKind::TimedOut => calls
                        .iter()
                        .map(|c| {
                            Outcome::Failed(match c.kind {
                                CallKind::Ask => ErrorRecord::deadline_exceeded(false),
                                CallKind::Tell => ErrorRecord::unavailable(&format!(
                                    "no receipt from host {node} within {timeout:?} (the tell may have been queued)"
                                )),
                            })
                        })
                        .collect(),
                    RequestErrorKind::MaxPayloadExceeded => {
                        every(ErrorRecord::invalid_argument(&format!(
                            "request of {len} bytes exceeds the NATS server's max_payload ({})",
                            self.nats.server_info().max_payload
                        )))
                    }
                    _ => every(ErrorRecord::unavailable(&format!(
                        "remote call to host {node} failed: {e}"
                    ))),
                };
            }
        };
        match frame::decode_reply(&msg.payload, &self.config.limits) {
            Ok(outcomes) if outcomes.len() == n => outcomes,
            // The receiver could not read the frame at all: its one error is every call's.
            Ok(mut outcomes) => match (outcomes.len(), outcomes.pop()) {
                (1, Some(Outcome::Failed(e))) => every(e),
                (got, _) => every(ErrorRecord::internal(&format!(
                    "host {node} answered {got} outcomes to {n} calls"
                ))),
            },
            Err(e) => {
                metrics::decode_error("reply");
                every(ErrorRecord::internal(&format!(
                    "malformed reply from host {node}: {e}"
                )))
            }
        }
    }
}

/// A `Moved` outcome as an error, for the single-call helpers that return records (the
/// runtime adapter uses [`Client::send`] and follows the move instead).
fn moved(owner: &str) -> ErrorRecord {
    ErrorRecord::unavailable(&format!(
        "the actor is not on this host (owner: {})",
        if owner.is_empty() { "unknown" } else { owner }
    ))
}
