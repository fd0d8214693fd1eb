//! Per-actor-type metric handles, resolved once per type so hot paths only increment. Labels
//! are bounded: the actor type (from config) and a fixed outcome set, never an id.

/// Metric handles resolved once per type so hot paths only increment.
pub(crate) struct TypeMetrics {
    pub refused: metrics::Counter,
    pub dropped_oldest: metrics::Counter,
    pub dropped_newest: metrics::Counter,
    pub turns_ok: metrics::Counter,
    pub turns_err: metrics::Counter,
    /// Turns that trapped (a crash, including a memory-limit hit) or overran `max_turn_ms`:
    /// with `ok` and `error`, every turn that ran is counted exactly once.
    pub turns_trapped: metrics::Counter,
    pub turns_interrupted: metrics::Counter,
    pub turns_skipped: metrics::Counter,
    /// Calls to this type that failed `DEADLINE_EXCEEDED`, by whether the turn never ran.
    pub deadline_skipped: metrics::Counter,
    pub deadline_running: metrics::Counter,
    pub turn_seconds: metrics::Histogram,
    /// Guest calls that ran a batch of turns, and the turns they ran (their ratio is the mean
    /// batch size). Turns are counted by `turns_*` either way.
    pub batches: metrics::Counter,
    pub batched_turns: metrics::Counter,
    pub queue_seconds: metrics::Histogram,
    pub traps: metrics::Counter,
    pub restarts: metrics::Counter,
    pub stopped: metrics::Counter,
    pub activations: metrics::Counter,
    pub deactivations: metrics::Counter,
    /// Idle activations deactivated to make room under `max_activations`.
    pub evictions: metrics::Counter,
}

impl TypeMetrics {
    pub fn new(ty: &str) -> Self {
        let t = ty.to_string();
        Self {
            refused: metrics::counter!("sluice_mailbox_refused_total", "actor_type" => t.clone()),
            dropped_oldest: metrics::counter!("sluice_mailbox_dropped_total", "actor_type" => t.clone(), "strategy" => "drop_oldest"),
            dropped_newest: metrics::counter!("sluice_mailbox_dropped_total", "actor_type" => t.clone(), "strategy" => "drop_newest"),
            turns_ok: metrics::counter!("sluice_turns_total", "actor_type" => t.clone(), "outcome" => "ok"),
            turns_err: metrics::counter!("sluice_turns_total", "actor_type" => t.clone(), "outcome" => "error"),
            turns_trapped: metrics::counter!("sluice_turns_total", "actor_type" => t.clone(), "outcome" => "trapped"),
            turns_interrupted: metrics::counter!("sluice_turns_total", "actor_type" => t.clone(), "outcome" => "interrupted"),
            turns_skipped: metrics::counter!("sluice_turns_skipped_total", "actor_type" => t.clone()),
            deadline_skipped: metrics::counter!("sluice_deadline_exceeded_total", "actor_type" => t.clone(), "skipped" => "true"),
            deadline_running: metrics::counter!("sluice_deadline_exceeded_total", "actor_type" => t.clone(), "skipped" => "false"),
            turn_seconds: metrics::histogram!("sluice_turn_seconds", "actor_type" => t.clone()),
            batches: metrics::counter!("sluice_turn_batches_total", "actor_type" => t.clone()),
            batched_turns: metrics::counter!("sluice_batched_turns_total", "actor_type" => t.clone()),
            queue_seconds: metrics::histogram!("sluice_queue_seconds", "actor_type" => t.clone()),
            traps: metrics::counter!("sluice_actor_traps_total", "actor_type" => t.clone()),
            restarts: metrics::counter!("sluice_actor_restarts_total", "actor_type" => t.clone()),
            stopped: metrics::counter!("sluice_actor_stopped_total", "actor_type" => t.clone()),
            activations: metrics::counter!("sluice_actor_activations_total", "actor_type" => t.clone()),
            deactivations: metrics::counter!("sluice_actor_deactivations_total", "actor_type" => t.clone()),
            evictions: metrics::counter!("sluice_actor_evictions_total", "actor_type" => t),
        }
    }
}
