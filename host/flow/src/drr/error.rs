//! Refusals of [`super::DrrQueue::push`]; each gives the message back.

use super::Msg;
use std::fmt;

/// A refused push. The message is returned untouched, and nothing was
/// evicted on its behalf.
#[derive(PartialEq, Eq)]
#[non_exhaustive]
pub enum PushError<T> {
    /// The message alone costs more than the whole budget.
    Oversize {
        /// The refused message.
        msg: Msg<T>,
        /// The queue's budget in bytes.
        budget_bytes: usize,
    },
    /// Control messages pin so much of the budget that evicting every
    /// evictable message would still not make room.
    BudgetExhausted(Msg<T>),
    /// The principal holds `max_per_principal` messages and all of them are
    /// control messages.
    PrincipalFull(Msg<T>),
}

impl<T> PushError<T> {
    /// Takes the refused message back.
    pub fn into_msg(self) -> Msg<T> {
        match self {
            Self::Oversize { msg, .. } | Self::BudgetExhausted(msg) | Self::PrincipalFull(msg) => {
                msg
            }
        }
    }

    /// The canonical error code: an oversize message can never succeed
    /// (`INVALID_ARGUMENT`); the others are transient (`RESOURCE_EXHAUSTED`).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Oversize { .. } => "INVALID_ARGUMENT",
            _ => "RESOURCE_EXHAUSTED",
        }
    }
}

// Manual impls so `T` needs neither Debug nor Display.
impl<T> fmt::Debug for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl<T> fmt::Display for PushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Oversize { msg, budget_bytes } => write!(
                f,
                "INVALID_ARGUMENT: message of {} bytes exceeds the route budget of {budget_bytes} bytes",
                msg.cost
            ),
            Self::BudgetExhausted(msg) => write!(
                f,
                "RESOURCE_EXHAUSTED: route budget pinned by control messages ({} bytes refused)",
                msg.cost
            ),
            Self::PrincipalFull(_) => {
                f.write_str("RESOURCE_EXHAUSTED: principal queue full of control messages")
            }
        }
    }
}

impl<T> std::error::Error for PushError<T> {}
