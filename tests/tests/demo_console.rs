//! The demo's live console (`job-queue-outbox --console ADDR`, turned on by scripts/demo.sh):
//! one listener that serves the admin API and `/ui` of whichever scenario host started last.
//! Its own test binary: serving the console installs the process's metrics recorder.

use std::time::Duration;

use job_queue_outbox as jq;
use serde_json::Value;
use sluice_tests::wait_for;

async fn get(url: &str) -> (u16, String) {
    let r = reqwest::get(url)
        .await
        .expect("the console listener answers");
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Polls `url` until its JSON satisfies `ok`, for at most 20 s.
async fn wait_json(url: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let ok = &ok;
    let what = format!("{url} to answer as expected");
    wait_for(Duration::from_secs(20), &what, || async move {
        let (status, body) = get(url).await;
        if status == 200 {
            let v: Value = serde_json::from_str(&body).unwrap();
            if ok(&v) {
                return Ok(v);
            }
        }
        Err(format!("{status} {body}"))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_follows_the_host_of_the_scenario_that_is_running() {
    let work = tempfile::tempdir().unwrap();
    let addr = jq::serve_console("127.0.0.1:0").await.unwrap();
    let base = format!("http://{addr}");

    // Before any scenario host: a plain answer, not a hang or a reset.
    let (status, body) = get(&format!("{base}/ui")).await;
    assert_eq!(status, 503, "{body}");

    let mut hosts = Vec::new();
    for scenario in ["thundering_herd", "poison_message"] {
        let dir = work.path().join("rust").join(scenario);
        let app = tokio::task::block_in_place(|| jq::prepare_app(jq::Lang::Rust, &dir)).unwrap();
        let host = jq::start_host(&app).await.unwrap();
        host.ask(jq::LEADER, "stats", "{}", Duration::from_secs(10))
            .await
            .ok();
        let (status, page) = get(&format!("{base}/ui")).await;
        assert_eq!(status, 200);
        assert!(
            page.contains("<html") || page.contains("<!doctype"),
            "{page}"
        );
        // The admin API and the console's frames are the newest host's.
        let want = format!("rust/{scenario}");
        wait_json(&format!("{base}/admin/status"), |v| {
            v["app"] == want.as_str()
        })
        .await;
        wait_json(&format!("{base}/ui/api/frames"), |v| {
            v.to_string().contains("JobQueueLeader")
        })
        .await;
        hosts.push(host);
    }
    for h in hosts {
        h.stop().await;
    }
}
