//! The serving side: subscribes to this host's subject and hands each decoded call to a
//! [`Handler`] in arrival order, so tells from one host to one actor stay in order. Tells
//! are answered as soon as they are queued; an ask's wait for its reply runs on its own task.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_nats::{Message, Subject};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::TransportError;
use super::error::{ErrorRecord, OverloadScope, TellReceipt};
use super::frame::{self, Call, CallKind, Limits, Outcome};
use crate::connect::Connection;
use crate::metrics;

/// Default bound on asks waiting for their reply on this host: past it, an ask is refused
/// `OVERLOADED` (scope host) at once.
pub const DEFAULT_MAX_INFLIGHT_ASKS: usize = 4096;

/// The wait for an ask's reply.
pub type ReplyFuture = Pin<Box<dyn Future<Output = Result<Bytes, ErrorRecord>> + Send>>;

/// A call as the handler receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    /// The node id of the sending host.
    pub origin: Arc<str>,
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
    /// The caller's deadline on this host's clock: arrival plus what the caller had left.
    pub deadline: Option<Instant>,
    /// Made from inside a turn: admission caps do not apply.
    pub internal: bool,
    /// The caller's span context (W3C `traceparent`), when it sent one.
    pub trace: Option<String>,
}

impl Inbound {
    fn new(origin: Arc<str>, call: Call, arrived: Instant) -> Self {
        Self {
            origin,
            deadline: call
                .deadline_ms
                .map(|ms| arrived + Duration::from_millis(ms)),
            target: call.target,
            msg_type: call.msg_type,
            payload: call.payload,
            sender: call.sender,
            principal: call.principal,
            internal: call.internal,
            trace: call.trace,
        }
    }
}

/// What the host does with remote calls (the runtime adapter implements it).
///
/// Both methods are called on the receive loop in arrival order and must not block: `tell`
/// only offers the message to the mailbox; `ask` offers it and returns the wait for the reply,
/// which is polled on another task.
pub trait Handler: Send + Sync + 'static {
    /// Queue a tell; the receipt or the refusal is sent back at once.
    fn tell(&self, call: Inbound) -> Result<TellReceipt, ErrorRecord>;
    /// Queue an ask; return the wait for its reply.
    fn ask(&self, call: Inbound) -> Result<ReplyFuture, ErrorRecord>;
    /// Runs before `tell`/`ask` for each call, on the receive loop (so later calls wait for
    /// it and arrival order holds): where the adapter claims an actor placed here. The
    /// default lets every call through at once.
    fn prepare<'a>(&'a self, call: &'a Inbound) -> Prepared<'a> {
        let _ = call;
        Prepared::Go
    }
}

/// What [`Handler::prepare`] decides for a call.
pub enum Prepared<'a> {
    /// Hand it to `tell`/`ask` now.
    Go,
    /// Answer it with this outcome instead (`Moved` when the actor runs elsewhere).
    Answer(Outcome),
    /// Decide after this wait: `None` goes ahead, `Some` answers. Later calls wait for it.
    Wait(PrepareFuture<'a>),
}

/// The wait of [`Prepared::Wait`].
pub type PrepareFuture<'a> = Pin<Box<dyn Future<Output = Option<Outcome>> + Send + 'a>>;

/// Serving options.
#[derive(Debug, Clone, Copy)]
pub struct ServerConfig {
    /// Decode limits.
    pub limits: Limits,
    /// Asks waiting for a reply at once. Default [`DEFAULT_MAX_INFLIGHT_ASKS`].
    pub max_inflight_asks: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            max_inflight_asks: DEFAULT_MAX_INFLIGHT_ASKS,
        }
    }
}

/// A running server; dropping it stops serving.
pub struct Server {
    task: JoinHandle<()>,
    subject: String,
    conn: Connection,
}

impl Server {
    /// Subscribes to this host's subject and starts serving.
    pub async fn start<H: Handler>(
        conn: &Connection,
        handler: Arc<H>,
        config: ServerConfig,
    ) -> Result<Self, TransportError> {
        let subject = conn.names().host_subject(conn.node_id());
        let client = conn.client().clone();
        let mut sub = client
            .subscribe(subject.clone())
            .await
            .map_err(|e| TransportError::Subscribe(e.to_string()))?;
        // Serving starts once the server has registered the subscription.
        conn.round_trip().await.map_err(TransportError::Subscribe)?;
        let state = Arc::new(State {
            client,
            handler,
            config,
            asks: Arc::new(Semaphore::new(config.max_inflight_asks)),
            warned: AtomicBool::new(false),
        });
        let task = tokio::spawn(async move {
            while let Some(msg) = sub.next().await {
                state.handle(msg).await;
            }
        });
        Ok(Self {
            task,
            subject,
            conn: conn.clone(),
        })
    }

