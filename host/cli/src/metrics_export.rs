//! One metrics recorder per process, installed on first use: the runtime's metrics go both to
//! a Prometheus recorder (`/metrics`) and to the console's in-memory recorder (`/ui`), through
//! a fanout. Every metric family gets its HELP text here, once.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use metrics_util::layers::FanoutBuilder;

use crate::console::ConsoleRecorder;

/// How often the Prometheus recorder drains its histogram samples into summaries, so memory
/// stays bounded when nobody scrapes `/metrics`.
pub const PROMETHEUS_UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

struct Recorders {
    prometheus: PrometheusHandle,
    console: ConsoleRecorder,
}

static RECORDERS: OnceLock<Recorders> = OnceLock::new();

fn recorders() -> &'static Recorders {
    RECORDERS.get_or_init(|| {
        let prometheus = PrometheusBuilder::new().build_recorder();
        let handle = prometheus.handle();
        let console = ConsoleRecorder::default();
        let fanout = FanoutBuilder::default()
            .add_recorder(prometheus)
            .add_recorder(console.clone())
            .build();
        metrics::set_global_recorder(fanout)
            .expect("a metrics recorder was already installed by something else");
        describe();
        let upkeep = handle.clone();
        std::thread::Builder::new()
            .name("sluice-metrics-upkeep".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(PROMETHEUS_UPKEEP_INTERVAL);
                    upkeep.run_upkeep();
                }
            })
            .expect("spawning the metrics upkeep thread");
        Recorders {
            prometheus: handle,
            console,
        }
    })
}

/// The process's Prometheus handle; installs the recorders the first time.
pub fn handle() -> &'static PrometheusHandle {
    &recorders().prometheus
}

/// The process's console recorder; installs the recorders the first time.
pub fn console_recorder() -> &'static ConsoleRecorder {
    &recorders().console
}

/// HELP text of every metric family: the runtime's, the outbox's, the bus's, the cluster's and
/// the gauges the CLI sets itself.
fn describe() {
    sluice_runtime::metrics_help::describe();
    sluice_runtime::outbox::metrics_help::describe();
    sluice_runtime::bus::metrics::describe();
    // A `--cluster` member's families (recorded only in a cluster; HELP alone adds no family).
    sluice_cluster::metrics::describe();
    metrics::describe_gauge!(
        "sluice_mailbox_depth",
        "Messages queued in the mailboxes of an actor_type, read at scrape time."
    );
    metrics::describe_gauge!(
        "sluice_mailbox_oldest_age_seconds",
        "Age of the oldest message queued in any mailbox of an actor_type, in seconds (0 when none), read at scrape time."
    );
    metrics::describe_gauge!(
        "sluice_outbox_limiter_min_limit",
        "The floor of every outbox AIMD limiter ([outbox.concurrency] min_limit), for alerts on a limit stuck at its minimum."
    );
    metrics::describe_gauge!(
        "sluice_outbox_limiter_max_limit",
        "The ceiling of every outbox AIMD limiter ([outbox.concurrency] max_limit)."
    );
}

/// Exports the outbox limiters' configured floor and ceiling (constant while the host runs).
pub fn export_outbox_config(host: &sluice_runtime::Host) {
    if let Some(ob) = host.outbox() {
        let c = ob.config().concurrency;
        metrics::gauge!("sluice_outbox_limiter_min_limit").set(f64::from(c.min_limit));
        metrics::gauge!("sluice_outbox_limiter_max_limit").set(f64::from(c.max_limit));
    }
}
