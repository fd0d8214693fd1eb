//! The demo's live console (`job-queue-outbox --console ADDR`, turned on by scripts/demo.sh):
//! one listener that serves the admin API and `/ui` of whichever scenario host started last.
//! Its own test binary: serving the console installs the process's metrics recorder. The
//! console follows one host per process, so the tests here take turns ([`SERIAL`]).

use std::time::Duration;

use job_queue_outbox as jq;
use serde_json::Value;
use sluice_tests::wait_for;

/// One test at a time: every listener of the process shows the newest scenario host.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The console page's DLQ poll interval (`DLQ_POLL_MS` in `host/cli/console/src/app.js`).
const DLQ_POLL: Duration = Duration::from_secs(2);

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
    let _serial = SERIAL.lock().await;
    let work = tempfile::tempdir().unwrap();
    let addr = jq::serve_console("127.0.0.1:0", None).await.unwrap();
    let base = format!("http://{addr}");

    // Before any scenario host (the first test of the binary to serve one): a plain answer,
    // not a hang or a reset.
    let (status, body) = get(&format!("{base}/ui")).await;
    assert!(
        status == 503 || body.contains("<html") || body.contains("<!doctype"),
        "{status} {body}"
    );

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

/// The demo's `poison_message` is watched through the console as a newcomer would: a page
/// polling the DLQ every 2 s sees the dead letter before the driver replays it, and the
/// frames of `config_wave_deploy` show an AIMD limit below its start (10) while the config
/// servers push back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_the_poison_dead_letter_and_the_halved_limit_during_the_run() {
    let _serial = SERIAL.lock().await;
    let work = tempfile::tempdir().unwrap();
    let addr = jq::serve_console("127.0.0.1:0", None).await.unwrap();
    let base = format!("http://{addr}");

    // The page: reads /admin/dlq every DLQ_POLL and remembers whether it saw the poison.
    let stop = std::sync::Arc::new(tokio::sync::Notify::new());
    let page = tokio::spawn({
        let (base, stop) = (base.clone(), stop.clone());
        async move {
            let mut saw = None;
            loop {
                let (status, body) = get(&format!("{base}/admin/dlq")).await;
                if status == 200 && saw.is_none() {
                    let v: Value = serde_json::from_str(&body).unwrap();
                    saw = v["dead_letters"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|d| d["receiver"] == "Worker/poison")
                        .cloned();
                }
                tokio::select! {
                    _ = stop.notified() => return saw,
                    _ = tokio::time::sleep(DLQ_POLL) => {}
                }
            }
        }
    });
    let report = jq::run_scenario(jq::Lang::Rust, "poison_message", work.path())
        .await
        .unwrap();
    stop.notify_one();
    let saw = page.await.unwrap();
    assert_eq!(report["console_read_dlq"], true, "{report}");
    let dead = saw.unwrap_or_else(|| panic!("the page never saw the dead letter: {report}"));
    assert_eq!(dead["attempts"], 5, "{dead}");
    assert_eq!(dead["reason"], "max_attempts", "{dead}");

    let report = jq::run_scenario(jq::Lang::Rust, "config_wave_deploy", work.path())
        .await
        .unwrap();
    // The host has stopped; its frames stay on the console until the next host starts. The
    // sampler's last frame covers the end of the run: wait for one taken after it.
    let frames_after = |n: usize| {
        let base = base.clone();
        async move {
            wait_json(&format!("{base}/ui/api/frames"), |v| {
                v.as_array().is_some_and(|a| a.len() > n)
            })
            .await
        }
    };
    let now = frames_after(0).await.as_array().unwrap().len();
    let frames = frames_after(now).await;
    let lowest = frames
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| {
            f["outbox"]["limiters"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        // A limiter seen only through its in-flight gauge reads 0: the floor is 1.
        .filter_map(|l| l["limit_min"].as_f64().filter(|m| *m >= 1.0))
        .fold(f64::INFINITY, f64::min);
    assert!(
        lowest < 10.0,
        "no frame showed an AIMD limit below its start of 10 (lowest {lowest}); report {report}"
    );
}

/// Like `sluice run`'s admin listener: a console on a non-loopback address needs a token,
/// and then every request must carry it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_refuses_a_non_loopback_address_without_a_token() {
    let _serial = SERIAL.lock().await;
    let err = jq::serve_console("0.0.0.0:0", None).await.unwrap_err();
    assert!(format!("{err:#}").contains("not loopback"), "{err:#}");

    let addr = jq::serve_console("0.0.0.0:0", Some("s3cret".into()))
        .await
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("rust").join("token");
    let app = tokio::task::block_in_place(|| jq::prepare_app(jq::Lang::Rust, &dir)).unwrap();
    let host = jq::start_host(&app).await.unwrap();
    let url = format!("http://127.0.0.1:{}/admin/status", addr.port());
    let http = reqwest::Client::new();
    let without = http.get(&url).send().await.unwrap().status().as_u16();
    let with = http
        .get(&url)
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap()
        .status()
        .as_u16();
    host.stop().await;
    assert_eq!(without, 401);
    assert_eq!(with, 200);
}
