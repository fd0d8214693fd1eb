//! The guest-facing side of the host: each instance's store state (its turn, memory limit and
//! lazily built WASI context) and the `sluice:actor` imports, which reach the rest of the host
//! only through [`GuestHost`] — so nothing here knows how tells are routed, where the outbox
//! is, or how the bus delivers.

mod convert;
mod imports;
mod wasi;

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Result as WtResult};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::wit;
use crate::call::{CallOptions, DeliveryPath, TellReceipt};
use crate::config::WasiGrants;
use crate::error::ActorError;
use crate::id::ActorId;
use crate::message::Message;

pub(crate) use convert::from_wit;

/// What a guest can ask of its host. Calls made from a turn carry that turn's options
/// (internal, its deadline, its principal, the actor as sender).
#[async_trait]
pub(crate) trait GuestHost: Send + Sync {
    /// Fire and forget.
    async fn tell(
        &self,
        to: &str,
        msg_type: String,
        payload: Vec<u8>,
        opts: CallOptions,
    ) -> Result<TellReceipt, ActorError>;
    /// Request/reply.
    async fn ask(
        &self,
        to: &str,
        msg_type: String,
        payload: Vec<u8>,
        opts: CallOptions,
    ) -> Result<Vec<u8>, ActorError>;
    /// A message to `me` after `delay`, for `principal`; its turn is a child of `trace` (the
    /// scheduling turn's span context) when traces are on.
    fn schedule(
        &self,
        me: &ActorId,
        delay: Duration,
        msg_type: String,
        payload: Vec<u8>,
        principal: Arc<str>,
        trace: Option<sluice_trace::TraceParent>,
    ) -> Result<(), ActorError>;
    /// The outbox's dispatch of one payload to many targets.
    async fn dispatch(
        &self,
        req: wit::DispatchRequest,
        me: &ActorId,
        principal: &Arc<str>,
        deadline: Option<Instant>,
        trace: Option<sluice_trace::TraceParent>,
    ) -> Result<wit::DispatchResult, ActorError>;
    /// A direct tell, falling back to the outbox.
    async fn tell_reliable(
        &self,
        to: &str,
        msg_type: String,
        payload: Vec<u8>,
        opts: CallOptions,
    ) -> Result<DeliveryPath, ActorError>;
    /// A durable reminder to `me` after `delay_ms`, for `principal`, in `trace`.
    #[allow(clippy::too_many_arguments)]
    async fn remind(
        &self,
        me: &ActorId,
        name: &str,
        delay_ms: u64,
        msg_type: String,
        payload: Vec<u8>,
        principal: &Arc<str>,
        trace: Option<sluice_trace::TraceParent>,
    ) -> Result<(), ActorError>;
    /// Cancels `me`'s pending reminder `name`; whether one was pending.
    async fn cancel_reminder(&self, me: &ActorId, name: &str) -> Result<bool, ActorError>;
    /// A bus event on behalf of `principal`, carrying the publishing turn's `trace`.
    fn publish(
        &self,
        from: &ActorId,
        principal: &Arc<str>,
        topic: &str,
        payload: Vec<u8>,
        trace: Option<sluice_trace::TraceParent>,
    ) -> Result<(), ActorError>;
    /// Charges `bytes` of IPC by `from`'s type for `principal` (the rate limiter).
    fn check_ipc(&self, from: &ActorId, principal: &str, bytes: usize) -> Result<(), ActorError>;
    /// The principal of work done on no one's behalf.
    fn system(&self) -> Arc<str>;
}

/// Where a batched guest's `turns.next` takes its messages from: the mailbox of the activation
/// the instance runs, installed in its store when the guest exports `batch`. Implemented by
/// the actor side (`actor/batch.rs`); this side only relays the guest's calls.
pub(crate) trait TurnFeed: Send {
    /// Ends the running turn with `done` (answering its caller) and starts the next one,
    /// setting `turn` up for it: its envelope, or `None` when the batch is over. An `Err` is
    /// the guest breaking the protocol (a result with no turn running, or no result for the
    /// running one); it traps.
    fn next(
        &mut self,
        done: Option<Result<Vec<u8>, ActorError>>,
        turn: &mut Turn,
    ) -> Result<Option<wit::Envelope>, &'static str>;
    /// Once `batch.run` returned or trapped: what became of the batch.
    fn finish(&mut self) -> BatchEnd;
}

