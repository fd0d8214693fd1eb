//! Who may start an activation: the hook a cluster installs so that an actor runs on at most
//! one host. Without one (the embedded default) every activation may start.

use crate::error::ActorError;
use crate::id::ActorId;

/// Consulted when an activation of a keyed actor starts and told when it has ended.
///
/// Calls come in pairs: every `admit` that returns `Ok` is followed by exactly one `ended`
/// for the same id, once that activation's last turn is over (or at once, when the
/// activation was not needed after all because a concurrent sender made the same one). A
/// new activation may be admitted before an older one of the same id has ended: the older
/// one runs no further turn by then, but its `ended` comes later, so an implementation counts
/// and releases its claim only when the count falls to zero.
///
/// Supervised instances (`count`/`keys`) are started by each host's deploy and are not
/// passed through these hooks, unless [`ActivationHooks::places_supervised`] says the hooks'
/// owner places them: then deploy starts none, the owner starts each where it belongs
/// ([`crate::Host::activate_supervised`]), and their activations pass `admit`/`ended` like
/// any other.
pub trait ActivationHooks: Send + Sync + 'static {
    /// Whether `id` may start running on this host now. Synchronous and cheap: the caller
    /// holds no lock, but every activation of the host goes through it. A refusal is the
    /// error the message that needed the activation gets.
    fn admit(&self, id: &ActorId) -> Result<(), ActorError>;
    /// The activation of `id` that `admit` let start has ended: no turn running, none to come.
    fn ended(&self, id: &ActorId);
    /// Whether the hooks' owner decides where supervised instances run (a cluster spreads a
    /// type's `count` instances over its members). `false`: every host's deploy starts them.
    fn places_supervised(&self) -> bool {
        false
    }
}
