//! The relay sizes its own batches: under a 100 000-message backlog the claim batch grows to
//! the cap, and once the partition is idle it comes back to the minimum. Read where an
//! operator reads it, the `sluice_outbox_relay_batch_size{partition}` gauge, through a
//! recorder installed for this test binary alone. On real time: the gauge is sampled while
//! the relay is busy, which paused time would not let happen until the backlog was gone.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use common::Store;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use sluice_outbox::{Delivery, DeliveryError, Envelope, NewMessage, OutboxConfig};

const BACKLOG: usize = 100_000;
const CAP: u32 = 1000;
const T: Duration = Duration::from_secs(600);

static SNAPSHOTTER: LazyLock<Snapshotter> = LazyLock::new(|| {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this binary");
    snapshotter
});

/// The tests share the gauges (labelled by partition only): one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Takes every message at once, as the runtime's cast delivery does (a non-blocking tell), so
/// the limiter never runs out of permits and a backlog can use whole batches.
#[derive(Default)]
struct Sink(AtomicUsize);

#[async_trait]
impl Delivery for Sink {
    async fn deliver(&self, _envelope: Envelope) -> Result<(), DeliveryError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// The batch-size gauge of partition 0.
fn batch_size() -> Option<f64> {
    SNAPSHOTTER
        .snapshot()
        .into_vec()
        .into_iter()
        .find_map(|(key, _, _, value)| {
            let key = key.key();
            let ours = key.name() == "sluice_outbox_relay_batch_size"
                && key
                    .labels()
                    .any(|l| l.key() == "partition" && l.value() == "0");
            match value {
                DebugValue::Gauge(v) if ours => Some(v.into_inner()),
                _ => None,
            }
        })
}

async fn grows_under_backlog_and_shrinks_when_idle(store: Store) {
    LazyLock::force(&SNAPSHOTTER);
    let _serial = ONE_AT_A_TIME.lock().await;
    let config = OutboxConfig::builder()
        .partitions(1)
        .relay_batch_size(CAP)
        .build()
        .unwrap();
    let outbox = store.open(config).await;
    let msgs: Vec<NewMessage> = (0..BACKLOG)
        .map(|i| NewMessage::new(format!("W/{}", i % 1000), "job", vec![b'x'; 16]))
        .collect();
    for chunk in msgs.chunks(5000) {
        outbox.enqueue(chunk.to_vec()).await.unwrap();
    }
    let sink = Arc::new(Sink::default());
    let relay = outbox.start_relay(sink.clone());
    let delivered = || sink.0.load(Ordering::Relaxed);
    common::eventually("the batch at the cap under the backlog", T, || async {
        batch_size() == Some(f64::from(CAP))
    })
    .await;
    assert!(
        delivered() < BACKLOG,
        "the batch reached the cap while the backlog lasted"
    );
    common::eventually("the backlog drained", T, || async {
        delivered() >= BACKLOG
    })
    .await;
    common::eventually("the batch back to the minimum when idle", T, || async {
        batch_size() == Some(16.0)
    })
    .await;
    relay.shutdown().await;
    assert_eq!(delivered(), BACKLOG, "each delivered once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_relay_batch_grows_under_backlog_and_shrinks_when_idle() {
    grows_under_backlog_and_shrinks_when_idle(Store::sqlite()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_relay_batch_grows_under_backlog_and_shrinks_when_idle() {
    grows_under_backlog_and_shrinks_when_idle(Store::postgres().await).await
}
