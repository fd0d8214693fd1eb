//! Typed errors: the Rust mirror of the WIT `actor-error`, and host-level load errors.

use std::borrow::Cow;
use std::fmt;

/// The stable error codes of the guest contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// No room: full `error` mailbox, rate limit, memory limit.
    ResourceExhausted,
    /// The call's deadline passed.
    DeadlineExceeded,
    /// An admission cap refused the call.
    Overloaded,
    /// No such actor type.
    NotFound,
    /// The request is malformed: oversize payload, bad id, bad deadline.
    InvalidArgument,
    /// The actor or subsystem cannot serve now.
    Unavailable,
    /// The callee failed (trap) or raised an uncoded error.
    Internal,
}

impl ErrorCode {
    /// Every code, in the WIT `error-code` order (the rows of `wit/errors.json`).
    pub const ALL: [ErrorCode; 7] = [
        Self::ResourceExhausted,
        Self::DeadlineExceeded,
        Self::Overloaded,
        Self::NotFound,
        Self::InvalidArgument,
        Self::Unavailable,
        Self::Internal,
    ];

    /// The canonical upper-case prefix used in messages (`RESOURCE_EXHAUSTED`).
    pub fn canonical(self) -> &'static str {
        match self {
            Self::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Self::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Self::Overloaded => "OVERLOADED",
            Self::NotFound => "NOT_FOUND",
            Self::InvalidArgument => "INVALID_ARGUMENT",
            Self::Unavailable => "UNAVAILABLE",
            Self::Internal => "INTERNAL",
        }
    }

    /// The WIT spelling (`resource-exhausted`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ResourceExhausted => "resource-exhausted",
            Self::DeadlineExceeded => "deadline-exceeded",
            Self::Overloaded => "overloaded",
            Self::NotFound => "not-found",
            Self::InvalidArgument => "invalid-argument",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
        }
    }

    /// The HTTP status the ingress answers with.
    pub fn http_status(self) -> u16 {
        match self {
            Self::ResourceExhausted | Self::Overloaded => 429,
            Self::DeadlineExceeded => 504,
            Self::NotFound => 404,
            Self::InvalidArgument => 400,
            Self::Unavailable => 503,
            Self::Internal => 500,
        }
    }
}

/// Which admission cap refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverloadScope {
    /// The target actor's queue cap.
    Actor,
    /// The host-wide in-flight cap.
    Host,
}

/// Details of an `Overloaded` refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overload {
    /// Which cap.
    pub scope: OverloadScope,
    /// Queued plus running turns at the refusal.
    pub depth: u64,
    /// The cap.
    pub limit: u64,
}

