//! One compiled version of an actor type's module, replaced whole by a deploy.

use std::sync::Arc;

use sluice_flow::mailbox::MailboxStrategy;

use crate::bindings::ActorWorldPre;
use crate::bindings::batched::BatchedActorWorldPre;
use crate::config::{ChildSpec, WasiGrants};
use crate::guest::StoreState;

/// A module ready to instantiate, with the settings of the spec it was deployed with.
pub(crate) struct ModuleVersion {
    pub version: u64,
    pub pre: ActorWorldPre<StoreState>,
    /// The same module as a guest of `batched-actor-world`, when it exports `batch`.
    pub batched: Option<BatchedActorWorldPre<StoreState>>,
    pub spec: ChildSpec,
    /// `spec.wasi`, shared by every activation's store.
    pub wasi: Arc<WasiGrants>,
    pub strategy: MailboxStrategy,
    pub init_json: String,
    /// Linear-memory ceiling per instance, bytes.
    pub memory_limit: usize,
}