    /// The subject served.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// Stops serving; once it returns, callers get UNAVAILABLE (no responders). Asks already
    /// handed to the handler still get their replies.
    pub async fn stop(mut self) {
        self.task.abort();
        // The subscription goes with the task (its drop unsubscribes); wait for that, then for
        // the server to have processed the unsubscribe.
        let _ = (&mut self.task).await;
        let _ = self.conn.round_trip().await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct State<H> {
    client: async_nats::Client,
    handler: Arc<H>,
    config: ServerConfig,
    asks: Arc<Semaphore>,
    /// Warn on the first malformed frame only (metrics count them all).
    warned: AtomicBool,
}

impl<H: Handler> State<H> {
    async fn handle(&self, msg: Message) {
        let arrived = Instant::now();
        let request = match frame::decode_request(&msg.payload, &self.config.limits) {
            Ok(r) => r,
            Err(e) => {
                metrics::decode_error("request");
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(subject = %msg.subject, error = %e, "malformed cluster request (further ones only counted)");
                }
                let rec = ErrorRecord::invalid_argument(&format!("malformed cluster request: {e}"));
                self.reply(msg.reply, vec![Outcome::Failed(rec)]).await;
                return;
            }
        };
        let origin: Arc<str> = request.origin.into();
        let mut outcomes = Vec::with_capacity(request.calls.len());
        let mut waits: Vec<(usize, ReplyFuture, tokio::sync::OwnedSemaphorePermit)> = Vec::new();
        // Counted once per frame, per kind.
        let mut received = [0u64; 2];
        for call in request.calls {
            let call = match call {
                Ok(c) => c,
                Err(rec) => {
                    outcomes.push(Outcome::Failed(rec));
                    continue;
                }
            };
            received[call.kind.index()] += 1;
            let kind = call.kind;
            let inbound = Inbound::new(origin.clone(), call, arrived);
            let answer = match self.handler.prepare(&inbound) {
                Prepared::Go => None,
                Prepared::Answer(outcome) => Some(outcome),
                Prepared::Wait(wait) => wait.await,
            };
            if let Some(outcome) = answer {
                outcomes.push(outcome);
                continue;
            }
            match kind {
                CallKind::Tell => outcomes.push(match self.handler.tell(inbound) {
                    Ok(r) => Outcome::Receipt(r),
                    Err(e) => Outcome::Failed(e),
                }),
                CallKind::Ask => {
                    let Ok(permit) = self.asks.clone().try_acquire_owned() else {
                        let limit = self.config.max_inflight_asks as u64;
                        outcomes.push(Outcome::Failed(ErrorRecord::overloaded(
                            OverloadScope::Host,
                            limit,
                            limit,
                        )));
                        continue;
                    };
                    match self.handler.ask(inbound) {
                        Ok(wait) => {
                            waits.push((outcomes.len(), wait, permit));
                            // Filled in when the reply comes.
                            outcomes.push(Outcome::Receipt(TellReceipt::Queued));
                        }
                        Err(e) => outcomes.push(Outcome::Failed(e)),
                    }
                }
            }
        }
        for kind in CallKind::ALL {
            if received[kind.index()] > 0 {
                metrics::remote_received(kind.label(), received[kind.index()]);
            }
        }
        if waits.is_empty() {
            self.reply(msg.reply, outcomes).await;
            return;
        }
        let client = self.client.clone();
        tokio::spawn(async move {
            for (i, wait, permit) in waits {
                outcomes[i] = match wait.await {
                    Ok(p) => Outcome::Replied(p),
                    Err(e) => Outcome::Failed(e),
                };
                drop(permit);
            }
            send_reply(&client, msg.reply, outcomes).await;
        });
    }

    async fn reply(&self, to: Option<Subject>, outcomes: Vec<Outcome>) {
        send_reply(&self.client, to, outcomes).await;
    }
}

async fn send_reply(client: &async_nats::Client, to: Option<Subject>, outcomes: Vec<Outcome>) {
    // A tell published without a reply subject wants no receipt.
    let Some(to) = to else { return };
    let mut frame = frame::encode_reply(&outcomes);
    let max = client.server_info().max_payload;
    if frame.len() > max {
        // The caller would only see a timeout: tell it why instead.
        let rec = ErrorRecord::internal(&format!(
            "reply of {} bytes exceeds the NATS server's max_payload ({max})",
            frame.len()
        ));
        frame = frame::encode_reply(&[Outcome::Failed(rec)]);
    }
    if let Err(e) = client.publish(to, frame).await {
        tracing::debug!(error = %e, "cluster reply not sent");
    }
}
