//! Write Sluice actors in Rust.
//!
//! ```ignore
//! use sluice_guest::{Actor, Envelope, Error};
//!
//! struct Echo;
//! impl Actor for Echo {
//!     fn init(_config: &str) -> Result<Self, Error> { Ok(Echo) }
//!     fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> { Ok(env.payload) }
//! }
//! sluice_guest::actor!(Echo);
//! ```
#![warn(missing_docs)]

use std::fmt;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../../wit",
        world: "batched-actor-world",
        pub_export_macro: true,
        default_bindings_module: "sluice_guest::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

use bindings::sluice::actor::types as wit;

pub use wit::{
    Conflict, DeliveryPath, DispatchMode, DispatchOutcome, DispatchRequest, DispatchResult,
    Envelope, ErrorCode, LogLevel, OverloadInfo, OverloadScope, TellReceipt,
};

impl DispatchOutcome {
    /// The WIT name (`"not-found"`), as the other SDKs spell it.
    pub fn name(self) -> &'static str {
        match self {
            DispatchOutcome::Delivered => "delivered",
            DispatchOutcome::Deduplicated => "deduplicated",
            DispatchOutcome::QueuedBehindPending => "queued-behind-pending",
            DispatchOutcome::QueuedAtLimit => "queued-at-limit",
            DispatchOutcome::QueuedRefused => "queued-refused",
            DispatchOutcome::QueuedFailed => "queued-failed",
            DispatchOutcome::QueuedOutOfTime => "queued-out-of-time",
            DispatchOutcome::NotFound => "not-found",
            DispatchOutcome::Expired => "expired",
            DispatchOutcome::DeadLettered => "dead-lettered",
        }
    }

    /// Left in the outbox for the relay (every `Queued*` outcome).
    pub fn is_queued(self) -> bool {
        matches!(
            self,
            DispatchOutcome::QueuedBehindPending
                | DispatchOutcome::QueuedAtLimit
                | DispatchOutcome::QueuedRefused
                | DispatchOutcome::QueuedFailed
                | DispatchOutcome::QueuedOutOfTime
        )
    }

    /// In the dead-letter queue at once (`NotFound`, `Expired`, `DeadLettered`).
    pub fn is_dead_lettered(self) -> bool {
        matches!(
            self,
            DispatchOutcome::NotFound | DispatchOutcome::Expired | DispatchOutcome::DeadLettered
        )
    }
}

impl fmt::Display for DispatchOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl DispatchResult {
    /// The result with these per-target outcomes and the counts they add up to (what a fake
    /// host answers).
    pub fn from_outcomes(outcomes: impl IntoIterator<Item = DispatchOutcome>) -> Self {
        let outcomes: Vec<DispatchOutcome> = outcomes.into_iter().collect();
        let count = |f: fn(DispatchOutcome) -> bool| {
            u32::try_from(outcomes.iter().filter(|o| f(**o)).count()).unwrap_or(u32::MAX)
        };
        DispatchResult {
            delivered: count(|o| o == DispatchOutcome::Delivered),
            deduplicated: count(|o| o == DispatchOutcome::Deduplicated),
            queued: count(DispatchOutcome::is_queued),
            dead_lettered: count(DispatchOutcome::is_dead_lettered),
            outcomes,
        }
    }
}

#[cfg(any(test, feature = "testing"))]
pub mod testing;

/// The WIT import functions the SDK calls: the host's, or with the `testing` feature (and in
/// the SDK's own unit tests) the fake host's, which has the same signatures.
mod imports {
    #[cfg(not(any(test, feature = "testing")))]
    pub(crate) use crate::bindings::sluice::actor::{
        bus::publish,
        host::{ask, log, now_ms, schedule, self_id, tell},
        outbox::{cancel_reminder, dispatch, remind, tell_reliable},
    };
    #[cfg(any(test, feature = "testing"))]
    pub(crate) use crate::testing::imports::{
        ask, cancel_reminder, dispatch, log, now_ms, publish, remind, schedule, self_id, tell,
        tell_reliable,
    };
}

/// Every code, in the WIT `error-code` order (the rows of `wit/errors.json`).
pub const CODES: [ErrorCode; 7] = [
    ErrorCode::ResourceExhausted,
    ErrorCode::DeadlineExceeded,
    ErrorCode::Overloaded,
    ErrorCode::NotFound,
    ErrorCode::InvalidArgument,
    ErrorCode::Unavailable,
    ErrorCode::Internal,
];

