//! Metric names (all `sluice_`-prefixed) and their label sets.
//!
//! Labels are bounded by construction: `kind` and `subscriber` are
//! `&'static str` chosen in code, `class` is a [`PrincipalClass`](crate::PrincipalClass),
//! `reason` is one of a few constants. Principal and actor ids never appear.

/// Counter `{kind}`: events accepted by [`EventBus::publish`](crate::EventBus::publish).
pub const EVENTS_PUBLISHED_TOTAL: &str = "sluice_bus_events_published_total";
/// Counter `{subscriber}`: broadcast events a lagging receiver skipped.
pub const RECEIVER_LAGGED_TOTAL: &str = "sluice_bus_receiver_lagged_total";
/// Gauge `{subscriber}`: principals with queued messages, summed over routes.
pub const ACTIVE_PRINCIPALS: &str = "sluice_bus_active_principals";
/// Gauge `{subscriber}`: bytes held by routed queues, summed over routes.
pub const BUDGET_IN_USE_BYTES: &str = "sluice_bus_budget_in_use_bytes";
/// Counter `{subscriber, class}`: routed messages evicted (budget or per-principal cap).
pub const BYTE_EVICTIONS_TOTAL: &str = "sluice_bus_byte_evictions_total";
/// Counter `{subscriber, class}`: DRR turns that ended with nothing sent.
pub const QUANTUM_STARVED_TOTAL: &str = "sluice_bus_quantum_starved_total";
/// Counter `{subscriber, class}`: routed pushes refused (oversize, or budget pinned by control messages).
pub const ROUTE_REFUSED_TOTAL: &str = "sluice_bus_route_refused_total";
/// Counter `{class, reason}`: IPC rate-limiter refusals (`quota`, `exceeds_quota`, `too_large`).
pub const RATE_LIMITED_TOTAL: &str = "sluice_ipc_rate_limited_total";
/// Gauge: live dispatcher queues (consumer tasks).
pub const DISPATCHER_QUEUES: &str = "sluice_bus_dispatcher_queues";
/// Counter `{reason}`: events the dispatcher refused (`full`).
pub const DISPATCH_DROPPED_TOTAL: &str = "sluice_bus_dispatch_dropped_total";
/// Counter: principals folded into the shared `system` slot by the per-actor-type cap.
pub const DISPATCHER_OVERFLOW_TOTAL: &str = "sluice_bus_dispatcher_overflow_total";

/// Registers HELP text for every bus metric with the installed recorder (the embedding
/// binary calls it once, before serving `/metrics`).
pub fn describe() {
    use metrics::{describe_counter, describe_gauge};
    describe_counter!(
        EVENTS_PUBLISHED_TOTAL,
        "Events accepted by the bus, by kind."
    );
    describe_counter!(
        RECEIVER_LAGGED_TOTAL,
        "Broadcast events a lagging receiver skipped, by subscriber."
    );
    describe_gauge!(
        ACTIVE_PRINCIPALS,
        "Principals with queued events in routed subscriptions, by subscriber (summed over its routes)."
    );
    describe_gauge!(
        BUDGET_IN_USE_BYTES,
        "Bytes of event payload held by routed subscription queues against their budget, by subscriber."
    );
    describe_counter!(
        BYTE_EVICTIONS_TOTAL,
        "Routed events evicted to stay within the byte budget or the per-principal cap, by subscriber and principal class."
    );
    describe_counter!(
        QUANTUM_STARVED_TOTAL,
        "Deficit round-robin turns that ended with nothing sent, by subscriber and principal class."
    );
    describe_counter!(
        ROUTE_REFUSED_TOTAL,
        "Routed events refused (larger than the budget, or the budget pinned by control events), by subscriber and principal class."
    );
    describe_counter!(
        RATE_LIMITED_TOTAL,
        "IPC refused by the rate limiter, by principal class and reason (quota, exceeds_quota, too_large)."
    );
    describe_gauge!(
        DISPATCHER_QUEUES,
        "Live dispatcher queues (one consumer task per actor type and principal)."
    );
    describe_counter!(
        DISPATCH_DROPPED_TOTAL,
        "Events the dispatcher refused, by reason (full: the principal's queue was full)."
    );
    describe_counter!(
        DISPATCHER_OVERFLOW_TOTAL,
        "Principals folded into the shared system queue by the per-actor-type cap on dispatcher queues."
    );
}
