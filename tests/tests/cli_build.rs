//! `sluice build DIR [-o OUT] [--qjs]`: the real binary builds a guest, reports progress, and
//! the component it writes runs on a real host.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use sluice_runtime::ChildSpec;
use sluice_tests::{root, skip, sluice_binary, test_config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_build_makes_a_typescript_quickjs_guest_that_runs_on_the_host() {
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-build");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join("echo-qjs.wasm");
    let _ = std::fs::remove_file(&out);
    let run = Command::new(sluice_binary("sluice-cli-build"))
        .arg("build")
        .arg(root().join("guests/typescript/testkit/echo"))
        .arg("-o")
        .arg(&out)
        .arg("--qjs")
        .output()
        .expect("running sluice build");
    let stderr = String::from_utf8_lossy(&run.stderr);
    if !run.status.success() && stderr.contains("guest-toolchains.sh") {
        skip(format_args!("TypeScript toolchain missing:\n{stderr}"));
        return;
    }
    assert!(run.status.success(), "sluice build failed:\n{stderr}");
    // Progress: each step announced and timed, then the summary; stdout is just the path.
    assert!(
        stderr.contains("[typescript]") && stderr.contains("QuickJS"),
        "{stderr}"
    );
    assert!(stderr.contains(" done in "), "{stderr}");
    assert!(stderr.contains("built "), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&run.stdout).trim(),
        out.display().to_string()
    );
    let host = sluice_runtime::Host::new(test_config()).unwrap();
    host.deploy(
        ChildSpec::new("Echo", "echo.wasm"),
        std::fs::read(&out).unwrap(),
    )
    .await
    .expect("the built component deploys");
    let t = Duration::from_secs(30);
    assert_eq!(host.ask("Echo/1", "echo", "hi", t).await.unwrap(), b"hi");
    let e = host.ask("Echo/1", "fail", "", t).await.unwrap_err();
    assert_eq!(e.to_string(), "bad input");
}

#[test]
fn sluice_build_names_the_folder_it_cannot_build() {
    let empty = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-build-empty");
    std::fs::create_dir_all(&empty).unwrap();
    let run = Command::new(sluice_binary("sluice-cli-build"))
        .arg("build")
        .arg(&empty)
        .output()
        .expect("running sluice build");
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains(&empty.display().to_string()), "{stderr}");
}