/// The canonical message prefix of a code (`RESOURCE_EXHAUSTED`): every message reads
/// `PREFIX: detail`.
pub fn prefix(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::ResourceExhausted => "RESOURCE_EXHAUSTED",
        ErrorCode::DeadlineExceeded => "DEADLINE_EXCEEDED",
        ErrorCode::Overloaded => "OVERLOADED",
        ErrorCode::NotFound => "NOT_FOUND",
        ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
        ErrorCode::Unavailable => "UNAVAILABLE",
        ErrorCode::Internal => "INTERNAL",
    }
}

/// The one error type of the guest API: a code, the canonical message, and details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What went wrong, as a stable code.
    pub code: ErrorCode,
    /// The canonical message, e.g. `RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=12)`.
    pub message: String,
    /// When retrying is likely to succeed.
    pub retry_after_ms: Option<u64>,
    /// For `DeadlineExceeded`: the queued turn never ran.
    pub skipped: bool,
    /// For `Overloaded`: which cap refused, how deep the queue was, and the cap.
    pub overload: Option<OverloadInfo>,
}

impl Error {
    /// An error with a code and message and no details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retry_after_ms: None,
            skipped: false,
            overload: None,
        }
    }

    /// `INVALID_ARGUMENT`: the request itself is wrong.
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }

    /// `INTERNAL`: the actor failed.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    /// An error with the canonical message `PREFIX: detail`, e.g.
    /// `Error::canonical(ErrorCode::NotFound, "no such order")` reads `NOT_FOUND: no such order`.
    pub fn canonical(code: ErrorCode, detail: impl fmt::Display) -> Self {
        Self::new(code, format!("{}: {detail}", prefix(code)))
    }

    /// A plain error (one without a code of its own) as the contract's uncoded failure:
    /// `INTERNAL: <its message>`. Use it with `?`: `x.parse::<u32>().map_err(Error::uncoded)?`.
    pub fn uncoded(e: impl fmt::Display) -> Self {
        Self::canonical(ErrorCode::Internal, e)
    }

    /// The SDK class name used across languages (`ResourceExhausted`, `NotFound`, ...).
    pub fn kind(&self) -> &'static str {
        match self.code {
            ErrorCode::ResourceExhausted => "ResourceExhausted",
            ErrorCode::DeadlineExceeded => "DeadlineExceeded",
            ErrorCode::Overloaded => "Overloaded",
            ErrorCode::NotFound => "NotFound",
            ErrorCode::InvalidArgument => "InvalidArgument",
            ErrorCode::Unavailable => "Unavailable",
            ErrorCode::Internal => "Internal",
        }
    }

    /// The WIT spelling of the code (`resource-exhausted`, ...).
    pub fn code_str(&self) -> &'static str {
        match self.code {
            ErrorCode::ResourceExhausted => "resource-exhausted",
            ErrorCode::DeadlineExceeded => "deadline-exceeded",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::NotFound => "not-found",
            ErrorCode::InvalidArgument => "invalid-argument",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Internal => "internal",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<wit::ActorError> for Error {
    fn from(e: wit::ActorError) -> Self {
        Self {
            code: e.code,
            message: e.message,
            retry_after_ms: e.retry_after_ms,
            skipped: e.skipped,
            overload: e.overload,
        }
    }
}

impl From<Error> for wit::ActorError {
    fn from(e: Error) -> Self {
        Self {
            code: e.code,
            message: e.message,
            retry_after_ms: e.retry_after_ms,
            skipped: e.skipped,
            overload: e.overload,
        }
    }
}

/// Messaging and clocks.
pub mod host {
    use super::{Error, LogLevel, TellReceipt};
    use crate::imports as imp;

    /// Fire and forget. A full `error` mailbox is `ResourceExhausted` at once.
    pub fn tell(to: &str, msg_type: &str, payload: impl AsRef<[u8]>) -> Result<TellReceipt, Error> {
        imp::tell(to, msg_type, payload.as_ref()).map_err(Error::from)
    }

    /// Request and reply; `timeout_ms` only tightens the turn's own deadline.
    pub fn ask(
        to: &str,
        msg_type: &str,
        payload: impl AsRef<[u8]>,
        timeout_ms: u64,
    ) -> Result<Vec<u8>, Error> {
        imp::ask(to, msg_type, payload.as_ref(), timeout_ms).map_err(Error::from)
    }

    /// Calls bounded by `deadline`, which only tightens the inherited one:
    /// `host::with_deadline(Duration::from_millis(250)).ask(worker, "process", job, 0)`.
    /// A zero deadline fails every call through it `InvalidArgument`, unsent.
    pub fn with_deadline(deadline: std::time::Duration) -> Call {
        if deadline.is_zero() {
            return Call(Err(Error::invalid_argument(
                "INVALID_ARGUMENT: deadline must be a positive finite number of milliseconds, got 0",
            )));
        }
        Call(Ok(
            deadline.as_micros().div_ceil(1000).min(u64::MAX as u128) as u64,
        ))
    }

    /// Calls with a per-call deadline; see [`with_deadline`].
    #[derive(Debug, Clone)]
    pub struct Call(Result<u64, Error>);

    impl Call {
        /// [`ask`] within this deadline (and `timeout_ms` when non-zero).
        pub fn ask(
            &self,
            to: &str,
            msg_type: &str,
            payload: impl AsRef<[u8]>,
            timeout_ms: u64,
        ) -> Result<Vec<u8>, Error> {
            let ms = self.0.clone()?;
            let ms = if timeout_ms == 0 {
                ms
            } else {
                ms.min(timeout_ms)
            };
            ask(to, msg_type, payload, ms)
        }
    }

    /// Sends `msg_type` to this actor after `delay_ms`.
    pub fn schedule(delay_ms: u64, msg_type: &str, payload: impl AsRef<[u8]>) -> Result<(), Error> {
        imp::schedule(delay_ms, msg_type, payload.as_ref()).map_err(Error::from)
    }

    /// This actor's id, `Type/key`.
    pub fn self_id() -> String {
        imp::self_id()
    }

    /// Milliseconds since the Unix epoch.
    pub fn now_ms() -> u64 {
        imp::now_ms()
    }

    /// Logs through the host's tracing.
    pub fn log(level: LogLevel, msg: &str) {
        imp::log(level, msg)
    }
}

/// The durable outbox.
pub mod outbox {
    use super::{Conflict, DeliveryPath, DispatchMode, DispatchResult, Error};
    use crate::bindings::sluice::actor::types::DispatchRequest;
    use crate::imports as imp;

    /// A dispatch request; build with [`Dispatch::new`] and send with [`Dispatch::send`].
    #[derive(Debug, Clone)]
    pub struct Dispatch {
        req: DispatchRequest,
    }

    impl Dispatch {
        /// Fan `payload` out to `targets` as `msg_type`, cast mode, append conflict.
        pub fn new(
            targets: &[impl AsRef<str>],
            msg_type: &str,
            payload: impl Into<Vec<u8>>,
        ) -> Self {
            Self {
                req: DispatchRequest {
                    context: String::new(),
                    dispatcher_id: String::new(),
                    msg_type: msg_type.to_string(),
                    targets: targets.iter().map(|t| t.as_ref().to_string()).collect(),
                    payload: payload.into(),
                    mode: DispatchMode::Cast,
                    idempotency_key: String::new(),
                    conflict: Conflict::Append,
                    sequence_number: None,
                    ttl_ms: None,
                },
            }
        }
        /// Delivered only once the handler succeeded.
        pub fn mode(mut self, mode: DispatchMode) -> Self {
            self.req.mode = mode;
            self
        }
        /// Deduplicate (append) or coalesce (overwrite) by this key.
        pub fn idempotency_key(mut self, key: &str, conflict: Conflict) -> Self {
            self.req.idempotency_key = key.to_string();
            self.req.conflict = conflict;
            self
        }
        /// Orders overwrites explicitly.
        pub fn sequence_number(mut self, seq: u64) -> Self {
            self.req.sequence_number = Some(seq);
            self
        }
        /// Dead-letter instead of delivering after this long.
        pub fn ttl_ms(mut self, ttl: u64) -> Self {
            self.req.ttl_ms = Some(ttl);
            self
        }
        /// Tenant/namespace context (JSON) and dispatcher id, as the seed's API takes them.
        pub fn context(mut self, context: &str, dispatcher_id: &str) -> Self {
            self.req.context = context.to_string();
            self.req.dispatcher_id = dispatcher_id.to_string();
            self
        }
        /// Records and attempts delivery: counts by kind and one [`DispatchOutcome`] per target,
        /// in target order.
        ///
        /// [`DispatchOutcome`]: crate::DispatchOutcome
        pub fn send(&self) -> Result<DispatchResult, Error> {
            imp::dispatch(&self.req).map_err(Error::from)
        }
    }

    /// Direct tell first, outbox on any failure.
    pub fn tell_reliable(
        to: &str,
        msg_type: &str,
        payload: impl AsRef<[u8]>,
    ) -> Result<DeliveryPath, Error> {
        imp::tell_reliable(to, msg_type, payload.as_ref()).map_err(Error::from)
    }

    /// A durable reminder: `msg_type` with `payload`, delivered to this actor itself once
    /// `delay_ms` has passed. Stored before this returns, it outlives the activation, a host
    /// crash or restart and a handoff in a cluster (`host::schedule` is in memory and does
    /// not). At least once: after a crash it may arrive twice. A non-empty `name` (at most
    /// 256 bytes) names it for this actor, and arming that name again replaces the pending
    /// one; `""` arms a new one each time. `ResourceExhausted` when this actor has
    /// `max_reminders_per_actor` pending, `Unavailable` on a host without an outbox.
    pub fn remind(
        name: &str,
        delay_ms: u64,
        msg_type: &str,
        payload: impl AsRef<[u8]>,
    ) -> Result<(), Error> {
        imp::remind(name, delay_ms, msg_type, payload.as_ref()).map_err(Error::from)
    }

    /// Cancels this actor's pending reminder `name`: `true` when one was pending, `false`
    /// when none was (never armed, cancelled, or already being delivered).
    pub fn cancel_reminder(name: &str) -> Result<bool, Error> {
        imp::cancel_reminder(name).map_err(Error::from)
    }
}

/// Pub/sub.
pub mod bus {
    use super::Error;

    /// Publishes on behalf of the current principal.
    pub fn publish(topic: &str, payload: impl AsRef<[u8]>) -> Result<(), Error> {
        crate::imports::publish(topic, payload.as_ref()).map_err(Error::from)
    }
}

/// An actor: created by `init` once per activation, then handles one message per turn.
pub trait Actor: Sized + 'static {
    /// Builds the actor from the app config's `init` table (JSON).
    fn init(config: &str) -> Result<Self, Error>;
    /// Handles one message; the `Ok` bytes are the reply.
    fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error>;
}