/// What a batch left behind.
pub(crate) struct BatchEnd {
    /// Turns it started.
    pub turns: u32,
    /// The message whose turn was running: a trap's, or one the guest never ended.
    pub running: Option<Message>,
    /// The message already taken for the turn after the batch.
    pub ready: Option<Message>,
}

/// What a turn in progress knows about itself; imports read it to relay deadline and principal.
pub(crate) struct Turn {
    pub started: Instant,
    /// Time spent awaiting other actors (`ask`); not charged against `max_turn`.
    pub waited: Duration,
    pub deadline: Option<Instant>,
    pub principal: Arc<str>,
    pub max_turn: Duration,
    /// The turn's span context, sent with every call it makes; `None` when traces are off.
    pub trace: Option<sluice_trace::TraceParent>,
    /// A batched turn's span (disabled when traces are off), entered by `log`: a batch runs in
    /// one guest call, so its turns cannot each instrument the call as a single turn does.
    pub span: tracing::Span,
}

/// Refuses memory growth past the actor's limit and remembers that it did, so the trap that
/// follows can be reported as a memory-limit hit rather than a generic crash.
pub(crate) struct MemoryLimiter {
    pub limit: usize,
    pub hit: bool,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> WtResult<bool> {
        if desired > self.limit {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> WtResult<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// The `T` of every actor's `Store<T>`.
pub(crate) struct StoreState {
    wasi: Option<WasiCtx>,
    grants: Arc<WasiGrants>,
    table: ResourceTable,
    pub limiter: MemoryLimiter,
    /// Weak: an idle instance must not keep its host alive.
    host: Weak<dyn GuestHost>,
    pub self_id: ActorId,
    pub turn: Turn,
    /// The mailbox a batched guest pulls its turns from; `None` for a guest of one message
    /// per call (`turns.next` then traps).
    pub feed: Option<Box<dyn TurnFeed>>,
}

impl StoreState {
    pub fn new(
        host: &Arc<dyn GuestHost>,
        self_id: ActorId,
        grants: Arc<WasiGrants>,
        memory_limit: usize,
        max_turn: Duration,
    ) -> Self {
        // Until the first turn moves its own in.
        let principal = host.system();
        Self {
            wasi: None,
            grants,
            table: ResourceTable::new(),
            limiter: MemoryLimiter {
                limit: memory_limit,
                hit: false,
            },
            host: Arc::downgrade(host),
            self_id,
            turn: Turn {
                started: Instant::now(),
                waited: Duration::ZERO,
                deadline: None,
                principal,
                max_turn,
                trace: None,
                span: tracing::Span::none(),
            },
            feed: None,
        }
    }

    /// Whether the running turn has used up its CPU budget.
    pub fn turn_over_budget(&self) -> bool {
        self.turn.started.elapsed().saturating_sub(self.turn.waited) > self.turn.max_turn
    }

    /// The host, unless it is gone (then every import is `UNAVAILABLE`).
    fn host(&self) -> Result<Arc<dyn GuestHost>, ActorError> {
        self.host
            .upgrade()
            .ok_or_else(|| ActorError::unavailable("host is shutting down"))
    }

    /// The options of a call made from the running turn.
    fn inside_turn(&self) -> CallOptions {
        CallOptions {
            deadline: self.turn.deadline,
            principal: Some(self.turn.principal.clone()),
            sender: Some(self.self_id.clone()),
            internal: true,
            trace: self.turn.trace,
        }
    }
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        // Built on the guest's first WASI call: most actors never make one, and an
        // activation need not pay for it.
        let (grants, id) = (&self.grants, &self.self_id);
        WasiCtxView {
            ctx: self
                .wasi
                .get_or_insert_with(|| wasi::build_wasi(grants, id)),
            table: &mut self.table,
        }
    }
}
