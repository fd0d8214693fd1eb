//! The embedded example as `./scripts/demo.sh` runs it: the real binary on the Rust test
//! guests (built by `scripts/test.sh` before the tests), all seven scenarios passing, and its
//! output in the driver's format: one overall line, nothing wider than 100 columns.

use std::path::Path;
use std::process::Command;

// The driver's scenario list, from the file the example prints its table with.
#[allow(dead_code)]
#[path = "../../../../job_queue_outbox/driver/src/report.rs"]
mod report;

#[test]
fn the_embedded_job_queue_passes_its_seven_scenarios_in_the_drivers_format() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../..");
    let guests = root.join("guests/rust/target/wasm32-wasip2/release");
    for g in ["echo.wasm", "slow.wasm"] {
        assert!(
            guests.join(g).is_file(),
            "{} missing: build the Rust test guests first \
             (cd guests/rust && cargo build --release --target wasm32-wasip2)",
            guests.join(g).display()
        );
    }
    let work = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_job-queue-embedded"))
        .arg(&guests)
        .arg(work.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "job-queue-embedded failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for s in report::SCENARIOS {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(s) && l[s.len()..].trim_start().starts_with("ok ")),
            "no passing row for {s}:\n{stdout}"
        );
    }
    assert_eq!(
        stdout.trim_end().lines().next_back(),
        Some("7/7 passed"),
        "the overall line:\n{stdout}"
    );
    // The table, its legend and the notes; the JSON reports after them are one line each.
    let wide: Vec<&str> = stdout
        .lines()
        .take_while(|l| !l.starts_with("reports (JSON"))
        .filter(|l| l.chars().count() > 100)
        .collect();
    assert!(wide.is_empty(), "lines over 100 columns: {wide:#?}");
}
