//! HELP text for every metric the outbox records, so `/metrics` documents itself
//! (`promtool check metrics` wants a HELP line per family). Names are written out here as
//! they are in `bulkhead.rs` and `outbox.rs`; the embedding binary calls [`describe`] once.

use metrics::{describe_counter, describe_gauge, describe_histogram};

/// Registers the description of every outbox metric with the installed recorder.
pub fn describe() {
    describe_gauge!(
        "sluice_outbox_queue_depth",
        "Pending outbox messages (neither acknowledged nor dead-lettered), by partition; refreshed every stats_interval_ms."
    );
    describe_gauge!(
        "sluice_outbox_oldest_pending_age_seconds",
        "Age of the oldest pending outbox message, in seconds (0 when none), by partition; refreshed every stats_interval_ms."
    );
    describe_counter!(
        "sluice_outbox_relay_delivered_total",
        "Outbox messages the relay delivered (acknowledged), by partition."
    );
    describe_counter!(
        "sluice_outbox_relay_retries_total",
        "Failed outbox deliveries scheduled for another attempt, by partition."
    );
    describe_counter!(
        "sluice_outbox_relay_backpressure_total",
        "Outbox deliveries refused for capacity (RESOURCE_EXHAUSTED with a retry hint), by partition; each one halves the limiter."
    );
    describe_counter!(
        "sluice_outbox_relay_errors_total",
        "Outbox deliveries that failed other than for capacity (transient or permanent errors), by partition."
    );
    describe_counter!(
        "sluice_outbox_relay_retry_budget_exhausted_total",
        "Retries deferred because the partition's retry budget was spent, by partition."
    );
    describe_counter!(
        "sluice_outbox_relay_dead_lettered_total",
        "Outbox messages moved to the dead-letter queue, by partition and reason (max_attempts, permanent, expired)."
    );
    describe_histogram!(
        "sluice_outbox_relay_delivery_seconds",
        "Time one outbox delivery attempt took, in seconds, by partition."
    );
    describe_gauge!(
        "sluice_outbox_relay_batch_size",
        "Messages the relay claims per round in one partition: grows under backlog, shrinks when idle, capped by relay_batch_size."
    );
    describe_gauge!(
        "sluice_outbox_partition_relayed",
        "1 while this host relays the partition (its worker holds the partition's lease; on a shared Postgres outbox exactly one host does), else 0."
    );
    describe_gauge!(
        "sluice_outbox_limiter_current_limit",
        "Current AIMD concurrency limit of the relay for one actor_type in one partition (deliveries in flight allowed)."
    );
    describe_gauge!(
        "sluice_outbox_limiter_in_flight",
        "Outbox deliveries in flight for one actor_type in one partition."
    );
    describe_counter!(
        "sluice_outbox_limiter_acquire_rejected_total",
        "Deliveries not attempted because the limiter of their actor_type and partition was full."
    );
    describe_counter!(
        "sluice_outbox_limiter_success_total",
        "Successful deliveries seen by a limiter (additive-increase signals), by partition and actor_type."
    );
    describe_counter!(
        "sluice_outbox_limiter_rejection_total",
        "Capacity refusals seen by a limiter (multiplicative-decrease signals), by partition and actor_type."
    );
    describe_counter!(
        "sluice_outbox_reminders_armed_total",
        "Durable reminders stored by outbox.remind (re-arming a name counts again); refused ones (max_reminders_per_actor) are not counted."
    );
    describe_counter!(
        "sluice_outbox_reminders_cancelled_total",
        "Pending durable reminders deleted by outbox.cancel-reminder."
    );
    describe_counter!(
        "sluice_outbox_reminders_promoted_total",
        "Durable reminders that came due and were moved into the outbox for the relay to deliver."
    );
    describe_gauge!(
        "sluice_outbox_reminder_lag_seconds",
        "How late this host moved the earliest reminder it knew of into the outbox, in seconds after its due time (its last promotion of one)."
    );
    describe_counter!(
        "sluice_outbox_dispatch_targets_total",
        "Targets of outbox.dispatch calls, by outcome: delivered (by the immediate attempt), deduplicated (absorbed by its idempotency key), queued_behind_pending / queued_delayed / queued_at_limit / queued_refused / queued_failed / queued_out_of_time (left for the relay, and why), not_found / expired / dead_lettered (dead-lettered at once)."
    );
}
