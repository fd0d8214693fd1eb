//! The committed Go bindings (`guests/go/internal/wit`) are what `wit-bindgen go` 0.63.0 makes
//! from `wit/` today. Skipped when the `wit-bindgen` CLI is not installed
//! (`bash scripts/guest-toolchains.sh --with-wit-bindgen`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Hand-written files inside the generated tree (the export hooks).
const HAND_WRITTEN: &[&str] = &["exports/export_sluice_actor_actor/hooks.go"];

fn files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    out.retain(|p| !HAND_WRITTEN.iter().any(|h| Path::new(h) == p));
    out.sort();
    out
}

#[test]
fn committed_go_bindings_match_a_fresh_generation() {
    let version = Command::new("wit-bindgen").arg("--version").output();
    let Ok(version) = version else {
        eprintln!("skipping: wit-bindgen CLI not installed");
        return;
    };
    let version = String::from_utf8_lossy(&version.stdout);
    if !version.contains("0.63.0") {
        eprintln!("skipping: wit-bindgen is {version}, the bindings were made with 0.63.0");
        return;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let fresh = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-bindings");
    let _ = std::fs::remove_dir_all(&fresh);
    let status = Command::new("wit-bindgen")
        .args(["go", "-w", "actor-world"])
        .arg(repo.join("wit"))
        .arg("--out-dir")
        .arg(&fresh)
        .args(["--pkg-name", "sluice.dev/guest/internal/wit"])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let committed = repo.join("guests/go/internal/wit");
    assert_eq!(files(&committed), files(&fresh), "file lists differ");
    for f in files(&fresh) {
        let a = std::fs::read_to_string(committed.join(&f)).unwrap();
        let b = std::fs::read_to_string(fresh.join(&f)).unwrap();
        assert!(
            a == b,
            "{} differs from a fresh `wit-bindgen go` run; regenerate it",
            f.display()
        );
    }
}
