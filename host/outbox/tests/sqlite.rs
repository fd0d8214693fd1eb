//! Every outbox semantic against a real SQLite file in a temp dir, on paused tokio time: the
//! outbox's clock is tokio's, so backoffs, leases, delays and TTLs pass as fast as the runtime
//! can auto-advance (no test sleeps for them).
mod common;
use common::{Store, StoreKind, bodies};

macro_rules! on_sqlite { ($($name:ident),* $(,)?) => { $(
    #[tokio::test(start_paused = true)]
    async fn $name() { bodies::$name(Store::sqlite()).await }
)* } }

on_sqlite!(
    relay_delivers_every_stored_message_once_in_order_per_receiver,
    later_message_never_overtakes_an_earlier_one_backing_off,
    capacity_halves_the_limit_and_backs_off_at_least_retry_after,
    the_trace_context_is_stored_and_handed_to_every_attempt,
    transient_failure_backs_off_without_moving_the_limit,
    permanent_failure_is_dead_lettered_at_once,
    max_attempts_dead_letters_and_unblocks_the_receiver,
    capacity_refusals_never_dead_letter,
    a_cut_off_hosts_failed_attempts_never_dead_letter,
    append_stores_a_repeated_key_once,
    overwrite_replaces_pending_and_never_with_an_older_sequence,
    overwrite_supersedes_a_claimed_row_that_goes_back_to_pending,
    expired_messages_are_dead_lettered_never_delivered,
    dlq_lists_replays_and_purges,
    dispatch_delivers_within_the_limit_and_leaves_the_rest_to_the_relay,
    dispatch_sees_pending_rows_after_restart_and_replay,
    dead_relays_claims_reappear_after_the_lease,
    restart_keeps_delivery_count_and_send_at,
    aimd_limit_follows_a_receiver_whose_capacity_steps_down_then_up,
    retry_budget_defers_retries_beyond_the_budget,
    stats_report_depth_and_oldest_age_per_partition,
    compaction_deletes_only_acked_rows_past_retention,
    a_delayed_low_id_message_is_not_starved_by_full_batches,
    fifo_holds_under_backoff_while_batches_stay_full,
    dispatch_gives_up_at_the_callers_deadline,
    reminders_arrive_when_due_named_ones_replace_and_cancelled_ones_never,
    pending_reminders_are_listed_soonest_first_until_they_are_moved,
    reminders_past_the_cap_are_refused_but_a_pending_name_can_be_rearmed,
    reminders_armed_before_a_restart_arrive_after_it,
);

/// The SQLite store keeps claims in its process, so a second opener (another host on the same
/// app folder) is refused with a typed error instead of double-delivering; once the owner is
/// gone the file opens again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_owner_of_the_sqlite_file_is_refused() {
    let store = Store::sqlite();
    let StoreKind::Sqlite(dir) = &store.kind else {
        unreachable!()
    };
    let path = dir.path().join("outbox.db");
    let config = common::fast_config().build().unwrap();
    let first = store.open(config.clone()).await;
    first
        .store(sluice_outbox::NewMessage::new("W/1", "job", b"x".to_vec()))
        .await
        .unwrap();
    let Err(err) = sluice_outbox::Outbox::open_sqlite(&path, config.clone()).await else {
        panic!("a second open is refused")
    };
    assert!(
        matches!(err, sluice_outbox::Error::InUse(_)),
        "typed InUse, got {err}"
    );
    assert!(err.to_string().contains("Postgres"), "{err}");
    drop(first);
    let again = store.open(config).await;
    let depth: u64 = again.stats().await.unwrap().iter().map(|p| p.depth).sum();
    assert_eq!(depth, 1, "the stored message is still there");
}
