//! `sluice deploy` and `sluice run` as a user meets them, through the real binary: a deploy
//! says which host and app it reached, refuses a host of another app unless forced, and
//! keeps the version of a byte-identical redeploy; `run` says when it is ready, shows each
//! module's compile, and names the flag of a taken port; a client started right after `run`
//! waits for the host instead of failing; a deploy that cannot fit is refused, by the CLI and by
//! the admin API, saying why, while the running version keeps serving.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use base64::Engine as _;

use serde_json::Value;
use sluice_tests::{SluiceRun, rust_app, sluice_binary, wait_until};

/// One Echo type; `extra` is added to the app-config (before the table, e.g. `name = "…"`),
/// `init` to the child.
fn config(extra: &str, init: &str) -> String {
    format!(
        "{extra}\n[[supervisor.children]]\nname = \"echo\"\nactor_type = \"Echo\"\nmodule = \"echo.wasm\"\n{init}\n"
    )
}

fn sluice(bin: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env_remove("SLUICE_HOST")
        .env_remove("SLUICE_INGRESS")
        .env_remove("SLUICE_CONTEXT")
        .env("SLUICE_CONFIG", "/nonexistent/sluice-config.toml");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("running sluice")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `sluice status` through the binary, with `env` (and `--host` when given).
fn status(bin: &Path, host: Option<&str>, env: &[(&str, &str)]) -> Value {
    let mut args = vec!["status"];
    if let Some(h) = host {
        args.extend(["--host", h]);
    }
    let out = sluice(bin, &args, env);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn echo_version(status: &Value) -> Value {
    status["actor_types"]
        .as_array()
        .and_then(|a| a.iter().find(|t| t["actor_type"] == "Echo"))
        .unwrap_or_else(|| panic!("no Echo in {status}"))["version"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_to_a_host_of_another_app_is_refused_unless_forced() {
    let shop = rust_app(&["echo"], &config("name = \"shop\"", ""));
    let billing = rust_app(
        &["echo"],
        &config("name = \"billing\"", "init = { v = \"2\" }"),
    );
    let bin = sluice_binary("sluice-cli-deploy");
    let run = SluiceRun::start(&bin, shop.path(), &[], &[]).await;
    assert!(run.stdout_has("sluice: app \"shop\""));
    let st = status(&bin, Some(&run.admin), &[]);
    assert_eq!(st["app"], "shop", "{st}");

    let billing_dir = billing.path().to_str().unwrap();
    let out = sluice(&bin, &["deploy", billing_dir, "--host", &run.admin], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "the host at {} runs app \"shop\", not \"billing\"",
            run.admin
        )),
        "{stderr}"
    );
    assert!(stderr.contains("--force"), "{stderr}");
    // Where it went and what runs there, before refusing.
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!("deploying to {} (from --host)", run.admin)),
        "{stdout}"
    );
    assert!(stdout.contains("runs app \"shop\""), "{stdout}");
    assert_eq!(echo_version(&status(&bin, Some(&run.admin), &[])), 1);

    // The host checks too: a deploy request naming another app is refused there (409).
    let body = serde_json::json!({
        "child": {"name": "echo", "actor_type": "Echo", "module": "echo.wasm"},
        "module_base64": "",
        "app": "billing",
    });
    let resp = reqwest::Client::new()
        .post(format!("{}/admin/deploy", run.admin))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 409);
    assert!(resp.text().await.unwrap().contains("FAILED_PRECONDITION"));

    // Forced, it lands, and says where.
    let out = sluice(
        &bin,
        &["deploy", billing_dir, "--host", &run.admin, "--force"],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!("deployed to {} (app shop): Echo v2", run.admin)),
        "{stdout}"
    );
    assert_eq!(echo_version(&status(&bin, Some(&run.admin), &[])), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identical_redeploy_keeps_the_version_and_says_so() {
    let app = rust_app(&["echo"], &config("", ""));
    let bin = sluice_binary("sluice-cli-deploy");
    let run = SluiceRun::start(&bin, app.path(), &[], &[]).await;
    // Progress per module while it started: compiling, then done (a fresh app folder has no
    // cached machine code).
    // (stdout and stderr are read apart: the ready line may arrive first.)
    wait_until(
        std::time::Duration::from_secs(10),
        "the module's done line",
        || run.stderr_has("[Echo] done: compiled in "),
    )
    .await;
    assert!(
        run.stderr_has("[Echo] loading echo.wasm"),
        "{:?}",
        run.stderr_lines()
    );
    wait_until(std::time::Duration::from_secs(10), "the ready line", || {
        run.stdout_has("sluice: ready: ingress ")
    })
    .await;

    // Actor state must survive a no-op deploy: record something first.
    let out = sluice(
        &bin,
        &["tell", "Echo/1", "record", "kept", "--host", &run.ingress],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    // The default target comes from SLUICE_HOST.
    let dir = app.path().to_str().unwrap();
    let out = sluice(&bin, &["deploy", dir], &[("SLUICE_HOST", &run.admin)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!("deploying to {} (from SLUICE_HOST)", run.admin)),
        "{stdout}"
    );
    assert!(
        stdout.contains("[Echo] unchanged: same module and spec, version 1 kept"),
        "{stdout}"
    );
    assert!(stdout.contains("deployed nothing new"), "{stdout}");
    assert_eq!(
        echo_version(&status(&bin, None, &[("SLUICE_HOST", &run.admin)])),
        1
    );
    let out = sluice(
        &bin,
        &["call", "Echo/1", "recorded"],
        &[("SLUICE_INGRESS", &run.ingress)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let recorded: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(recorded["items"], serde_json::json!(["kept"]));

    // A changed spec is a new version; the target now comes from a config file's context.
    std::fs::write(
        app.path().join("app-config.toml"),
        config("", "init = { v = \"2\" }"),
    )
    .unwrap();
    let cfg = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        cfg.path(),
        format!(
            "current = \"local\"\n[contexts.local]\nadmin = \"{}\"\ningress = \"{}\"\n",
            run.admin, run.ingress
        ),
    )
    .unwrap();
    let cfg_path = cfg.path().to_str().unwrap();
    let out = sluice(&bin, &["deploy", dir], &[("SLUICE_CONFIG", cfg_path)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("(from context local"), "{stdout}");
    assert!(stdout.contains("[Echo] done: version 2"), "{stdout}");
    assert!(
        stdout.contains(&format!("deployed to {} (app ", run.admin)),
        "{stdout}"
    );
    assert_eq!(echo_version(&status(&bin, Some(&run.admin), &[])), 2);
}

/// A port nothing listens on now (bound and released; the kernel does not hand it out again
/// at once).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_call_made_right_after_run_starts_waits_for_the_host_and_succeeds() {
    let app = rust_app(&["echo"], &config("", ""));
    let bin = sluice_binary("sluice-cli-deploy");
    let (ingress, admin) = (free_port(), free_port());
    let mut run = Command::new(&bin)
        .arg("run")
        .arg(app.path())
        .args(["--listen", &format!("127.0.0.1:{ingress}")])
        .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawning sluice run");
    // No waiting of our own: the client waits for the host.
    let out = sluice(
        &bin,
        &[
            "call",
            "Echo/1",
            "echo",
            "first",
            "--host",
            &format!("http://127.0.0.1:{ingress}"),
        ],
        &[],
    );
    let st = sluice(
        &bin,
        &["status", "--host", &format!("http://127.0.0.1:{admin}")],
        &[],
    );
    let _ = run.kill();
    let printed = {
        use std::io::Read;
        let mut s = String::new();
        let _ = run.stdout.take().unwrap().read_to_string(&mut s);
        s
    };
    let _ = run.wait();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "first\n");
    assert!(st.status.success(), "{}", text(&st.stderr));
    assert!(
        printed.contains(&format!(
            "sluice: ready: ingress http://127.0.0.1:{ingress}, admin http://127.0.0.1:{admin}"
        )),
        "{printed}"
    );
}

#[test]
fn a_taken_port_is_named_with_the_flag_that_moves_it() {
    let app = rust_app(&["echo"], &config("", ""));
    let bin = sluice_binary("sluice-cli-deploy");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    for (flag, other) in [
        ("--listen", "--admin-listen"),
        ("--admin-listen", "--listen"),
    ] {
        let out = Command::new(&bin)
            .arg("run")
            .arg(app.path())
            .args([flag, &format!("127.0.0.1:{port}")])
            .args([other, "127.0.0.1:0"])
            .output()
            .expect("running sluice run");
        assert_eq!(out.status.code(), Some(1));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!("error: port {port} is taken")),
            "{stderr}"
        );
        assert!(
            stderr.contains(&format!("choose another with {flag}")),
            "{stderr}"
        );
        // Refused before loading (compiling) anything.
        assert!(!stderr.contains("loading"), "{stderr}");
    }
    drop(taken);
}

