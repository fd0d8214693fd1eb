//! `sluice build DIR [-o OUT] [--js-engine quickjs|starlingmonkey]`: the real binary builds a
//! guest, reports progress, and the component it writes runs on a real host. TypeScript builds
//! with QuickJS unless told otherwise; StarlingMonkey is built here, once, as the other engine's
//! smoke test (every other TypeScript test runs on the default engine).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sluice_runtime::ChildSpec;
use sluice_tests::{json, skip, sluice_binary, test_config};

/// A TypeScript actor using `TextEncoder`/`TextDecoder` as web code does (the engine's own, or
/// the SDK's where the engine has none), and raising a typed error on `fail`.
const CODEC_ACTOR: &str = r#"import { type Envelope, InvalidArgument, register } from "@sluice/guest";

export const actor = register({
  handle(env: Envelope) {
    if (env.msgType === "fail") throw new InvalidArgument("bad input");
    const bytes = new TextEncoder().encode(new TextDecoder().decode(env.payload) + " ✓ 𝄞");
    return {
      text: new TextDecoder("utf-8").decode(bytes),
      bytes: bytes.length,
      lone_surrogate: Array.from(new TextEncoder().encode("\ud800")),
      invalid: new TextDecoder().decode(new Uint8Array([0x61, 0xff, 0x62])),
    };
  },
});
"#;

/// Writes [`CODEC_ACTOR`] into a fresh folder, runs `sluice build` on it with `args` and `env`,
/// checks the progress names `engine`, deploys the component and checks its replies. `false`
/// when the toolchain is missing (a loud skip).
async fn build_codec_actor_and_ask(
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
    engine: &str,
) -> bool {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("app.ts"), CODEC_ACTOR).unwrap();
    let out = dir.join("actor.wasm");
    let mut cmd = Command::new(sluice_binary("sluice-cli-build"));
    cmd.arg("build").arg(&dir).arg("-o").arg(&out).args(args);
    cmd.env_remove(sluice_build::JsBackend::ENV);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let run = cmd.output().expect("running sluice build");
    let stderr = String::from_utf8_lossy(&run.stderr);
    if !run.status.success() && stderr.contains("guest-toolchains.sh") {
        skip(format_args!("TypeScript toolchain missing:\n{stderr}"));
        return false;
    }
    assert!(run.status.success(), "sluice build failed:\n{stderr}");
    // Progress: each step announced and timed, then the summary; stdout is just the path.
    assert!(
        stderr.contains("[typescript]") && stderr.contains(&format!("({engine})")),
        "expected a {engine} build:\n{stderr}"
    );
    assert!(stderr.contains(" done in "), "{stderr}");
    assert!(stderr.contains("built "), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&run.stdout).trim(),
        out.display().to_string()
    );
    ask_codec_actor(&out).await;
    true
}

async fn ask_codec_actor(component: &Path) {
    let host = sluice_runtime::Host::new(test_config()).unwrap();
    host.deploy(
        ChildSpec::new("Codec", "codec.wasm"),
        std::fs::read(component).unwrap(),
    )
    .await
    .expect("the built component deploys");
    let t = Duration::from_secs(30);
    let reply = json(&host.ask("Codec/1", "utf8", "héllo", t).await.unwrap());
    assert_eq!(reply["text"], "héllo ✓ 𝄞", "{reply}");
    assert_eq!(reply["bytes"], 15, "{reply}");
    assert_eq!(
        reply["lone_surrogate"],
        serde_json::json!([239, 191, 189]),
        "{reply}"
    );
    assert_eq!(reply["invalid"], "a\u{fffd}b", "{reply}");
    let e = host.ask("Codec/1", "fail", "", t).await.unwrap_err();
    assert_eq!(e.to_string(), "bad input");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_build_makes_a_quickjs_typescript_guest_by_default_whose_text_codecs_work() {
    build_codec_actor_and_ask("cli-build-codec-default", &[], &[], "QuickJS").await;
}

/// The other engine's one test: named by the flag (which wins over `SLUICE_JS_ENGINE`), it
/// builds, deploys, maps a typed error and keeps the engine's own text codecs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_build_js_engine_starlingmonkey_makes_a_guest_that_runs_on_the_host() {
    build_codec_actor_and_ask(
        "cli-build-codec-starlingmonkey",
        &["--js-engine", "starlingmonkey"],
        &[(sluice_build::JsBackend::ENV, "quickjs")],
        "StarlingMonkey",
    )
    .await;
}

#[test]
fn an_unknown_js_engine_in_the_environment_fails_the_build_naming_it() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-build-bad-engine");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("app.ts"), CODEC_ACTOR).unwrap();
    let run = Command::new(sluice_binary("sluice-cli-build"))
        .arg("build")
        .arg(&dir)
        .env(sluice_build::JsBackend::ENV, "spidermonkey")
        .output()
        .expect("running sluice build");
    let stderr = String::from_utf8_lossy(&run.stderr);
    if stderr.contains("guest-toolchains.sh") || stderr.contains("apt-get install nodejs") {
        skip(format_args!("TypeScript toolchain missing:\n{stderr}"));
        return;
    }
    assert!(!run.status.success());
    assert!(
        stderr.contains("unknown JavaScript engine \"spidermonkey\""),
        "{stderr}"
    );
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
