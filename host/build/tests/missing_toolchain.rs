//! A missing toolchain is a typed error naming the tool and the install command. Its own test
//! binary (own process) because it empties PATH.

use std::path::Path;

use sluice_build::{BuildError, BuildOptions, INSTALL_COMMAND, build};

#[test]
fn missing_componentize_py_names_the_install_command() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = repo.join("guests/python/testkit/echo");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("missing/x.wasm");
    // SAFETY: the only test in this binary; nothing else reads the environment concurrently.
    unsafe { std::env::set_var("PATH", "/nonexistent") };
    match build(
        &dir,
        &BuildOptions {
            output: Some(out),
            ..Default::default()
        },
    ) {
        Err(
            e @ BuildError::MissingToolchain {
                tool: "componentize-py",
                ..
            },
        ) => {
            let text = e.to_string();
            assert!(text.contains(INSTALL_COMMAND), "{text}");
        }
        other => panic!("expected MissingToolchain, got {other:?}"),
    }
}
