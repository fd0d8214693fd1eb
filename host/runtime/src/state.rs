//! Per-instance store state and the host side of the WIT imports.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Result as WtResult};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::sluice::actor::{bus, host, outbox, types};
use crate::bindings::wit;
use crate::config::WasiGrants;
use crate::error::{ActorError, ErrorCode, OverloadScope, TellReceipt};
use crate::host::{CallOptions, HostInner};
use crate::registry::ActorId;

/// What a turn in progress knows about itself; imports read it to relay deadline and principal.
pub(crate) struct Turn {
    pub started: Instant,
    /// Time spent awaiting other actors (`ask`); not charged against `max_turn`.
    pub waited: Duration,
    pub deadline: Option<Instant>,
    pub principal: Arc<str>,
    pub max_turn: Duration,
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
    pub host: Arc<HostInner>,
    pub self_id: ActorId,
    pub turn: Turn,
}

impl StoreState {
    pub fn new(
        host: Arc<HostInner>,
        self_id: ActorId,
        grants: Arc<WasiGrants>,
        memory_limit: usize,
        max_turn: Duration,
    ) -> Self {
        // Until the first turn moves its own in.
        let principal = host.system.clone();
        Self {
            wasi: None,
            grants,
            table: ResourceTable::new(),
            limiter: MemoryLimiter {
                limit: memory_limit,
                hit: false,
            },
            host,
            self_id,
            turn: Turn {
                started: Instant::now(),
                waited: Duration::ZERO,
                deadline: None,
                principal,
                max_turn,
            },
        }
    }

    /// Whether the running turn has used up its CPU budget.
    pub fn turn_over_budget(&self) -> bool {
        self.turn.started.elapsed().saturating_sub(self.turn.waited) > self.turn.max_turn
    }

    fn inside_turn(&self) -> CallOptions {
        CallOptions {
            deadline: self.turn.deadline,
            principal: Some(self.turn.principal.clone()),
            sender: Some(self.self_id.clone()),
            internal: true,
        }
    }
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        // Built on the guest's first WASI call: most actors never make one, and an
        // activation need not pay for it.
        let (grants, id) = (&self.grants, &self.self_id);
        WasiCtxView {
            ctx: self.wasi.get_or_insert_with(|| build_wasi(grants, id)),
            table: &mut self.table,
        }
    }
}

/// What a guest may touch: nothing is inherited unless granted (no stdio, env, args,
/// preopens or network).
fn build_wasi(grants: &WasiGrants, id: &ActorId) -> WasiCtx {
    let mut b = WasiCtx::builder();
    b.allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    if grants.stdio {
        b.inherit_stdout().inherit_stderr();
    }
    for (k, v) in &grants.env {
        b.env(k, v);
    }
    for (guest, hostdir) in &grants.dirs {
        if let Err(e) = b.preopened_dir(hostdir, guest, wasmtime_wasi::FsPerms::ReadOnly) {
            tracing::warn!(actor = %id, dir = %hostdir.display(), error = %e, "cannot preopen granted dir");
        }
    }
    b.build()
}

/// Rust error → WIT record.
pub(crate) fn to_wit(e: ActorError) -> wit::ActorError {
    wit::ActorError {
        code: match e.code {
            ErrorCode::ResourceExhausted => wit::ErrorCode::ResourceExhausted,
            ErrorCode::DeadlineExceeded => wit::ErrorCode::DeadlineExceeded,
            ErrorCode::Overloaded => wit::ErrorCode::Overloaded,
            ErrorCode::NotFound => wit::ErrorCode::NotFound,
            ErrorCode::InvalidArgument => wit::ErrorCode::InvalidArgument,
            ErrorCode::Unavailable => wit::ErrorCode::Unavailable,
            _ => wit::ErrorCode::Internal,
        },
        message: e.to_string(),
        retry_after_ms: e.retry_after_ms,
        skipped: e.skipped,
        overload: e.overload.map(|o| wit::OverloadInfo {
            scope: match o.scope {
                OverloadScope::Actor => wit::OverloadScope::Actor,
                OverloadScope::Host => wit::OverloadScope::Host,
            },
            depth: o.depth,
            limit: o.limit,
        }),
    }
}

/// WIT record (a guest's error) → Rust error, message kept verbatim.
pub(crate) fn from_wit(e: wit::ActorError) -> ActorError {
    let code = match e.code {
        wit::ErrorCode::ResourceExhausted => ErrorCode::ResourceExhausted,
        wit::ErrorCode::DeadlineExceeded => ErrorCode::DeadlineExceeded,
        wit::ErrorCode::Overloaded => ErrorCode::Overloaded,
        wit::ErrorCode::NotFound => ErrorCode::NotFound,
        wit::ErrorCode::InvalidArgument => ErrorCode::InvalidArgument,
        wit::ErrorCode::Unavailable => ErrorCode::Unavailable,
        wit::ErrorCode::Internal => ErrorCode::Internal,
    };
    let mut out = ActorError::verbatim(code, e.message);
    out.retry_after_ms = e.retry_after_ms;
    out.skipped = e.skipped;
    out.overload = e.overload.map(|o| crate::error::Overload {
        scope: match o.scope {
            wit::OverloadScope::Actor => OverloadScope::Actor,
            wit::OverloadScope::Host => OverloadScope::Host,
        },
        depth: o.depth,
        limit: o.limit,
    });
    out
}

