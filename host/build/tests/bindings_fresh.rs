//! The committed generated bindings are what the pinned generators make from `wit/` today:
//! Go's `guests/go/internal/wit` (`wit-bindgen go`) and Python's `guests/python/sluice/_bindings`
//! (`componentize-py bindings`, the copy the SDK's tests and type checks import). The versions
//! are the pins of `scripts/guest-toolchains.sh`, which installs both (`--with-wit-bindgen` for
//! the first; `scripts/test.sh` passes it). A missing or differently versioned generator skips
//! loudly, or fails under [`sluice_build::toolchains_required`].

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The version `scripts/guest-toolchains.sh` pins as `VAR="x.y.z"`.
fn pinned(var: &str) -> String {
    let script = std::fs::read_to_string(repo().join("scripts/guest-toolchains.sh")).unwrap();
    script
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{var}=\"")))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or_else(|| panic!("scripts/guest-toolchains.sh pins no {var}"))
        .to_string()
}

/// Whether `program --version` names `version`; skips (loudly, outside the gate) when not.
/// `install` is the command that installs it.
fn generator_is(program: &str, version: &str, install: &str) -> bool {
    let found = match Command::new(program).arg("--version").output() {
        Ok(out) => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        Err(e) => {
            common::skip(format_args!("{program} is not installed ({e}): {install}"));
            return false;
        }
    };
    if !found.split_whitespace().any(|w| w == version) {
        common::skip(format_args!(
            "{program} is `{found}`, the committed bindings are made with {version}: {install}"
        ));
        return false;
    }
    true
}

/// Every file under `root`, relative to it, sorted; `__pycache__` folders left out.
fn files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "__pycache__") {
                    stack.push(p);
                }
            } else {
                out.push(p.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// Runs a generator, failing the test with its stderr if it fails.
fn generate(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Each of `names` reads the same in `committed` as in `fresh`.
fn same_files(committed: &Path, fresh: &Path, names: &[PathBuf], regenerate: &str) {
    for f in names {
        let a = std::fs::read_to_string(committed.join(f)).unwrap();
        let b = std::fs::read_to_string(fresh.join(f))
            .unwrap_or_else(|e| panic!("{}: not generated ({e})", f.display()));
        assert!(
            a == b,
            "{} differs from a fresh generation; regenerate it: {regenerate}",
            committed.join(f).display()
        );
    }
}

#[test]
fn committed_go_bindings_match_a_fresh_wit_bindgen_run() {
    /// Hand-written files inside the generated tree (the export hooks).
    const HAND_WRITTEN: &[&str] = &[
        "exports/export_sluice_actor_actor/hooks.go",
        "exports/export_sluice_actor_batch/hooks.go",
    ];
    let version = pinned("WIT_BINDGEN_VERSION");
    let install = "bash scripts/guest-toolchains.sh --with-wit-bindgen";
    if !generator_is("wit-bindgen", &version, install) {
        return;
    }
    let fresh = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-bindings");
    let _ = std::fs::remove_dir_all(&fresh);
    generate(
        Command::new("wit-bindgen")
            .args(["go", "-w", "batched-actor-world"])
            .arg(repo().join("wit"))
            .arg("--out-dir")
            .arg(&fresh)
            .args(["--pkg-name", "sluice.dev/guest/internal/wit"]),
    );
    let committed = repo().join("guests/go/internal/wit");
    let mut want = files(&committed);
    want.retain(|p| !HAND_WRITTEN.iter().any(|h| Path::new(h) == p));
    assert_eq!(want, files(&fresh), "file lists differ");
    same_files(
        &committed,
        &fresh,
        &want,
        "see guests/go/README.md (wit-bindgen go)",
    );
}

#[test]
fn committed_python_bindings_match_a_fresh_componentize_py_run() {
    let version = pinned("COMPONENTIZE_PY_VERSION");
    if !generator_is("componentize-py", &version, sluice_build::INSTALL_COMMAND) {
        return;
    }
    let fresh = Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-bindings");
    let _ = std::fs::remove_dir_all(&fresh);
    generate(
        Command::new("componentize-py")
            .arg("-d")
            .arg(repo().join("wit"))
            .args(["-w", "batched-actor-world", "bindings"])
            .arg(&fresh),
    );
    // The committed copy is the world's package and the types module the SDK imports; the
    // generator's async and runtime support files are left out (the SDK uses neither).
    let committed = repo().join("guests/python/sluice/_bindings");
    let want = files(&committed);
    let world = |p: &PathBuf| p.starts_with("wit_world");
    assert_eq!(
        want.iter().filter(|p| world(p)).collect::<Vec<_>>(),
        files(&fresh)
            .iter()
            .filter(|p| world(p))
            .collect::<Vec<_>>(),
        "wit_world file lists differ"
    );
    assert!(
        want.contains(&PathBuf::from("componentize_py_types.py")),
        "{want:?}"
    );
    same_files(
        &committed,
        &fresh,
        &want,
        "`componentize-py -d wit -w batched-actor-world bindings DIR`, then copy DIR's wit_world/ and \
         componentize_py_types.py into guests/python/sluice/_bindings",
    );
}
