//! How this host sends: through an installed [`Route`] (a cluster's) when there is one, else
//! straight to the local one — a branch on a set-once cell, so the embedded default pays no
//! dynamic dispatch on its hot path.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use crate::call::{CallOptions, TellReceipt};
use crate::error::ActorError;
use crate::id::ActorId;
use crate::local::Local;
use crate::route::{Outgoing, Route};

/// The local route and, once set, the route that replaces it.
pub(crate) struct Routes {
    pub local: Arc<Local>,
    installed: OnceLock<Arc<dyn Route>>,
}

impl Routes {
    pub fn new(local: Arc<Local>) -> Self {
        Self {
            local,
            installed: OnceLock::new(),
        }
    }

    /// Sends everything through `route` from now on (once per host).
    pub fn install(&self, route: Arc<dyn Route>) -> Result<(), ActorError> {
        self.installed
            .set(route)
            .map_err(|_| ActorError::invalid_argument("a route is already installed"))
    }

    /// The installed route, if any (`None`: every actor runs on this host).
    pub fn installed(&self) -> Option<&Arc<dyn Route>> {
        self.installed.get()
    }

    /// `msg_type` is borrowed until the message is queued: a refused tell allocates nothing.
    pub async fn tell(
        &self,
        to: &ActorId,
        msg_type: Cow<'_, str>,
        payload: Vec<u8>,
        opts: CallOptions,
    ) -> Result<TellReceipt, ActorError> {
        match self.installed.get() {
            None => self.local.tell(to, msg_type, payload, &opts),
            Some(r) => {
                r.tell(
                    to,
                    Outgoing {
                        msg_type: msg_type.into_owned(),
                        payload,
                        opts,
                    },
                )
                .await
            }
        }
    }

    pub async fn ask(
        &self,
        to: &ActorId,
        msg_type: String,
        payload: Vec<u8>,
        opts: CallOptions,
    ) -> Result<Vec<u8>, ActorError> {
        match self.installed.get() {
            None => self.local.ask(to, msg_type, payload, &opts).await,
            Some(r) => {
                r.ask(
                    to,
                    Outgoing {
                        msg_type,
                        payload,
                        opts,
                    },
                )
                .await
            }
        }
    }
}
