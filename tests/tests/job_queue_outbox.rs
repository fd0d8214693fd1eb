//! job_queue_outbox (`examples/job_queue_outbox/PROTOCOL.md`): every scenario against every
//! language's leader component, on a real host with a SQLite outbox, each invariant checked
//! independently by the driver (`examples/job_queue_outbox/driver`). A broken invariant fails
//! the test with the driver's description of it.

use job_queue_outbox as jq;
use sluice_tests::{Lang, per_language, skip};

/// One scenario at a time in this binary: several hosts on two cores would make the timing
/// the scenarios provoke (full mailboxes, backoff before a kill) a matter of luck.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn scenario(lang: Lang, name: &str) {
    let _one = ONE_AT_A_TIME.lock().await;
    let l = jq::Lang::parse(lang.dir()).expect("every test language is a driver language");
    match tokio::task::block_in_place(|| jq::build(l)) {
        Err(e) if jq::is_missing_toolchain(&e) => {
            skip(format_args!("{lang:?} job_queue not built: {e:#}"));
            return;
        }
        Err(e) => panic!("{lang:?} job_queue does not build: {e:#}"),
        Ok(_) => {}
    }
    let work = tempfile::tempdir().expect("a temporary folder");
    match jq::run_scenario(l, name, work.path()).await {
        Ok(report) => eprintln!("{lang:?} {name}: {report}"),
        Err(e) => panic!("{lang:?} {name}: {e:#}"),
    }
}

async fn thundering_herd(lang: Lang) {
    scenario(lang, "thundering_herd").await
}
async fn config_wave_deploy(lang: Lang) {
    scenario(lang, "config_wave_deploy").await
}
async fn send_heartbeat(lang: Lang) {
    scenario(lang, "send_heartbeat").await
}
async fn heartbeat_burst(lang: Lang) {
    scenario(lang, "heartbeat_burst").await
}
async fn telemetry_test(lang: Lang) {
    scenario(lang, "telemetry_test").await
}
async fn offline_delivery(lang: Lang) {
    scenario(lang, "offline_delivery").await
}
async fn poison_message(lang: Lang) {
    scenario(lang, "poison_message").await
}

per_language!(
    thundering_herd,
    config_wave_deploy,
    send_heartbeat,
    heartbeat_burst,
    telemetry_test,
    offline_delivery,
    poison_message,
);