/// Exports a type implementing [`Actor`] as this component's `actor` interface, and its
/// batched turns (`batch`): when messages queue up, the host hands them over in one call and
/// each still runs through [`Actor::handle`], in order, with its own reply.
#[macro_export]
macro_rules! actor {
    ($ty:ty) => {
        struct __SluiceExport;
        ::std::thread_local! {
            static __SLUICE_ACTOR: ::std::cell::RefCell<Option<$ty>> = const { ::std::cell::RefCell::new(None) };
        }
        impl $crate::bindings::exports::sluice::actor::actor::Guest for __SluiceExport {
            fn init(config: String) -> Result<(), $crate::bindings::sluice::actor::types::ActorError> {
                let a = <$ty as $crate::Actor>::init(&config)?;
                __SLUICE_ACTOR.with(|cell| *cell.borrow_mut() = Some(a));
                Ok(())
            }
            fn handle(env: $crate::Envelope) -> Result<Vec<u8>, $crate::bindings::sluice::actor::types::ActorError> {
                __SLUICE_ACTOR.with(|cell| {
                    let mut slot = cell.borrow_mut();
                    if slot.is_none() {
                        *slot = Some(<$ty as $crate::Actor>::init("{}")?);
                    }
                    slot.as_mut().expect("initialised above").handle(env).map_err(Into::into)
                })
            }
        }
        impl $crate::bindings::exports::sluice::actor::batch::Guest for __SluiceExport {
            fn run() {
                let mut done: Option<Result<Vec<u8>, $crate::bindings::sluice::actor::types::ActorError>> = None;
                while let Some(env) = $crate::bindings::sluice::actor::turns::next(
                    done.as_ref().map(|r| r.as_ref().map(Vec::as_slice)),
                ) {
                    done = Some(<__SluiceExport as $crate::bindings::exports::sluice::actor::actor::Guest>::handle(env));
                }
            }
        }
        $crate::bindings::export!(__SluiceExport);
    };
}
