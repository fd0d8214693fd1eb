//! The cluster's metrics (the `metrics` facade, names `sluice_cluster_*`).
//!
//! Labels are bounded: `member` is a node id of this cluster (as many values as hosts), `code`
//! an error code, `kind`/`op`/`outcome`/`event` fixed words chosen in code. Never an actor id,
//! a key or a principal.

use std::time::Duration;

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};

/// Connection events by kind. Labels: `event`.
pub const CONNECTION_EVENTS: &str = "sluice_cluster_connection_events_total";
/// Remote tells/asks sent. Labels: `kind` (tell, ask), `member` (the receiving host).
pub const REMOTE_SENT: &str = "sluice_cluster_remote_calls_sent_total";
/// Remote tells/asks received and handed to the handler. Labels: `kind`.
pub const REMOTE_RECEIVED: &str = "sluice_cluster_remote_calls_received_total";
/// Remote tells/asks that came back as an error. Labels: `kind`, `code`, `member`.
pub const REMOTE_FAILED: &str = "sluice_cluster_remote_calls_failed_total";
/// Seconds from sending a remote call to its reply. Labels: `kind`, `member`.
pub const REMOTE_SECONDS: &str = "sluice_cluster_remote_call_seconds";
/// Frames refused by the decoder. Labels: `frame` (request, reply, event).
pub const DECODE_ERRORS: &str = "sluice_cluster_decode_errors_total";
/// Directory operations. Labels: `op` (claim, release, takeover, lookup), `outcome`.
pub const DIRECTORY_OPS: &str = "sluice_cluster_directory_operations_total";
/// Live members in this host's view (itself included).
pub const MEMBERS: &str = "sluice_cluster_members";
/// Member changes seen. Labels: `change` (joined, updated, left).
pub const MEMBER_CHANGES: &str = "sluice_cluster_member_changes_total";
/// Heartbeats written. Labels: `outcome` (ok, failed, fenced, rejoined).
pub const HEARTBEATS: &str = "sluice_cluster_heartbeats_total";
/// Outbox relay partitions this host owns (set by the shared-outbox wiring).
pub const PARTITIONS_OWNED: &str = "sluice_cluster_partitions_owned";
/// Module distribution operations. Labels: `op` (put, get, announce, report), `outcome`.
pub const MODULE_OPS: &str = "sluice_cluster_module_operations_total";
/// Bus events published to / received from NATS. Labels: `direction` (out, in).
pub const BUS_EVENTS: &str = "sluice_cluster_bus_events_total";

/// Registers the HELP text of every cluster metric with the installed recorder, so a
/// member's `/metrics` documents itself (`promtool check metrics` wants a HELP line per
/// family). The CLI calls it once at start, beside the runtime's and the outbox's.
pub fn describe() {
    describe_counter!(
        CONNECTION_EVENTS,
        "Events of this host's NATS connection, by event (connected, disconnected, lame_duck, slow_consumer, server_error, client_error, closed, ...)."
    );
    describe_counter!(
        REMOTE_SENT,
        "Tells and asks this host sent to an actor on another member, by kind (tell, ask) and receiving member."
    );
    describe_counter!(
        REMOTE_RECEIVED,
        "Tells and asks other members sent to actors on this host and handed to its runtime, by kind."
    );
    describe_counter!(
        REMOTE_FAILED,
        "Remote tells and asks that came back as an error, by kind, error code and receiving member."
    );
    describe_histogram!(
        REMOTE_SECONDS,
        "Time from sending a remote tell or ask to its reply, in seconds, by kind and receiving member."
    );
    describe_counter!(
        DECODE_ERRORS,
        "Frames and records refused by the decoder, by frame (request, reply, event, member, directory)."
    );
    describe_counter!(
        DIRECTORY_OPS,
        "Actor directory operations, by op (claim, release, takeover, lookup) and outcome."
    );
    describe_gauge!(
        MEMBERS,
        "Live members in this host's view of the cluster, itself included."
    );
    describe_counter!(
        MEMBER_CHANGES,
        "Membership changes this host saw, by change (joined, updated, left)."
    );
    describe_counter!(
        HEARTBEATS,
        "Heartbeats this host wrote, by outcome (ok, failed, fenced, rejoined)."
    );
    describe_gauge!(
        PARTITIONS_OWNED,
        "Outbox relay partitions this host owns in the shared outbox."
    );
    describe_counter!(
        MODULE_OPS,
        "Module distribution operations, by op (put, get, announce, report) and outcome."
    );
    describe_counter!(
        BUS_EVENTS,
        "Bus events published to or received from NATS, by direction (out, in)."
    );
}

pub(crate) fn connection_event(event: &'static str) {
    counter!(CONNECTION_EVENTS, "event" => event).increment(1);
}

/// `n` calls of one kind sent to `member` (counted once per frame, not per call: the label's
/// lookup is the costly part).
pub(crate) fn remote_sent(kind: &'static str, member: &str, n: u64) {
    counter!(REMOTE_SENT, "kind" => kind, "member" => member.to_string()).increment(n);
}

pub(crate) fn remote_received(kind: &'static str, n: u64) {
    counter!(REMOTE_RECEIVED, "kind" => kind).increment(n);
}

pub(crate) fn remote_failed(kind: &'static str, code: &'static str, member: &str) {
    counter!(REMOTE_FAILED, "kind" => kind, "code" => code, "member" => member.to_string())
        .increment(1);
}

/// `n` calls of one kind answered in one reply after `elapsed`.
pub(crate) fn remote_seconds(kind: &'static str, member: &str, elapsed: Duration, n: usize) {
    histogram!(REMOTE_SECONDS, "kind" => kind, "member" => member.to_string())
        .record_many(elapsed.as_secs_f64(), n);
}

pub(crate) fn decode_error(frame: &'static str) {
    counter!(DECODE_ERRORS, "frame" => frame).increment(1);
}

pub(crate) fn directory_op(op: &'static str, outcome: &'static str) {
    counter!(DIRECTORY_OPS, "op" => op, "outcome" => outcome).increment(1);
}

pub(crate) fn members(n: usize) {
    gauge!(MEMBERS).set(n as f64);
}

pub(crate) fn member_change(change: &'static str) {
    counter!(MEMBER_CHANGES, "change" => change).increment(1);
}

pub(crate) fn heartbeat(outcome: &'static str) {
    counter!(HEARTBEATS, "outcome" => outcome).increment(1);
}

/// Sets the partitions-owned gauge (for the shared-outbox wiring).
pub fn partitions_owned(n: u32) {
    gauge!(PARTITIONS_OWNED).set(f64::from(n));
}

pub(crate) fn module_op(op: &'static str, outcome: &'static str) {
    counter!(MODULE_OPS, "op" => op, "outcome" => outcome).increment(1);
}

pub(crate) fn bus_event(direction: &'static str) {
    counter!(BUS_EVENTS, "direction" => direction).increment(1);
}
