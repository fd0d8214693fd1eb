//! Refusals of [`Dispatcher::dispatch`](super::Dispatcher::dispatch).

use crate::Event;
use std::sync::Arc;

/// A refused dispatch; the event is given back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DispatchError {
    /// The (actor type, principal) queue holds its capacity already.
    #[error("RESOURCE_EXHAUSTED: dispatcher queue full")]
    QueueFull(Arc<Event>),
}

impl DispatchError {
    /// Takes the refused event back.
    pub fn into_event(self) -> Arc<Event> {
        match self {
            Self::QueueFull(e) => e,
        }
    }

    /// The canonical error code.
    pub fn code(&self) -> &'static str {
        "RESOURCE_EXHAUSTED"
    }
}
