//! HELP text for every metric the runtime records, so `/metrics` documents itself
//! (`promtool check metrics` wants a HELP line per family). Names are written out here as
//! they are where each metric is recorded; the CLI calls [`describe`] once at start.

use metrics::{describe_counter, describe_histogram};

/// Registers the description of every runtime metric with the installed recorder.
pub fn describe() {
    describe_counter!(
        "sluice_turns_total",
        "Turns run, by actor_type and outcome (ok: the handler returned; error: it returned an error)."
    );
    describe_histogram!(
        "sluice_turn_seconds",
        "Time a turn spent in the handler, in seconds, by actor_type."
    );
    describe_counter!(
        "sluice_turn_batches_total",
        "Guest calls that ran a batch of queued messages' turns (guests exporting batched turns), by actor_type."
    );
    describe_counter!(
        "sluice_batched_turns_total",
        "Turns run inside batched guest calls, by actor_type; divided by sluice_turn_batches_total, the mean batch size."
    );
    describe_histogram!(
        "sluice_queue_seconds",
        "Time a message waited in the mailbox before its turn started, in seconds, by actor_type."
    );
    describe_counter!(
        "sluice_turns_skipped_total",
        "Queued turns never run because their deadline had passed when they reached the front, by actor_type."
    );
    describe_counter!(
        "sluice_deadline_exceeded_total",
        "Calls that failed DEADLINE_EXCEEDED, by actor_type and whether the turn was skipped (true) or cut short while running (false)."
    );
    describe_counter!(
        "sluice_mailbox_refused_total",
        "Messages refused RESOURCE_EXHAUSTED by a full mailbox with the error strategy, by actor_type."
    );
    describe_counter!(
        "sluice_mailbox_dropped_total",
        "Messages dropped by a full mailbox, by actor_type and strategy (drop_oldest, drop_newest)."
    );
    describe_counter!(
        "sluice_actor_traps_total",
        "Turns that trapped (the instance is discarded and restarted), by actor_type."
    );
    describe_counter!(
        "sluice_actor_restarts_total",
        "Actor instances restarted by their supervisor after a trap, by actor_type."
    );
    describe_counter!(
        "sluice_actor_stopped_total",
        "Actors stopped by their supervisor because the restart intensity was exceeded, by actor_type."
    );
    describe_counter!(
        "sluice_actor_activations_total",
        "Actor instances activated (a pool slot taken), by actor_type."
    );
    describe_counter!(
        "sluice_actor_deactivations_total",
        "Actor instances deactivated (idle timeout, eviction or shutdown), by actor_type."
    );
    describe_counter!(
        "sluice_actor_evictions_total",
        "Idle actors deactivated to make room under max_activations, by actor_type."
    );
    describe_counter!(
        "sluice_admission_refusals_total",
        "Calls refused OVERLOADED by admission control, by scope (actor: max_queued_per_actor; host: max_inflight_turns)."
    );
    describe_counter!(
        "sluice_tell_reliable_total",
        "tell-reliable calls, by path (direct: into the mailbox; outbox: stored for the relay; failed: neither)."
    );
    describe_counter!(
        "sluice_bus_deliveries_total",
        "Bus events handed to a subscriber's mailbox (delivered) or dropped there by drop_newest (dropped), by actor_type."
    );
    describe_counter!(
        "sluice_bus_delivery_retries_total",
        "Bus deliveries refused by a full mailbox, held and retried, by actor_type."
    );
    describe_counter!(
        "sluice_bus_publish_refused_total",
        "Guest publishes refused, by reason (invalid_topic, rate_limited, too_large)."
    );
}
