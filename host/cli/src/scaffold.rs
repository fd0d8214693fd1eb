//! `sluice new LANG NAME`: a new actor project from the template of a guest SDK.
//!
//! The template files are compiled into the binary, so the command works from any folder. The
//! SDKs stay in the checkout the binary was built from: where a template points at its SDK by
//! a relative path (Go's `replace` lines, Rust's path dependencies, pytest's `pythonpath`, the
//! Node test hooks in `package.json`), the scaffold gets the absolute path instead.
//! `sluice build` finds the Python and TypeScript SDKs itself (the same built-in checkout).
//! Every template has unit tests against its SDK's fake host, run by the language's own
//! runner (`test_command`).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The languages `sluice new` scaffolds, as typed on the command line.
pub const LANGUAGES: [&str; 4] = ["go", "python", "typescript", "rust"];

/// The actor type every scaffold declares in its `app-config.toml`.
pub const ACTOR_TYPE: &str = "MyActor";

/// Where `sluice build DIR` writes the component, relative to DIR (the scaffold's
/// `app-config.toml` names it as its module).
pub const MODULE: &str = ".sluice/actor.wasm";

/// What `sluice new` wrote.
#[derive(Debug)]
pub struct Scaffold {
    /// The project folder.
    pub dir: PathBuf,
    /// The files written, relative to `dir`.
    pub files: Vec<String>,
    /// The next three commands (build, run, call), for a shell in the current folder.
    pub next: [String; 3],
}

/// The root of the checkout this binary was built from (host/cli -> repository root).
pub fn checkout() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::canonicalize(&p).unwrap_or(p)
}

fn is_repo(p: &Path) -> bool {
    p.join("wit").join("actor.wit").is_file() && p.join("guests").is_dir()
}

/// The repository `sluice build DIR` takes its WIT and SDKs from when neither `SLUICE_ROOT`
/// nor an ancestor of DIR names one: this binary's checkout, the one `sluice new` points a
/// scaffold's SDK paths at. `None` leaves the choice to `sluice_build`.
pub fn build_root(dir: &Path) -> Option<PathBuf> {
    if std::env::var_os("SLUICE_ROOT").is_some() {
        return None;
    }
    let abs = std::path::absolute(dir).ok()?;
    if abs.ancestors().any(is_repo) {
        return None;
    }
    Some(checkout()).filter(|c| is_repo(c))
}

fn template(lang: &str, sdk: &Path) -> Vec<(&'static str, String)> {
    let s = |p: &Path| p.display().to_string();
    match lang {
        "go" => vec![
            (
                "go.mod",
                include_str!("../../../guests/go/template/go.mod")
                    .replace(
                        "// Point both at your checkout of the Sluice repository (guests/go and guests/go/witpkg).",
                        "// The Go SDK in the Sluice checkout `sluice new` was built from.",
                    )
                    .replace("=> ../witpkg", &format!("=> {}", s(&sdk.join("witpkg"))))
                    .replace("=> ..\n", &format!("=> {}\n", s(sdk))),
            ),
            (
                "main.go",
                include_str!("../../../guests/go/template/main.go").to_string(),
            ),
            (
                "main_test.go",
                include_str!("../../../guests/go/template/main_test.go").to_string(),
            ),
        ],
        "python" => vec![
            (
                "pyproject.toml",
                include_str!("../../../guests/python/template/pyproject.toml")
                    .replace(
                        "point it at\n# your checkout of the Sluice repository (guests/python), or drop it after\n# `pip install path/to/guests/python`.",
                        "the Python SDK\n# in the Sluice checkout `sluice new` was built from; drop it after `pip install` of that SDK.",
                    )
                    .replace("pythonpath = [\"..\"]", &format!("pythonpath = [{:?}]", s(sdk))),
            ),
            (
                "app.py",
                include_str!("../../../guests/python/template/app.py").to_string(),
            ),
            (
                "test_app.py",
                include_str!("../../../guests/python/template/test_app.py").to_string(),
            ),
        ],
        // Every `../` of these files is the SDK folder: the test script's tsc and test hooks,
        // the tsconfigs' base, `paths`, generated WIT types and Node's types.
        "typescript" => vec![
            (
                "package.json",
                include_str!("../../../guests/typescript/template/package.json")
                    .replace(" ../", &format!(" {}/", s(sdk))),
            ),
            (
                "tsconfig.json",
                include_str!("../../../guests/typescript/template/tsconfig.json")
                    .replace("\"../", &format!("\"{}/", s(sdk))),
            ),
            (
                "tsconfig.test.json",
                include_str!("../../../guests/typescript/template/tsconfig.test.json")
                    .replace("\"../", &format!("\"{}/", s(sdk))),
            ),
            (
                "app.ts",
                include_str!("../../../guests/typescript/template/app.ts").to_string(),
            ),
            (
                "app.test.ts",
                include_str!("../../../guests/typescript/template/app.test.ts").to_string(),
            ),
        ],
        "rust" => vec![
            (
                "Cargo.toml",
                include_str!("../../../guests/rust/template/Cargo.toml")
                    .replace(
                        "# Point at your checkout of the Sluice repository (guests/rust/sdk).",
                        "# The Rust SDK in the Sluice checkout `sluice new` was built from.",
                    )
                    .replace(
                        "path = \"../sdk\"",
                        &format!("path = {:?}", s(&sdk.join("sdk"))),
                    ),
            ),
            (
                "Cargo.lock",
                include_str!("../../../guests/rust/template/Cargo.lock").to_string(),
            ),
            (
                "src/lib.rs",
                include_str!("../../../guests/rust/template/src/lib.rs").to_string(),
            ),
        ],
        _ => unreachable!(),
    }
}