fn receipt(r: TellReceipt) -> wit::TellReceipt {
    match r {
        TellReceipt::Queued => wit::TellReceipt::Queued,
        TellReceipt::DisplacedOldest => wit::TellReceipt::DisplacedOldest,
        TellReceipt::DroppedNewest => wit::TellReceipt::DroppedNewest,
    }
}

impl types::Host for StoreState {}

impl host::Host for StoreState {
    async fn tell(
        &mut self,
        to: String,
        msg_type: String,
        payload: Vec<u8>,
    ) -> WtResult<Result<wit::TellReceipt, wit::ActorError>> {
        if let Err(e) = self
            .host
            .check_ipc(&self.self_id, &self.turn.principal, payload.len())
        {
            return Ok(Err(to_wit(e)));
        }
        let opts = self.inside_turn();
        Ok(self
            .host
            .tell_str(&to, msg_type, payload, opts)
            .map(receipt)
            .map_err(to_wit))
    }

    async fn ask(
        &mut self,
        to: String,
        msg_type: String,
        payload: Vec<u8>,
        timeout_ms: u64,
    ) -> WtResult<Result<Vec<u8>, wit::ActorError>> {
        if timeout_ms == 0 {
            return Ok(Err(to_wit(ActorError::invalid_argument(
                "ask timeout-ms must be a positive number of milliseconds",
            ))));
        }
        let mut opts = self.inside_turn();
        // A per-call deadline only tightens the inherited one.
        let mine = Instant::now() + Duration::from_millis(timeout_ms);
        opts.deadline = Some(opts.deadline.map_or(mine, |d| d.min(mine)));
        let t0 = Instant::now();
        let host = self.host.clone();
        let r = host.ask_str(&to, msg_type, payload, opts).await;
        self.turn.waited += t0.elapsed();
        Ok(r.map_err(to_wit))
    }

    async fn schedule(
        &mut self,
        delay_ms: u64,
        msg_type: String,
        payload: Vec<u8>,
    ) -> WtResult<Result<(), wit::ActorError>> {
        let principal = self.turn.principal.clone();
        Ok(self
            .host
            .schedule(
                &self.self_id,
                Duration::from_millis(delay_ms),
                msg_type,
                payload,
                principal,
            )
            .map_err(to_wit))
    }

    async fn self_id(&mut self) -> WtResult<String> {
        Ok(self.self_id.to_string())
    }

    async fn now_ms(&mut self) -> WtResult<u64> {
        Ok(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0))
    }

    async fn log(&mut self, level: wit::LogLevel, msg: String) -> WtResult<()> {
        let actor = self.self_id.as_str();
        match level {
            wit::LogLevel::Trace => tracing::trace!(target: "sluice::guest", actor, "{msg}"),
            wit::LogLevel::Debug => tracing::debug!(target: "sluice::guest", actor, "{msg}"),
            wit::LogLevel::Info => tracing::info!(target: "sluice::guest", actor, "{msg}"),
            wit::LogLevel::Warn => tracing::warn!(target: "sluice::guest", actor, "{msg}"),
            wit::LogLevel::Error => tracing::error!(target: "sluice::guest", actor, "{msg}"),
        }
        Ok(())
    }
}

impl outbox::Host for StoreState {
    async fn dispatch(
        &mut self,
        req: wit::DispatchRequest,
    ) -> WtResult<Result<wit::DispatchResult, wit::ActorError>> {
        let msgs = match crate::reliable::dispatch_messages(
            &req,
            &self.self_id,
            &self.turn.principal,
            self.host.config.max_payload_bytes,
        ) {
            Ok(m) => m,
            Err(e) => return Ok(Err(to_wit(e))),
        };
        // Charged as the bytes it sends: one payload per target.
        let bytes = req.payload.len().saturating_mul(req.targets.len());
        if let Err(e) = self
            .host
            .check_ipc(&self.self_id, &self.turn.principal, bytes)
        {
            return Ok(Err(to_wit(e)));
        }
        let t0 = Instant::now();
        let host = self.host.clone();
        let r = host.dispatch(msgs, self.turn.deadline).await;
        self.turn.waited += t0.elapsed();
        Ok(r.map(|d| wit::DispatchResult {
            accepted: d.accepted,
            rejected: d.rejected,
        })
        .map_err(to_wit))
    }

    async fn tell_reliable(
        &mut self,
        to: String,
        msg_type: String,
        payload: Vec<u8>,
    ) -> WtResult<Result<wit::DeliveryPath, wit::ActorError>> {
        let id = match ActorId::parse(&to) {
            Ok(id) => id,
            Err(e) => return Ok(Err(to_wit(e))),
        };
        if let Err(e) = self
            .host
            .check_ipc(&self.self_id, &self.turn.principal, payload.len())
        {
            return Ok(Err(to_wit(e)));
        }
        let opts = self.inside_turn();
        let t0 = Instant::now();
        let host = self.host.clone();
        let r = host.tell_reliable(&id, msg_type, payload, opts).await;
        self.turn.waited += t0.elapsed();
        Ok(r.map(|p| match p {
            crate::reliable::DeliveryPath::Direct => wit::DeliveryPath::Direct,
            crate::reliable::DeliveryPath::Outbox => wit::DeliveryPath::Outbox,
        })
        .map_err(to_wit))
    }
}

impl bus::Host for StoreState {
    async fn publish(
        &mut self,
        topic: String,
        payload: Vec<u8>,
    ) -> WtResult<Result<(), wit::ActorError>> {
        Ok(self
            .host
            .publish(Some(&self.self_id), &self.turn.principal, &topic, payload)
            .map(|_| ())
            .map_err(to_wit))
    }
}
