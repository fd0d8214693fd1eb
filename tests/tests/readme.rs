//! The README's five-minute quickstart, followed as written: a folder holding the Sluice
//! checkout (as `sluice`) and a new `counter` crate next to it; the `Cargo.toml` and
//! `src/lib.rs` blocks verbatim; the build, app and call commands of the last block, with
//! each reply its `# → …` comment promises. Only the addresses differ: the host listens on
//! ports the OS picks, so parallel tests never collide.

use std::path::Path;
use std::process::Command;

use sluice_tests::{SluiceRun, root, sluice_binary};

/// The quickstart section's fenced blocks, as (language, body).
fn quickstart_blocks() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme
        .find("## Five-minute quickstart")
        .expect("README has a quickstart");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut blocks = Vec::new();
    let mut rest = section;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let nl = after.find('\n').unwrap();
        let lang = after[..nl].trim().to_string();
        let body_and_rest = &after[nl + 1..];
        let close = body_and_rest.find("```").expect("a closed block");
        blocks.push((lang, body_and_rest[..close].to_string()));
        rest = &body_and_rest[close + 3..];
    }
    blocks
}

/// Runs one shell line (bash) in `dir`, failing the test with its output if it fails.
fn sh(dir: &Path, line: &str) {
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", line])
        .current_dir(dir)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "`{line}` failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The reply a command's `# → …` comment promises, if it has one.
fn promised(line: &str) -> Option<&str> {
    line.split_once("# → ").map(|(_, r)| r.trim())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quickstart_builds_a_rust_actor_that_answers_as_the_readme_says() {
    let blocks = quickstart_blocks();
    let shells: Vec<&str> = blocks
        .iter()
        .filter(|(l, _)| l == "sh")
        .map(|(_, b)| b.as_str())
        .collect();
    let [setup, run] = shells[..] else {
        panic!(
            "the quickstart has two shell blocks, found {}",
            shells.len()
        );
    };
    let cargo_toml = &blocks.iter().find(|(l, _)| l == "toml").unwrap().1;
    let lib_rs = &blocks.iter().find(|(l, _)| l == "rust").unwrap().1;

    // The setup builds the very binary the tests use, puts it on PATH, and makes the crate
    // next to the checkout.
    assert!(setup.contains("cargo build -p sluice-cli"), "{setup}");
    assert!(setup.contains("target/debug:$PATH"), "{setup}");
    let bin = sluice_binary("sluice-readme");
    let work = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(root(), work.path().join("sluice")).unwrap();
    let new_crate = setup
        .lines()
        .find_map(|l| {
            l.split("&&")
                .map(str::trim)
                .find(|c| c.starts_with("cargo new"))
        })
        .expect("the setup makes the crate with cargo new");
    sh(work.path(), new_crate);
    let counter = work.path().join("counter");
    std::fs::write(counter.join("Cargo.toml"), cargo_toml).unwrap();
    std::fs::write(counter.join("src/lib.rs"), lib_rs).unwrap();

    // The last block: its build and app lines run as written; `sluice run` starts the host;
    // every promised reply is checked.
    let mut lines = run.lines().peekable();
    let mut host: Option<SluiceRun> = None;
    let mut checked = 0;
    while let Some(line) = lines.next() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line.contains("<<'TOML'") {
            let mut doc = vec![line.to_string()];
            for more in lines.by_ref() {
                doc.push(more.to_string());
                if more.trim() == "TOML" {
                    break;
                }
            }
            sh(&counter, &doc.join("\n"));
        } else if let Some(app) = line.strip_prefix("sluice run ") {
            let app = app.split_whitespace().next().unwrap();
            host = Some(SluiceRun::start(&bin, &counter.join(app), &[], &[]).await);
        } else if let Some(args) = line.strip_prefix("sluice call ") {
            let h = host.as_ref().expect("sluice run comes first");
            let args: Vec<&str> = args.split('#').next().unwrap().split_whitespace().collect();
            let out = Command::new(&bin)
                .arg("call")
                .args(&args)
                .args(["--host", &h.ingress])
                .output()
                .unwrap();
            assert!(out.status.success(), "{line}: {:?}", out);
            let want = promised(line).expect("a call with its reply");
            assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), want, "{line}");
            checked += 1;
        } else if let Some(curl) = line.strip_prefix("curl -X POST localhost:7400") {
            let h = host.as_ref().expect("sluice run comes first");
            let path = curl.split_whitespace().next().unwrap();
            let body = reqwest::Client::new()
                .post(format!("{}{path}", h.ingress))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            assert_eq!(body.trim(), promised(line).unwrap(), "{line}");
            checked += 1;
        } else {
            sh(&counter, line);
        }
    }
    assert_eq!(checked, 3, "every promised reply was checked");
}
