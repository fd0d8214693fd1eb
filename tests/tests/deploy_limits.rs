//! Deploy refuses settings that would break the host, says why, and the running version keeps
//! serving: every number has a range, and supervised instances (never evicted) must fit the
//! activation caps beside every other type's.

use std::time::Duration;

use sluice_runtime::{ChildSpec, ErrorCode, HostConfig, MailboxStrategy};
use sluice_tests::{host_with, recorded_by, rust_guest, test_config};

const T: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploys_that_cannot_work_are_refused_with_why_and_the_running_version_keeps_serving() {
    let host = host_with(
        HostConfig {
            max_activations: 10,
            ..test_config()
        },
        vec![(ChildSpec::new("Echo", "echo.wasm").count(6), "echo")],
    )
    .await;
    let echo = std::fs::read(rust_guest("echo")).unwrap();
    host.ask("Echo/0", "record", "kept", T).await.unwrap();
    let version = |h: &sluice_runtime::Host| {
        h.status()
            .into_iter()
            .find(|s| s.actor_type == "Echo")
            .unwrap()
            .version
    };
    let before = version(&host);

    let refused = [
        (
            ChildSpec::new("Echo", "echo.wasm")
                .count(6)
                .memory_limit_mb(0),
            "echo.memory_limit_mb must be in 1..=512, got 0",
        ),
        (
            // (17592186044416 << 20) wraps to 0 in a usize: it was accepted and every call
            // then failed with "memory limit of 0 MiB".
            ChildSpec::new("Echo", "echo.wasm")
                .count(6)
                .memory_limit_mb(17_592_186_044_416),
            "echo.memory_limit_mb must be in 1..=512, got 17592186044416",
        ),
        (
            ChildSpec::new("Echo", "echo.wasm")
                .count(6)
                .max_activations(999_999),
            "echo.max_activations must be in 1..=8000, got 999999",
        ),
        (
            ChildSpec::new("Echo", "echo.wasm").count(20_000),
            "echo.count must be in 0..=8000, got 20000",
        ),
        (
            ChildSpec::new("Echo", "echo.wasm")
                .count(6)
                .max_activations(4),
            "echo: 6 supervised instances (count/keys) cannot fit max_activations=4",
        ),
    ];
    for (spec, why) in refused {
        let e = host.deploy(spec, echo.clone()).await.unwrap_err();
        assert_eq!(e.to_string(), format!("invalid configuration: {why}"));
    }
    // Another type whose supervised instances do not fit beside Echo's six.
    let e = host
        .deploy(ChildSpec::new("Other", "echo.wasm").count(5), echo.clone())
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid configuration: other: 5 supervised instances (count/keys) do not fit \
         host.max_activations=10: other types' supervised instances already hold 6"
    );
    let e = host.ask("Other/0", "echo", "", T).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound, "{e}");
    // Nothing changed: same version, same instance, same state, and slots are left for
    // keyed actors of any type.
    assert_eq!(version(&host), before);
    assert_eq!(recorded_by(&host, "Echo/0").await, ["kept"]);
    for i in 0..4 {
        host.ask(&format!("Echo/k{i}"), "echo", "", T)
            .await
            .unwrap();
    }
    // Four more fit beside the six: a redeploy of Echo itself may keep its own six (a real
    // one, with a new spec: an identical redeploy would change nothing and check nothing).
    let new_spec = || {
        ChildSpec::new("Echo", "echo.wasm")
            .count(6)
            .mailbox(32, MailboxStrategy::Error)
    };
    let v = host.deploy(new_spec(), echo.clone()).await.unwrap();
    assert_eq!(v, 2, "a new version");
    // The same spec and bytes again: the version is kept.
    let again = host.deploy(new_spec(), echo.clone()).await.unwrap();
    assert_eq!(again, 2, "an identical redeploy keeps the version");
    host.deploy(ChildSpec::new("Other", "echo.wasm").count(4), echo)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_host_settings_refuse_to_start() {
    for (cfg, why) in [
        (
            HostConfig {
                memory_limit_mb: 0,
                ..test_config()
            },
            "host.memory_limit_mb must be in 1..=512, got 0",
        ),
        (
            HostConfig {
                max_turn_ms: 0,
                ..test_config()
            },
            "host.max_turn_ms must be in 1..=3600000, got 0",
        ),
        (
            HostConfig {
                max_payload_bytes: 1 << 40,
                ..test_config()
            },
            "host.max_payload_bytes must be in 1..=67108864, got 1099511627776",
        ),
        (
            HostConfig {
                max_timers_per_actor: 0,
                ..test_config()
            },
            "host.max_timers_per_actor must be in 1..=1000000, got 0",
        ),
    ] {
        let e = sluice_runtime::Host::new(cfg).err().expect("refused");
        assert_eq!(e.to_string(), format!("invalid configuration: {why}"));
    }
}
