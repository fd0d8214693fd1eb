//! Trace export: an OpenTelemetry layer in the `tracing` subscriber and an OTLP exporter
//! (HTTP, protobuf, the async reqwest client on a tokio-driven batch processor), set up only
//! when an endpoint is given — `sluice run --otlp-endpoint URL` or the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`. Without one nothing
//! is installed and the runtime creates no spans per message.

use std::time::{Duration, Instant};

use anyhow::Context;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkError;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The standard variables that turn export on when no flag is given.
const ENDPOINT_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// Where traces go: the flag's base URL (`/v1/traces` is appended, as for
/// `OTEL_EXPORTER_OTLP_ENDPOINT`), or `FromEnv` when only the standard variables are set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `--otlp-endpoint`: the collector's base URL, e.g. `http://127.0.0.1:4318`.
    Url(String),
    /// One of the standard `OTEL_EXPORTER_OTLP_*ENDPOINT` variables; the exporter reads it.
    FromEnv,
}

impl Endpoint {
    /// The flag if given, else the environment, else `None` (no export).
    pub fn resolve(flag: Option<&str>) -> Option<Self> {
        if let Some(url) = flag.filter(|u| !u.trim().is_empty()) {
            return Some(Endpoint::Url(url.trim().to_string()));
        }
        ENDPOINT_VARS
            .iter()
            .any(|v| std::env::var(v).is_ok_and(|s| !s.trim().is_empty()))
            .then_some(Endpoint::FromEnv)
    }
}

/// Flushes and shuts the exporter down when dropped (spans still batched are sent).
pub struct Guard(SdkTracerProvider);

/// How long closing waits for a full span queue to take its flush.
const CLOSE_BOUND: Duration = Duration::from_secs(5);

impl Guard {
    /// Sends what is queued, then shuts the exporter down. The batch processor queues its
    /// flush and shutdown requests behind the spans, and refuses them while that queue is full
    /// (spans came faster than they were exported): shutting down at once then failed and
    /// lost every queued span. So a refused flush is asked again (`refused` runs after each
    /// refusal) until one is taken, which drains the queue, at most `bound`. A flush that
    /// fails for another reason (the collector is down) is not waited on.
    fn close(&self, bound: Duration, mut refused: impl FnMut()) -> Result<(), String> {
        let deadline = Instant::now() + bound;
        loop {
            match self.0.force_flush() {
                // The provider lists its processors' errors in one message.
                Err(OTelSdkError::InternalFailure(e))
                    if e.contains("Failed to send flush message") =>
                {
                    if Instant::now() >= deadline {
                        return Err(format!("the span queue stayed full for {bound:?}: {e}"));
                    }
                    refused();
                    std::thread::sleep(Duration::from_millis(5));
                }
                _ => break,
            }
        }
        self.0.shutdown().map_err(|e| e.to_string())
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Closing blocks until the batch processor, a task on the tokio runtime, answers. On
        // one of a multi-thread runtime's workers that task can be waiting in this worker's own
        // LIFO slot, which no other worker takes from: the close never ended (a bench that
        // dropped its guard in a task hung there). `block_in_place` hands this worker's tasks
        // to another thread first; off the workers (the CLI drops it at the end of `main`) it
        // runs the close as it is.
        let close = || self.close(CLOSE_BOUND, || {});
        let closed = match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(close)
            }
            _ => close(),
        };
        if let Err(e) = closed {
            eprintln!("sluice: trace exporter shutdown: {e}");
        }
    }
}

/// The log on stderr.
fn stderr_log<S>() -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal, never into a log file or a pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
}

/// The log filter every `sluice` command uses: `RUST_LOG`, else `info`.
fn log_filter() -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into())
}

/// Keeps the two per-layer filters above honest: every callsite's interest becomes
/// "sometimes", so the subscriber asks the filters again before each span and event.
///
/// A per-layer filter hands its verdict to its layer through a per-thread bitmap written by
/// `enabled` and read by the span or event that follows. A callsite whose interest is cached
/// as "always" skips `enabled`, so its span reads whatever the last `enabled` call on that
/// thread left, and a `log_enabled!` that reaches tracing through `tracing-log` (sqlx asks it
/// after every query) leaves "disabled" behind. With `RUST_LOG=info,sluice::activations=debug`
/// a clustered host then exported no ingress span and printed almost no activation lines
/// (tracing#2519; the upstream fix proposed in tracing#3572 caps the interest the same way).
/// The cost, one filter check per span and event, is paid only with an endpoint set.
struct FreshFilterState;

impl<S: tracing::Subscriber> Layer<S> for FreshFilterState {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }

    /// Adds no level of its own: the filters' widest level stays the global bound.
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::OFF)
    }
}

