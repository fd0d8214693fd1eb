//! What `status` reports per actor type: live activations, queued messages and the oldest
//! one's age, stopped actors.

use std::time::Instant;

use super::inner::HostInner;
use crate::actor::cell::InboxState;

/// What `status` reports per actor type.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TypeStatus {
    /// The type name.
    pub actor_type: String,
    /// Current module version (increments per deploy).
    pub version: u64,
    /// Live activations: instances holding a pool slot (an addressed actor still
    /// activating, or one between a crash and its restart, is not counted).
    pub active: usize,
    /// Messages queued across activations.
    pub queued: usize,
    /// How long the oldest of them has waited, in milliseconds (0 when none is queued).
    pub oldest_queued_ms: u64,
    /// Activations stopped by their supervisor.
    pub stopped: usize,
}

impl HostInner {
    /// Per-type status, sorted by type name. O(live actors).
    pub(crate) fn status(&self) -> Vec<TypeStatus> {
        let mut out: Vec<TypeStatus> = self
            .local()
            .registry
            .all()
            .into_iter()
            .map(|t| {
                let cells = t.cells();
                let (mut queued, mut oldest) = (0, None::<Instant>);
                let (mut active, mut stopped) = (0, 0);
                for c in &cells {
                    let (n, first) = c.queue();
                    queued += n;
                    oldest = match (oldest, first) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    if c.live.load(std::sync::atomic::Ordering::Acquire) {
                        active += 1;
                    }
                    if c.inbox.lock().state == InboxState::Stopped {
                        stopped += 1;
                    }
                }
                TypeStatus {
                    actor_type: t.ty.name.to_string(),
                    version: t.ty.current_version(),
                    active,
                    queued,
                    oldest_queued_ms: oldest.map_or(0, |t| t.elapsed().as_millis() as u64),
                    stopped,
                }
            })
            .collect();
        out.sort_by(|a, b| a.actor_type.cmp(&b.actor_type));
        out
    }
}
