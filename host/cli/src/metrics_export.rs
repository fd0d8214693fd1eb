//! One metrics recorder per process, installed on first use: the runtime's metrics go both to
//! a Prometheus recorder (`/metrics`) and to the console's in-memory recorder (`/ui`), through
//! a fanout. Every metric family gets its HELP text here, once.
//!
//! Histograms are recorded once, into the console's fixed log-scale buckets (one atomic add
//! per sample, plus one for the sum), and `/metrics` renders them from there as Prometheus
//! histograms with power-of-two `le` bounds. The Prometheus recorder never sees them: its
//! histograms read the clock and queue every sample until upkeep, which cost a turn ~100 ns
//! (BENCHMARKS.md), and rendered summaries, which cannot be aggregated across hosts.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use metrics_util::layers::FanoutBuilder;
use parking_lot::Mutex;

use crate::console::ConsoleRecorder;
use crate::console::recorder::{HistogramTotals, LogHistogram};

/// The `le` bounds of every histogram on `/metrics`: `2^exp` seconds for these exponents,
/// about 1 µs to 64 s, then `+Inf`. They are edges of the console's buckets, so each count is
/// exact.
const LE_EXPONENTS: std::ops::RangeInclusive<i32> = -20..=6;

/// HELP texts of histogram families, by name (the Prometheus recorder keeps the others').
type HistogramHelp = Arc<Mutex<BTreeMap<String, String>>>;

/// The Prometheus recorder minus histograms: their HELP is kept for [`render`], and their
/// samples go only to the console's recorder beside it in the fanout.
struct WithoutHistograms<R> {
    inner: R,
    help: HistogramHelp,
}

impl<R: Recorder> Recorder for WithoutHistograms<R> {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_counter(key, unit, description);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_gauge(key, unit, description);
    }

    fn describe_histogram(&self, key: KeyName, _: Option<Unit>, description: SharedString) {
        self.help
            .lock()
            .insert(key.as_str().to_string(), description.to_string());
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        self.inner.register_counter(key, metadata)
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        self.inner.register_gauge(key, metadata)
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

struct Recorders {
    prometheus: PrometheusHandle,
    console: ConsoleRecorder,
    histogram_help: HistogramHelp,
}

static RECORDERS: OnceLock<Recorders> = OnceLock::new();

fn recorders() -> &'static Recorders {
    RECORDERS.get_or_init(|| {
        let prometheus = PrometheusBuilder::new().build_recorder();
        let handle = prometheus.handle();
        let console = ConsoleRecorder::default();
        let histogram_help = HistogramHelp::default();
        let fanout = FanoutBuilder::default()
            .add_recorder(WithoutHistograms {
                inner: prometheus,
                help: histogram_help.clone(),
            })
            .add_recorder(console.clone())
            .build();
        metrics::set_global_recorder(fanout)
            .expect("a metrics recorder was already installed by something else");
        // No upkeep thread: it only drains the Prometheus recorder's histogram samples, and
        // that recorder keeps no histograms.
        describe();
        Recorders {
            prometheus: handle,
            console,
            histogram_help,
        }
    })
}

/// The text `/metrics` serves: the Prometheus recorder's families, then the histograms.
pub fn render() -> String {
    let r = recorders();
    let mut text = r.prometheus.render();
    render_histograms(&r.console.histograms(), &r.histogram_help.lock(), &mut text);
    text
}

/// Appends `histograms` in the Prometheus text format, one family per name, with its HELP
/// when `help` has one.
fn render_histograms(
    histograms: &[HistogramTotals],
    help: &BTreeMap<String, String>,
    out: &mut String,
) {
    let mut families: BTreeMap<&str, Vec<&HistogramTotals>> = BTreeMap::new();
    for h in histograms {
        families.entry(h.series.name.as_str()).or_default().push(h);
    }
    for (name, mut series) in families {
        series.sort_by(|a, b| a.series.labels.cmp(&b.series.labels));
        if let Some(text) = help.get(name) {
            let text = text.replace('\\', "\\\\").replace('\n', "\\n");
            let _ = writeln!(out, "# HELP {name} {text}");
        }
        let _ = writeln!(out, "# TYPE {name} histogram");
        for HistogramTotals {
            series: s,
            counts,
            sum,
        } in series
        {
            let labels: String = s
                .labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\",", escape_label(v)))
                .collect();
            let mut below = 0u64;
            let mut from = 0;
            for exp in LE_EXPONENTS {
                let to = LogHistogram::octave_start(exp);
                below += counts[from..to].iter().sum::<u64>();
                from = to;
                let _ = writeln!(
                    out,
                    "{name}_bucket{{{labels}le=\"{}\"}} {below}",
                    2f64.powi(exp)
                );
            }
            // One reading of the buckets: the total agrees with every bound above.
            let count: u64 = counts.iter().sum();
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {count}");
            let bare = match labels.trim_end_matches(',') {
                "" => String::new(),
                l => format!("{{{l}}}"),
            };
            let _ = writeln!(out, "{name}_sum{bare} {sum}");
            let _ = writeln!(out, "{name}_count{bare} {count}");
        }
    }
}