/// Installs the global subscriber: the stderr log, plus — when `endpoint` is set — the
/// OpenTelemetry layer exporting sluice's spans (ingress, turn, dispatch, relay attempt) and
/// the events inside them (a guest's `host.log` lines) over OTLP. Must run inside a tokio
/// runtime (the batch processor is a tokio task).
pub fn init(endpoint: Option<Endpoint>) -> anyhow::Result<Option<Guard>> {
    let Some(endpoint) = endpoint else {
        // The log alone: its filter is the subscriber's. (As a per-layer filter here, the
        // debug events of `RUST_LOG=…,sluice::activations=debug` went missing in clustered
        // hosts: most `activated` lines never printed.)
        tracing_subscriber::registry()
            .with(log_filter())
            .with(stderr_log())
            .init();
        return Ok(None);
    };
    let fmt = stderr_log().with_filter(log_filter());
    let mut exporter = SpanExporter::builder().with_http();
    if let Endpoint::Url(base) = &endpoint {
        let base = base.trim_end_matches('/');
        let url = if base.ends_with("/v1/traces") {
            base.to_string()
        } else {
            format!("{base}/v1/traces")
        };
        exporter = exporter.with_endpoint(url);
    }
    let exporter = exporter
        .build()
        .context("building the OTLP span exporter")?;
    let processor =
        BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(Resource::builder().with_service_name("sluice").build())
        .build();
    let tracer = provider.tracer("sluice");
    // Only sluice's own spans and the events in them: not every dependency's debug spans.
    // (A target matches by prefix: `sluice` covers sluice_runtime, sluice::guest, ….)
    let exported = Targets::new().with_target("sluice", tracing::Level::INFO);
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(exported);
    tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .with(FreshFilterState)
        .init();
    sluice_trace::enable();
    Ok(Some(Guard(provider)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use opentelemetry::trace::{Span as _, Tracer as _};
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{BatchConfigBuilder, SpanData, SpanExporter};

    use super::*;

    /// An exporter that holds every export until its gate opens, counting the spans.
    #[derive(Debug, Clone, Default)]
    struct Gated {
        open: Arc<AtomicBool>,
        exported: Arc<AtomicUsize>,
        calls: Arc<AtomicUsize>,
    }

    impl SpanExporter for Gated {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.calls.fetch_add(1, Ordering::SeqCst);
            while !self.open.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            self.exported.fetch_add(batch.len(), Ordering::SeqCst);
            Ok(())
        }
    }

    /// A guard dropped inside a task on a worker, just after a span ended there (which wakes
    /// the processor's task into that worker's LIFO slot), closes instead of waiting forever
    /// for that task. The runtime is built here so that a hung worker fails the test instead
    /// of hanging it.
    #[test]
    fn a_guard_dropped_on_a_runtime_worker_closes() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let gated = Gated::default();
        gated.open.store(true, Ordering::SeqCst);
        let exported = gated.exported.clone();
        let closed = rt.block_on(async move {
            let task = tokio::spawn(async move {
                let processor =
                    BatchSpanProcessor::builder(gated, opentelemetry_sdk::runtime::Tokio).build();
                let provider = SdkTracerProvider::builder()
                    .with_span_processor(processor)
                    .build();
                let tracer = provider.tracer("test");
                let guard = Guard(provider);
                for _ in 0..3 {
                    tracer.start("span").end();
                }
                drop(guard);
            });
            tokio::time::timeout(Duration::from_secs(20), task).await
        });
        rt.shutdown_timeout(Duration::from_millis(100));
        assert!(
            closed.is_ok(),
            "dropping the guard on a worker never returned"
        );
        assert_eq!(
            exported.load(Ordering::SeqCst),
            3,
            "the spans were exported"
        );
    }

    /// The queue is full when the host stops (the exporter is still busy with an earlier
    /// batch): closing waits for the queue to take its flush, then every queued span is
    /// exported and the shutdown succeeds. Shutting down at once, as before, failed with
    /// "channel is full" and exported none of them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn closing_with_a_full_span_queue_exports_what_is_queued() {
        let gated = Gated::default();
        let config = BatchConfigBuilder::default()
            .with_max_queue_size(8)
            .with_max_export_batch_size(4)
            .with_scheduled_delay(Duration::from_secs(3600))
            .build();
        let processor =
            BatchSpanProcessor::builder(gated.clone(), opentelemetry_sdk::runtime::Tokio)
                .with_batch_config(config)
                .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .build();
        let tracer = provider.tracer("test");
        let mut ended = 0;
        // Until the processor is stuck in an export, then enough to fill its queue.
        let deadline = Instant::now() + Duration::from_secs(10);
        while gated.calls.load(Ordering::SeqCst) == 0 {
            assert!(Instant::now() < deadline, "the processor never exported");
            tracer.start("span").end();
            ended += 1;
            tokio::task::yield_now().await;
        }
        for _ in 0..32 {
            tracer.start("span").end();
            ended += 1;
        }
        let guard = Guard(provider);
        let (open, refusals) = (gated.open.clone(), Arc::new(AtomicUsize::new(0)));
        let counted = refusals.clone();
        let closed = tokio::task::spawn_blocking(move || {
            // The first refusal proves the queue was full; the exporter then goes on.
            let r = guard.close(Duration::from_secs(10), || {
                counted.fetch_add(1, Ordering::SeqCst);
                open.store(true, Ordering::SeqCst);
            });
            std::mem::forget(guard); // closed already; its drop would close again
            r
        })
        .await
        .unwrap();
        assert!(
            refusals.load(Ordering::SeqCst) >= 1,
            "the queue was never full"
        );
        assert_eq!(closed, Ok(()));
        // The batch in export plus a full queue: everything that was not dropped at the door.
        let exported = gated.exported.load(Ordering::SeqCst);
        assert!(
            (4 + 8..=ended).contains(&exported),
            "exported {exported} of {ended} spans"
        );
    }
}
