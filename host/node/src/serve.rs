//! Calls from other hosts for actors of this one: claimed first when placement sent them
//! here (on the transport's receive loop, so arrival order holds), then offered to the
//! mailbox synchronously, exactly as a local call is.

use std::sync::Arc;

use sluice_cluster::transport::{
    self as t, ErrorRecord, Handler, Inbound, Outcome, Prepared, ReplyFuture,
};
use sluice_runtime::{ActorId, CallOptions, TellReceipt};

use crate::claims::State;
use crate::errors::to_record;
use crate::shared::Shared;

/// Serves this host's subject.
pub struct Serve(pub(crate) Arc<Shared>);

fn options(call: &Inbound) -> Result<CallOptions, ErrorRecord> {
    let sender = match &call.sender {
        Some(s) => Some(ActorId::parse(s).map_err(|e| to_record(&e))?),
        None => None,
    };
    Ok(CallOptions {
        deadline: call.deadline,
        principal: call.principal.as_deref().map(Into::into),
        sender,
        internal: call.internal,
        // A malformed one starts no trace rather than failing the call (as at the ingress).
        trace: call.trace.as_deref().and_then(|t| t.parse().ok()),
    })
}

impl Serve {
    fn target(&self, call: &Inbound) -> Result<ActorId, ErrorRecord> {
        ActorId::parse(&call.target).map_err(|e| to_record(&e))
    }

    /// After a refused offer: a claim won for it and not used goes back.
    fn refused(&self, id: &ActorId, e: &sluice_runtime::ActorError) -> ErrorRecord {
        if matches!(self.0.claims.state(id), State::Held) {
            self.0.claims.settle(id);
        }
        to_record(e)
    }
}

impl Handler for Serve {
    fn prepare<'a>(&'a self, call: &'a Inbound) -> Prepared<'a> {
        let id = match self.target(call) {
            Ok(id) => id,
            Err(e) => return Prepared::Answer(Outcome::Failed(e)),
        };
        // The common case, answered without a wait: this host holds it.
        if matches!(self.0.claims.state(&id), State::Held) {
            return Prepared::Go;
        }
        Prepared::Wait(Box::pin(async move {
            if !self.0.has_type(id.actor_type()) {
                // Let the offer give the same NOT_FOUND a local call gives.
                return None;
            }
            match self.0.locate(&id, true).await {
                Ok(crate::route::Target::Here) => None,
                Ok(crate::route::Target::There(node)) => Some(Outcome::Moved(node.to_string())),
                Err(e) => Some(Outcome::Failed(to_record(&e))),
            }
        }))
    }

    fn tell(&self, call: Inbound) -> Result<t::TellReceipt, ErrorRecord> {
        let id = self.target(&call)?;
        let opts = options(&call)?;
        match self
            .0
            .host
            .tell_here(&id, &call.msg_type, call.payload.to_vec(), &opts)
        {
            Ok(r) => Ok(match r {
                TellReceipt::Queued => t::TellReceipt::Queued,
                TellReceipt::DisplacedOldest => t::TellReceipt::DisplacedOldest,
                TellReceipt::DroppedNewest => t::TellReceipt::DroppedNewest,
            }),
            Err(e) => Err(self.refused(&id, &e)),
        }
    }

    fn ask(&self, call: Inbound) -> Result<ReplyFuture, ErrorRecord> {
        let id = self.target(&call)?;
        let opts = options(&call)?;
        match self
            .0
            .host
            .offer_ask_here(&id, call.msg_type, call.payload.to_vec(), &opts)
        {
            Ok(wait) => Ok(Box::pin(async move {
                wait.await
                    .map(bytes::Bytes::from)
                    .map_err(|e| to_record(&e))
            })),
            Err(e) => Err(self.refused(&id, &e)),
        }
    }
}
