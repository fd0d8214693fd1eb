//! What a cluster's adapter needs from a host beyond the public calls: its activation hooks,
//! and offering a call that arrived from another host to an actor of this one, bypassing the
//! installed route (the call was routed here already) and in arrival order.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::api::Host;
use crate::activations::ActivationHooks;
use crate::call::{CallOptions, TellReceipt};
use crate::error::ActorError;
use crate::id::ActorId;

/// The wait for the reply of an ask queued by [`Host::offer_ask_here`].
pub type ReplyWait = Pin<Box<dyn Future<Output = Result<Vec<u8>, ActorError>> + Send>>;

impl Host {
    /// Installs the hooks every activation of a keyed actor goes through (a cluster's
    /// single-activation rule). Once per host, before the first message.
    pub fn set_activations(&self, hooks: Arc<dyn ActivationHooks>) -> Result<(), ActorError> {
        if self.inner.env.set_activations(hooks) {
            Ok(())
        } else {
            Err(ActorError::invalid_argument(
                "activation hooks are already installed",
            ))
        }
    }

    /// Fences this host (`true`) or lifts the fence (`false`). While fenced, every activation
    /// under the activation hooks ends: a turn running guest code is interrupted within an
    /// epoch tick and its caller gets `UNAVAILABLE` (the turn may have run in part), queued
    /// messages get `UNAVAILABLE`, idle activations end, and the hooks hear `ended` for each
    /// as for any activation. New activations are the hooks' to refuse meanwhile. A cluster
    /// member fences itself when its lease lapses, so none of its actors runs on past it.
    /// A turn waiting in a host call (an `ask` of another actor) ends when it is back in
    /// guest code.
    pub fn fence(&self, on: bool) {
        let was = self
            .inner
            .env
            .fenced
            .swap(on, std::sync::atomic::Ordering::AcqRel);
        if on && !was {
            for t in self.inner.local().registry.all() {
                for c in t.cells() {
                    c.notify.notify_one();
                }
            }
        }
    }

    /// Queues a tell to an actor of this host, whatever route is installed. Synchronous: the
    /// message is in the mailbox (or refused) when this returns.
    pub fn tell_here(
        &self,
        to: &ActorId,
        msg_type: &str,
        payload: Vec<u8>,
        opts: &CallOptions,
    ) -> Result<TellReceipt, ActorError> {
        self.inner.local().tell(to, msg_type.into(), payload, opts)
    }

    /// Queues an ask to an actor of this host, whatever route is installed, and returns the
    /// wait for its reply. The message is in the mailbox (or refused) when this returns, so
    /// asks and tells offered one after another keep their order.
    pub fn offer_ask_here(
        &self,
        to: &ActorId,
        msg_type: String,
        payload: Vec<u8>,
        opts: &CallOptions,
    ) -> Result<ReplyWait, ActorError> {
        let local = self.inner.local().clone();
        let pending = local.offer_ask(to, msg_type, payload, opts)?;
        let id = to.clone();
        Ok(Box::pin(async move { local.reply_of(&id, pending).await }))
    }
}

/// Placing supervised instances (for hooks whose
/// [`places_supervised`](ActivationHooks::places_supervised) is true).
impl Host {
    /// Every supervised instance (`count`/`keys`) of the types deployed here.
    pub fn supervised(&self) -> Vec<ActorId> {
        let mut ids = Vec::new();
        for entry in self.inner.local().registry.all() {
            let module = entry.ty.current();
            for key in module.spec.eager_keys() {
                if let Ok(id) = ActorId::new(&module.spec.actor_type, &key) {
                    ids.push(id);
                }
            }
        }
        ids
    }

    /// Starts supervised instance `id` here unless it runs here already, through the
    /// activation hooks (so under their rules: a cluster's claim). `NOT_FOUND` for a type
    /// not deployed here.
    pub fn activate_supervised(&self, id: &ActorId) -> Result<(), ActorError> {
        let local = self.inner.local();
        let Some(entry) = local.registry.get(id.actor_type()) else {
            return Err(ActorError::not_found("no such actor type on this host"));
        };
        if self.inner.env.is_shutting_down() {
            return Err(ActorError::unavailable("host is shutting down"));
        }
        local.cell(&entry, id, true).map(drop)
    }

    /// Ends the activation of `id` here if nothing is queued for it and no turn runs (it
    /// moves: the next message activates it wherever the route places it). `false` when it
    /// is busy (try again later) or not active here.
    pub fn deactivate_idle(&self, id: &ActorId) -> bool {
        let local = self.inner.local();
        let Some(entry) = local.registry.get(id.actor_type()) else {
            return false;
        };
        let Some(cell) = entry.get(id.key()) else {
            return false;
        };
        let closed = entry.close_if(&cell, |inbox| inbox.mb.is_empty() && !inbox.running);
        if closed {
            // Its task may be waiting for a message that will never come.
            cell.notify.notify_one();
        }
        closed
    }
}
