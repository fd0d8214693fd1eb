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
pub const BUDGET_BYTES_IN_USE: &str = "sluice_bus_budget_bytes_in_use";
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
