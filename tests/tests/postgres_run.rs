//! `sluice run APP --database-url postgres://…`: the real binary, a real Postgres, driven over
//! its HTTP ingress. A guest's outbox dispatch lands in Postgres, the relay delivers it, and a
//! host killed with SIGKILL mid-relay leaves nothing behind: the next host on the same
//! database delivers the rest. Needs `SLUICE_TEST_POSTGRES_URL` (`eval "$(scripts/postgres.sh)"`).

use std::time::Duration;

use serde_json::json;
use sluice_tests::{SluiceRun, ingress_ask, rust_app, sluice_binary, wait_for};
use sqlx::Connection;

const T: Duration = Duration::from_secs(60);

async fn fresh_database() -> Option<String> {
    sluice_tests::fresh_postgres_database("sluice_run").await
}

async fn counts(db: &str) -> (i64, i64, i64, i64) {
    let mut c = sqlx::PgConnection::connect(db).await.unwrap();
    let (acked, dead, pending, retried): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE acked), count(*) FILTER (WHERE dead_lettered),
                count(*) FILTER (WHERE NOT acked AND NOT dead_lettered),
                count(*) FILTER (WHERE delivery_count > 0 AND NOT acked)
         FROM outbox_messages WHERE receiver = 'Slow/1'",
    )
    .fetch_one(&mut c)
    .await
    .unwrap();
    (acked, dead, pending, retried)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_run_on_postgres_relays_and_survives_sigkill() {
    let Some(db) = fresh_database().await else {
        return;
    };
    let app = rust_app(
        &["echo", "slow"],
        r#"
[[supervisor.children]]
name = "echo"
actor_type = "Echo"
module = "echo.wasm"

[[supervisor.children]]
name = "slow"
actor_type = "Slow"
module = "slow.wasm"
mailbox_capacity = 1

[outbox]
relay_interval_ms = 5
lease_ms = 2000       # a claim held by the killed host is visible again after 2 s
"#,
    );
    let bin = sluice_binary("sluice-postgres-run");

    // Host 1: a guest dispatches 12 slow jobs (150 ms each) to one receiver with a one-slot
    // mailbox. The first goes straight in; the rest wait in Postgres for the relay.
    let h1 = SluiceRun::start(&bin, app.path(), &["--database-url", &db], &[]).await;
    let r = ingress_ask(
        &h1.ingress,
        "Echo/1/ask/dispatch",
        json!({"targets": ["Slow/1"], "msg_type": "sleep", "payload": "150", "mode": "cast",
               "idempotency_key": "", "conflict": "append"}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    for _ in 1..12 {
        let r = ingress_ask(
            &h1.ingress,
            "Echo/1/ask/dispatch",
            json!({"targets": ["Slow/1"], "msg_type": "sleep", "payload": "150", "mode": "cast"}),
        )
        .await;
        assert_eq!(r["ok"], true, "{r}");
    }
    // Kill it mid-relay: some delivered and acked, the rest still pending in Postgres.
    let what = "the relay to deliver at least 2 of the 12 with at least 2 still pending";
    wait_for(T, what, || async {
        let (acked, dead, pending, _) = counts(&db).await;
        assert_eq!(dead, 0);
        assert_eq!(acked + pending, 12, "every dispatch is a row in Postgres");
        if acked >= 2 && pending >= 2 {
            Ok(())
        } else {
            Err(format!("{acked} acked, {pending} pending"))
        }
    })
    .await;
    drop(h1); // SIGKILL
    let (acked_at_kill, _, pending_at_kill, _) = counts(&db).await;
    assert!(pending_at_kill >= 1, "nothing left to prove a restart with");

    // Host 2 on the same database delivers everything that was pending; nothing is lost,
    // nothing dead-lettered.
    let _h2 = SluiceRun::start(&bin, app.path(), &["--database-url", &db], &[]).await;
    let what = format!(
        "the restarted host to deliver everything pending ({acked_at_kill} acked at the kill)"
    );
    let acked = wait_for(T, &what, || async {
        let (acked, dead, pending, _) = counts(&db).await;
        assert_eq!(dead, 0);
        if pending == 0 {
            Ok(acked)
        } else {
            Err(format!("{pending} still pending"))
        }
    })
    .await;
    assert_eq!(acked, 12);
}