/// The `shop` app of the range tests: six supervised Echo instances under a host cap of ten,
/// and `more` added to the supervisor.
fn capped(more: &str) -> String {
    format!(
        "name = \"shop\"\n[host]\nmax_activations = 10\n\n[[supervisor.children]]\nname = \"echo\"\nactor_type = \"Echo\"\nmodule = \"echo.wasm\"\ncount = 6\n{more}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_that_cannot_fit_is_refused_by_the_cli_and_the_admin_api_saying_why_and_the_running_version_keeps_serving()
 {
    let app = rust_app(&["echo"], &capped(""));
    let bin = sluice_binary("sluice-cli-deploy");
    let run = SluiceRun::start(&bin, app.path(), &[], &[]).await;
    let http = reqwest::Client::new();
    let ask = |body: &'static str| {
        let http = http.clone();
        let url = format!("{}/actors/Echo/0/ask/echo", run.ingress);
        async move {
            let r = http.post(url).body(body).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    assert_eq!(ask("before").await, (200, "before".to_string()));
    let before = status(&bin, Some(&run.admin), &[]);
    assert_eq!(echo_version(&before), 1, "{before}");

    // `sluice deploy` of a folder whose Echo asks for no memory: refused, naming the field,
    // its range and the value.
    let zero = rust_app(
        &["echo"],
        &capped("").replace("count = 6\n", "count = 6\nmemory_limit_mb = 0\n"),
    );
    let stderr = deploy_refused(&bin, zero.path(), &run.admin);
    assert!(
        stderr.contains("echo.memory_limit_mb must be in 1..=512, got 0"),
        "{stderr}"
    );

    // `sluice deploy` of a folder adding a type whose five eager instances do not fit beside
    // Echo's six under the running host's cap: the host refuses it and the CLI says why.
    let crowded = rust_app(
        &["echo"],
        &capped(
            "\n[[supervisor.children]]\nname = \"other\"\nactor_type = \"Other\"\nmodule = \"echo.wasm\"\ncount = 5\n",
        ),
    );
    let stderr = deploy_refused(&bin, crowded.path(), &run.admin);
    assert!(
        stderr.contains(
            "other: 5 supervised instances (count/keys) do not fit host.max_activations=10: \
             other types' supervised instances already hold 6"
        ),
        "{stderr}"
    );

    // The admin API itself checks what a client did not: each refused with its reason.
    let module = base64::engine::general_purpose::STANDARD
        .encode(std::fs::read(app.path().join("echo.wasm")).unwrap());
    for (child, why) in [
        (
            serde_json::json!({"name": "echo", "actor_type": "Echo", "module": "echo.wasm",
                "count": 6, "memory_limit_mb": 0}),
            "echo.memory_limit_mb must be in 1..=512, got 0",
        ),
        (
            serde_json::json!({"name": "echo", "actor_type": "Echo", "module": "echo.wasm",
                "count": 20000}),
            "echo.count must be in 0..=8000, got 20000",
        ),
        (
            serde_json::json!({"name": "echo", "actor_type": "Echo", "module": "echo.wasm",
                "count": 11}),
            "echo: 11 supervised instances (count/keys) do not fit host.max_activations=10",
        ),
    ] {
        let r = http
            .post(format!("{}/admin/deploy", run.admin))
            .json(&serde_json::json!({"child": child, "module_base64": module}))
            .send()
            .await
            .unwrap();
        let code = r.status().as_u16();
        let body: Value = r.json().await.unwrap();
        assert_eq!(code, 422, "{body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(&format!("invalid configuration: {why}")),
            "{body}"
        );
    }

    // Nothing changed: Echo answers, at the same version, and Other was never deployed.
    assert_eq!(ask("after").await, (200, "after".to_string()));
    let after = status(&bin, Some(&run.admin), &[]);
    assert_eq!(echo_version(&after), 1, "{after}");
    let types = after["actor_types"].as_array().unwrap();
    assert!(types.iter().all(|t| t["actor_type"] != "Other"), "{after}");
}

/// `sluice deploy DIR --host ADMIN`, which must fail (exit 1): what it printed on stderr.
fn deploy_refused(bin: &std::path::Path, dir: &std::path::Path, admin: &str) -> String {
    let out = sluice(
        bin,
        &["deploy", dir.to_str().unwrap(), "--host", admin],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    text(&out.stderr)
}
