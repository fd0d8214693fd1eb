//! A stopped host gives back what it reserved: its instance pool (a large virtual mapping),
//! its threads and its actors. Dozens of hosts come and go in one process (the job_queue
//! driver, embedders restarting a host) and must not run the process out of address space.

use std::time::Duration;

use sluice_runtime::{ChildSpec, Host, HostConfig};
use sluice_tests::{rust_guest, test_config};

const T: Duration = Duration::from_secs(30);

#[test]
fn forty_hosts_started_and_stopped_in_turn_do_not_exhaust_the_address_space() {
    let echo = std::fs::read(rust_guest("echo")).unwrap();
    for i in 0..40 {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            // The default pool: 1,016 slots, terabytes of reserved virtual memory.
            let host = Host::new(HostConfig {
                max_activations: 1000,
                ..test_config()
            })
            .unwrap_or_else(|e| panic!("host #{i} did not start: {e:#}"));
            host.deploy(ChildSpec::new("Echo", "echo.wasm"), echo.clone())
                .await
                .unwrap();
            host.ask("Echo/1", "record", "x", T).await.unwrap();
            host.stop().await;
        });
    }
}