/// The language's own unit-test command, run in the project folder, and a note on it.
fn test_command(lang: &str) -> (&'static str, &'static str) {
    match lang {
        "go" => (
            "go test ./...",
            "`main_test.go` runs the actor natively against the SDK's fake host (`sluicetest`).",
        ),
        "python" => (
            "python3 -m pytest",
            "`test_app.py` runs the actor on plain CPython against the SDK's fake host\n\
             (`sluice.testing.FakeHost`), which records the host calls the actor makes and answers\n\
             them; `pyproject.toml` points pytest at the SDK.",
        ),
        "typescript" => (
            "npm test",
            "`app.test.ts` runs the actor in Node's test runner against the SDK's fake host\n\
             (`FakeHost` from `@sluice/guest/testing`), which records the host calls the actor makes\n\
             and answers them; `npm test` type-checks it first (`tsconfig.test.json`, with Node's\n\
             types; the actor's own `tsconfig.json` has none) and loads the SDK's tsc, types and\n\
             test hooks by path (nothing to install).",
        ),
        "rust" => (
            "cargo test",
            "`src/lib.rs` has unit tests that run the actor natively against the SDK's fake host\n\
             (`sluice_guest::testing::FakeHost`, the `testing` feature under `[dev-dependencies]`),\n\
             which records the host calls the actor makes and answers them.",
        ),
        _ => unreachable!(),
    }
}

fn app_config(name: &str) -> String {
    format!(
        "# The app `sluice run .` starts: one actor type, built by `sluice build .` into {MODULE}.\n\
         name = {name:?}\n\
         \n\
         [[supervisor.children]]\n\
         name = \"my-actor\"\n\
         actor_type = \"{ACTOR_TYPE}\"\n\
         module = \"{MODULE}\"\n\
         # Instances (MyActor/1, MyActor/anything) are activated on their first message.\n\
         mailbox_capacity = 64\n\
         # The actor's `init(config)` receives this table as JSON.\n\
         init = {{}}\n"
    )
}

fn readme(name: &str, lang: &str) -> String {
    let sdk = checkout().join("guests").join(lang);
    format!(
        "# {name}\n\
         \n\
         A Sluice actor in {lang}, made by `sluice new {lang} {name}`. The SDK and its README:\n\
         {sdk}.\n\
         \n\
         Next, in this folder:\n\
         \n\
         ```sh\n\
         sluice build .                  # writes {MODULE}\n\
         sluice run .                    # prints `sluice: ready: ingress http://127.0.0.1:7400, …`\n\
         sluice call {ACTOR_TYPE}/1 ping        # in another terminal: {{\"pong\":1,…}}\n\
         ```\n\
         \n\
         Unit tests, in the language's own runner:\n\
         \n\
         ```sh\n\
         {test}\n\
         ```\n\
         \n\
         {note}\n\
         \n\
         `app-config.toml` declares the actor type {ACTOR_TYPE}; `sluice run` reloads nothing by\n\
         itself: after a change, `sluice build .` then `sluice deploy .` into the running host.\n\
         {engine}",
        sdk = sdk.display(),
        test = test_command(lang).0,
        note = test_command(lang).1,
        engine = engine_note(lang),
    )
}