/// A label value as the text format wants it: backslash, quote and newline escaped.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
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

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str, series: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
            .parse()
            .unwrap()
    }

    #[test]
    fn histograms_render_as_prometheus_histograms_with_exact_power_of_two_bounds() {
        let console = ConsoleRecorder::default();
        metrics::with_local_recorder(&console, || {
            let h = metrics::histogram!("sluice_turn_seconds", "actor_type" => "Echo");
            // Below the lowest bound, two at 3 ms, one at 1.5 s, one past the highest bound.
            for v in [5e-7, 0.003, 0.003, 1.5, 100.0] {
                h.record(v);
            }
            metrics::histogram!("sluice_turn_seconds", "actor_type" => "a\"b\\c").record(0.25);
            let _ = metrics::histogram!("sluice_queue_seconds", "actor_type" => "Echo");
        });
        let help = BTreeMap::from([(
            "sluice_turn_seconds".to_string(),
            "Turn time.\nIn seconds.".to_string(),
        )]);
        let mut text = String::new();
        render_histograms(&console.histograms(), &help, &mut text);

        assert!(text.contains("# HELP sluice_turn_seconds Turn time.\\nIn seconds.\n"));
        assert!(text.contains("# TYPE sluice_turn_seconds histogram\n"));
        // A family with no samples yet is still a (zero) histogram, without HELP.
        assert!(text.contains("# TYPE sluice_queue_seconds histogram\n"));
        assert!(!text.contains("# HELP sluice_queue_seconds"));
        assert_eq!(
            value(&text, "sluice_queue_seconds_count{actor_type=\"Echo\"}"),
            0.0
        );

        let echo = |le: &str| {
            value(
                &text,
                &format!("sluice_turn_seconds_bucket{{actor_type=\"Echo\",le=\"{le}\"}}"),
            )
        };
        assert_eq!(echo("0.00000095367431640625"), 1.0); // 2^-20
        assert_eq!(echo("0.001953125"), 1.0); // 2^-9: 3 ms is above it
        assert_eq!(echo("0.00390625"), 3.0); // 2^-8
        assert_eq!(echo("1"), 3.0);
        assert_eq!(echo("2"), 4.0);
        assert_eq!(echo("64"), 4.0);
        assert_eq!(echo("+Inf"), 5.0);
        assert_eq!(
            value(&text, "sluice_turn_seconds_count{actor_type=\"Echo\"}"),
            5.0
        );
        let sum = value(&text, "sluice_turn_seconds_sum{actor_type=\"Echo\"}");
        assert!((sum - 101.5060005).abs() < 1e-6, "{sum}");

        // Bounds rise, counts never fall, and each series has all 27 bounds and +Inf.
        let bounds: Vec<(f64, f64)> = text
            .lines()
            .filter(|l| l.starts_with("sluice_turn_seconds_bucket{actor_type=\"Echo\""))
            .map(|l| {
                let le = l.split("le=\"").nth(1).unwrap().split('"').next().unwrap();
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap()
                };
                (le, l.rsplit(' ').next().unwrap().parse().unwrap())
            })
            .collect();
        assert_eq!(bounds.len(), 28);
        assert!(
            bounds
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1)
        );

        // Label values are escaped.
        assert_eq!(
            value(
                &text,
                "sluice_turn_seconds_count{actor_type=\"a\\\"b\\\\c\"}"
            ),
            1.0
        );
    }
}