/// An error as guests and callers see it: a code, the canonical message, and details.
///
/// The message is rendered on demand (see `Display`), so building the common refusals
/// (`mailbox_full`, `overloaded`, `deadline_exceeded`) allocates nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorError {
    /// The stable code.
    pub code: ErrorCode,
    detail: Detail,
    /// When retrying is likely to succeed.
    pub retry_after_ms: Option<u64>,
    /// For `DeadlineExceeded`: the queued turn was skipped and never ran.
    pub skipped: bool,
    /// For `Overloaded`.
    pub overload: Option<Overload>,
    /// Raised because this host is cut off from its cluster ([`Self::isolated`]).
    isolated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Detail {
    /// Rendered as `CODE: detail` plus the standard suffixes.
    Canonical(Cow<'static, str>),
    /// A full `error`-strategy mailbox refused the message: rendered as `Canonical("mailbox
    /// full")`, and told apart by its variant, never by its words.
    MailboxFull,
    /// A message that is already complete (a guest's own, or one that crossed a wire).
    Verbatim(String),
}

/// The detail of [`ActorError::mailbox_full`].
const MAILBOX_FULL: &str = "mailbox full";

impl ActorError {
    /// An error whose message is `CODE: detail`.
    pub fn new(code: ErrorCode, detail: impl Into<Cow<'static, str>>) -> Self {
        Self {
            code,
            detail: Detail::Canonical(detail.into()),
            retry_after_ms: None,
            skipped: false,
            overload: None,
            isolated: false,
        }
    }

    /// An error with a complete message of its own (kept byte for byte).
    pub fn verbatim(code: ErrorCode, message: String) -> Self {
        Self {
            code,
            detail: Detail::Verbatim(message),
            retry_after_ms: None,
            skipped: false,
            overload: None,
            isolated: false,
        }
    }

    /// A full `error`-strategy mailbox. Renders exactly as every guest sees it:
    /// `RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=N)`.
    pub fn mailbox_full(retry_after_ms: u64) -> Self {
        Self {
            code: ErrorCode::ResourceExhausted,
            detail: Detail::MailboxFull,
            retry_after_ms: Some(retry_after_ms),
            skipped: false,
            overload: None,
            isolated: false,
        }
    }

    /// The caller's deadline passed; `skipped` when the turn never ran.
    pub fn deadline_exceeded(skipped: bool) -> Self {
        let detail = if skipped {
            "call-timeout (skipped: the queued turn never ran)"
        } else {
            "call-timeout (the turn may still be running)"
        };
        Self {
            skipped,
            ..Self::new(ErrorCode::DeadlineExceeded, detail)
        }
    }

    /// An admission cap refused the call.
    pub fn overloaded(scope: OverloadScope, depth: u64, limit: u64) -> Self {
        Self {
            overload: Some(Overload {
                scope,
                depth,
                limit,
            }),
            ..Self::new(ErrorCode::Overloaded, "queue at capacity")
        }
    }

    /// `NOT_FOUND: detail`.
    pub fn not_found(detail: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorCode::NotFound, detail)
    }
    /// `INVALID_ARGUMENT: detail`.
    pub fn invalid_argument(detail: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorCode::InvalidArgument, detail)
    }
    /// `UNAVAILABLE: detail`.
    pub fn unavailable(detail: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorCode::Unavailable, detail)
    }
    /// `INTERNAL: detail`.
    pub fn internal(detail: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorCode::Internal, detail)
    }

    /// `UNAVAILABLE: detail`, raised because this host is cut off from its cluster (it has no
    /// NATS connection now, or its cluster lease lapsed) rather than by the call or its
    /// receiver. The outbox relay retries such a delivery later without counting it as one
    /// of the message's attempts: a host's own outage must not dead-letter what it holds.
    pub fn isolated(detail: impl Into<Cow<'static, str>>) -> Self {
        Self::unavailable(detail).into_isolated()
    }

    /// This error, marked as raised by this host's cut-off from its cluster
    /// ([`Self::isolated`]); its code and message stay as they are.
    pub fn into_isolated(self) -> Self {
        Self {
            isolated: true,
            ..self
        }
    }

    /// Whether this host's cut-off from its cluster raised it ([`Self::isolated`]).
    pub fn is_isolated(&self) -> bool {
        self.isolated
    }

    /// Sets the retry hint.
    pub fn with_retry_after(mut self, ms: u64) -> Self {
        self.retry_after_ms = Some(ms);
        self
    }

    /// The canonical message.
    pub fn message(&self) -> String {
        self.to_string()
    }

    /// Whether the message came whole from elsewhere (a guest's own error, or one that
    /// crossed a wire) rather than being raised by this host.
    pub fn is_verbatim(&self) -> bool {
        matches!(self.detail, Detail::Verbatim(_))
    }

    /// Whether a full mailbox refused the message ([`Self::mailbox_full`]), as opposed to
    /// another limit or a handler's own `RESOURCE_EXHAUSTED`. Only an error raised on this
    /// host knows it: one that crossed a wire is [verbatim](Self::is_verbatim).
    pub fn is_mailbox_full(&self) -> bool {
        matches!(self.detail, Detail::MailboxFull)
    }

    /// What this host says went wrong, without the code or the hints: for a refusal by a
    /// limit, what is exhausted (`mailbox full`). `None` for a message that came whole from
    /// elsewhere (see [`Self::is_verbatim`]), which has no separate detail.
    pub fn detail(&self) -> Option<&str> {
        match &self.detail {
            Detail::Canonical(d) => Some(d),
            Detail::MailboxFull => Some(MAILBOX_FULL),
            Detail::Verbatim(_) => None,
        }
    }

    /// Whether the outbox relay should treat this as a capacity signal (AIMD halves).
    pub fn is_capacity(&self) -> bool {
        self.code == ErrorCode::ResourceExhausted && self.retry_after_ms.is_some()
    }
}

impl fmt::Display for ActorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.detail {
            Detail::Verbatim(m) => f.write_str(m),
            Detail::Canonical(_) | Detail::MailboxFull => {
                let d = self.detail().unwrap_or_default();
                write!(f, "{}: {d}", self.code.canonical())?;
                if let Some(o) = &self.overload {
                    let scope = match o.scope {
                        OverloadScope::Actor => "actor",
                        OverloadScope::Host => "host",
                    };
                    write!(f, " (scope={scope}, depth={}, limit={})", o.depth, o.limit)?;
                }
                if let Some(ms) = self.retry_after_ms {
                    write!(f, " (retry_after_ms={ms})")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ActorError {}

/// Why a host could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// A setting of [`HostConfig`](crate::HostConfig) or a subscription is invalid.
    #[error(transparent)]
    Invalid(#[from] LoadError),
    /// The engine's instance pool could not be reserved (each `max_activations` slot
    /// reserves ~8 GiB of address space, shared by every host in this process).
    #[error(
        "reserving the instance pool for max_activations={max_activations} (~8 GiB of address space per slot, shared by every host in this process): {reason}"
    )]
    Engine {
        /// The setting that sized the pool.
        max_activations: u32,
        /// The engine's reason.
        reason: String,
    },
    /// The host imports (WASI, `sluice:actor`) could not be linked: a bug, not a setting.
    #[error("linking the host imports: {0}")]
    Link(String),
}

/// Why a module could not be loaded. The host keeps serving everything else.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read module {path}: {source}")]
    Io {
        /// The module path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not a valid WebAssembly component (a core module, garbage, or a truncated file).
    #[error("{name}: not a valid WebAssembly component: {reason}")]
    Invalid {
        /// Actor type or file name.
        name: String,
        /// The decoder's reason.
        reason: String,
    },
    /// A valid component that does not fit the `sluice:actor` world (missing export, or an
    /// import the host does not provide).
    #[error("{name}: does not fit the sluice:actor@0.1.0 world: {reason}")]
    Link {
        /// Actor type or file name.
        name: String,
        /// What did not fit.
        reason: String,
    },
    /// The app configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A `[[bus.subscriptions]]` entry is invalid: a bad topic pattern (the topic grammar's
    /// `INVALID_ARGUMENT` reason) or a bad receiver id.
    #[error("invalid bus subscription of {actor_type} to {topic:?}: {reason}")]
    Subscription {
        /// The subscribing actor type.
        actor_type: String,
        /// The pattern as written.
        topic: String,
        /// Why it was refused.
        reason: String,
    },
}
