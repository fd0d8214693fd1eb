//! Idle deactivation: an actor idle for `idle_deactivate_ms` gives its pool slot back and the
//! next message activates it afresh; messages that race a deactivation are never lost.

use std::time::Duration;

use serde_json::json;
use sluice_runtime::{ChildSpec, HostConfig, MailboxStrategy};
use sluice_tests::{
    active, host_with, install_metrics, json, metric, recorded_by, test_config, wait_for,
    wait_until,
};

const T: Duration = Duration::from_secs(30);

fn deactivations(ty: &str) -> f64 {
    metric("sluice_actor_deactivations_total", &[("actor_type", ty)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_actor_is_deactivated_and_the_next_message_activates_it_afresh() {
    install_metrics();
    let cfg = HostConfig {
        idle_deactivate_ms: 100,
        ..test_config()
    };
    let host = host_with(cfg, vec![(ChildSpec::new("IdleEcho", "echo.wasm"), "echo")]).await;
    let r = host.ask("IdleEcho/a", "record", "x", T).await.unwrap();
    assert_eq!(json(&r), json!({"count": 1}));
    assert_eq!(active(&host, "IdleEcho"), 1);
    wait_until(T, "IdleEcho/a deactivated", || {
        active(&host, "IdleEcho") == 0
    })
    .await;
    wait_until(T, "the deactivation counted", || {
        deactivations("IdleEcho") == 1.0
    })
    .await;
    // A new instance: `init` ran again and the old state is gone.
    assert!(recorded_by(&host, "IdleEcho/a").await.is_empty());
    // Slots come back: 40 actors activated, all deactivated, none left holding memory.
    for i in 0..40 {
        host.ask(&format!("IdleEcho/k{i}"), "echo", "", T)
            .await
            .unwrap();
    }
    wait_until(T, "every IdleEcho deactivated", || {
        active(&host, "IdleEcho") == 0
    })
    .await;
    // IdleEcho/a (twice: the `recorded` ask re-activated it) and the 40.
    wait_until(T, "the deactivations counted", || {
        deactivations("IdleEcho") == 42.0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_racing_a_deactivation_are_never_lost_or_reordered() {
    install_metrics();
    let cfg = HostConfig {
        idle_deactivate_ms: 2,
        ..test_config()
    };
    // `Hop/k` deactivates whenever it is idle for 2 ms; each of its turns forwards one item
    // to `Sink/0`, an eager instance that is never deactivated and so keeps the record.
    let host = host_with(
        cfg,
        vec![
            (ChildSpec::new("Hop", "echo.wasm"), "echo"),
            (
                ChildSpec::new("Sink", "echo.wasm")
                    .count(1)
                    .mailbox(10_000, MailboxStrategy::Error),
                "echo",
            ),
        ],
    )
    .await;
    let n = 400;
    for i in 0..n {
        let req = json!({"to": "Sink/0", "msg_type": "record", "payload": i.to_string()});
        host.tell("Hop/k", "tell", req.to_string()).await.unwrap();
        // Gaps of 0–4 ms around the 2 ms idle timeout, so tells land before, during and
        // after deactivations.
        let gap = (i * 7) % 5;
        if gap > 0 {
            tokio::time::sleep(Duration::from_millis(gap)).await;
        }
    }
    let what = format!("Sink/0 to record all {n} items");
    let items = wait_for(T, &what, || async {
        let items = recorded_by(&host, "Sink/0").await;
        if items.len() >= n as usize {
            Ok(items)
        } else {
            Err(format!("{} items recorded", items.len()))
        }
    })
    .await;
    assert_eq!(items, (0..n).map(|i| i.to_string()).collect::<Vec<_>>());
    // The race was really run: Hop/k went through many activations.
    assert!(deactivations("Hop") >= 20.0, "{}", deactivations("Hop"));
    assert_eq!(deactivations("Sink"), 0.0);
}
