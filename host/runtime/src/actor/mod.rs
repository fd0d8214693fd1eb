//! Activations: an actor type's module and shared state, the cell each live actor is to the
//! rest of the host (its mailbox), the slots that bound how many are live, the task that runs
//! an actor's turns and supervises its instance, and what a trap becomes.
//!
//! The files depend on each other in one direction only: `module` ← `actor_type` ← `slots` ←
//! `cell` ← `registry` ← `eviction`; `env`, `trap` ← `instance` ← `batch` ← `supervisor`.

pub(crate) mod actor_type;
pub(crate) mod batch;
pub(crate) mod cell;
pub(crate) mod env;
pub(crate) mod eviction;
pub(crate) mod instance;
pub(crate) mod module;
pub(crate) mod registry;
pub(crate) mod slots;
pub(crate) mod supervisor;
pub(crate) mod trap;
