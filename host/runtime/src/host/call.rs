//! The Rust host API's call builder: `host.call("Type/key").with_deadline(50.0).ask(..)`.
//!
//! A per-call deadline from outside any actor replaces the host's `call_timeout_ms` (it may be
//! longer or shorter); inside a chain it only tightens. An invalid budget (0, negative, NaN,
//! infinite) is `INVALID_ARGUMENT`, returned before anything is sent.

use std::sync::Arc;
use std::time::Instant;

use sluice_flow::deadline;

use super::api::Host;
use crate::call::{CallOptions, TellReceipt};
use crate::error::ActorError;

/// A call being prepared against one actor. Build with [`Host::call`].
#[must_use = "a call does nothing until `ask` or `tell`"]
pub struct Call<'a> {
    host: &'a Host,
    to: &'a str,
    opts: CallOptions,
    /// The first invalid option, returned by `ask`/`tell` before sending.
    invalid: Option<ActorError>,
}

impl Host {
    /// Starts a call to `to` (`Type/key`) from outside any actor (an arrival: subject to the
    /// admission caps, default deadline `call_timeout_ms`).
    pub fn call<'a>(&'a self, to: &'a str) -> Call<'a> {
        Call {
            host: self,
            to,
            opts: CallOptions::default(),
            invalid: None,
        }
    }
}

impl Call<'_> {
    /// This call's budget in milliseconds from now, in place of `call_timeout_ms`. Must be a
    /// positive finite number; otherwise the call fails `INVALID_ARGUMENT` without sending.
    pub fn with_deadline(mut self, ms: f64) -> Self {
        match deadline::budget_from_ms(ms) {
            Ok(b) => self.opts.deadline = Some(Instant::now() + b),
            Err(e) => {
                self.invalid
                    .get_or_insert(ActorError::invalid_argument(e.to_string()));
            }
        }
        self
    }

    /// Who the work is for (tracing and fair queues; never a metric label).
    pub fn principal(mut self, principal: &str) -> Self {
        self.opts.principal = Some(Arc::from(principal));
        self
    }

    /// Request/reply.
    pub async fn ask(
        self,
        msg_type: &str,
        payload: impl Into<Vec<u8>>,
    ) -> Result<Vec<u8>, ActorError> {
        if let Some(e) = self.invalid {
            return Err(e);
        }
        self.host
            .ask_with(self.to, msg_type, payload, self.opts)
            .await
    }

    /// Fire and forget.
    pub async fn tell(
        self,
        msg_type: &str,
        payload: impl Into<Vec<u8>>,
    ) -> Result<TellReceipt, ActorError> {
        if let Some(e) = self.invalid {
            return Err(e);
        }
        self.host
            .tell_with(self.to, msg_type, payload, self.opts)
            .await
    }
}