/// TypeScript's choice of JavaScript engine, for its README (empty for other languages).
fn engine_note(lang: &str) -> &'static str {
    match lang {
        "typescript" => {
            "\n`sluice build .` embeds QuickJS (~1.6 MB, the fastest calls; `TextEncoder` and\n\
             `TextDecoder` come from the SDK); `sluice build . --js-engine starlingmonkey` embeds\n\
             StarlingMonkey (~12 MB, slower calls) for code that needs its web APIs.\n"
        }
        _ => "",
    }
}

/// Writes a new `lang` actor project into `dir`, which must not exist or be empty.
pub fn new_project(lang: &str, dir: &Path) -> anyhow::Result<Scaffold> {
    if !LANGUAGES.contains(&lang) {
        bail!(
            "unknown language {lang:?}: sluice new takes one of {}",
            LANGUAGES.join(", ")
        );
    }
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir)
            .with_context(|| format!("{} exists and is not a folder", dir.display()))?;
        if entries.next().is_some() {
            bail!(
                "{} already exists and is not empty: sluice new writes only into a new or empty folder",
                dir.display()
            );
        }
    }
    let name = std::path::absolute(dir)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "my-actor".to_string());
    let sdk = checkout().join("guests").join(lang);
    let mut files = template(lang, &sdk);
    let ignore = if lang == "rust" {
        "/.sluice\n/target\n"
    } else {
        "/.sluice\n"
    };
    files.push((".gitignore", ignore.to_string()));
    files.push(("app-config.toml", app_config(&name)));
    files.push(("README.md", readme(&name, lang)));
    let mut written = Vec::new();
    for (rel, text) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(rel.to_string());
    }
    let d = dir.display();
    Ok(Scaffold {
        dir: dir.to_path_buf(),
        files: written,
        next: [
            format!("sluice build {d}"),
            format!("sluice run {d}"),
            format!("sluice call {ACTOR_TYPE}/1 ping"),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every relative reference a template makes to its SDK is rewritten, and the comments that
    /// said to point it at a checkout say where it points now: a scaffold outside the repository
    /// must not reach for `..`.
    #[test]
    fn scaffolded_files_point_at_the_sdk_by_absolute_path() {
        let sdk = Path::new("/checkout/guests/LANG");
        for lang in LANGUAGES {
            for (name, text) in template(lang, sdk) {
                for relative in ["\"..", "=> ..", "../sdk", "'..'", " ../"] {
                    assert!(
                        !text.contains(relative),
                        "{lang} {name} still has {relative:?}:\n{text}"
                    );
                }
                assert!(!text.contains("your checkout"), "{lang} {name}:\n{text}");
            }
        }
        let files = |lang| {
            template(lang, sdk)
                .into_iter()
                .collect::<std::collections::HashMap<_, _>>()
        };
        assert!(
            files("python")["pyproject.toml"].contains(r#"pythonpath = ["/checkout/guests/LANG"]"#)
        );
        let ts = files("typescript");
        assert!(
            ts["package.json"].contains(
                "node /checkout/guests/LANG/node_modules/typescript/bin/tsc -p tsconfig.test.json && \
                 node --import /checkout/guests/LANG/sdk/testing/register.mjs"
            ),
            "{}",
            ts["package.json"]
        );
        assert!(
            ts["tsconfig.json"]
                .contains(r#""extends": "/checkout/guests/LANG/tsconfig.base.json""#)
        );
        let test_config = &ts["tsconfig.test.json"];
        for want in [
            r#""typeRoots": ["/checkout/guests/LANG/node_modules/@types"]"#,
            r#""@sluice/guest/testing": ["/checkout/guests/LANG/sdk/testing/index.ts"]"#,
            r#""/checkout/guests/LANG/types/generated/actor-world.d.ts""#,
        ] {
            assert!(test_config.contains(want), "{want}:\n{test_config}");
        }
        assert_eq!(
            files("rust")["Cargo.toml"]
                .matches(r#"path = "/checkout/guests/LANG/sdk""#)
                .count(),
            2
        );
    }
}
