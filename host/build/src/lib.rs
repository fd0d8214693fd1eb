//! `sluice build DIR`: turns a Go, Python, TypeScript or Rust actor folder into a Sluice
//! component (world `sluice:actor/actor-world@0.1.0`).
//!
//! Each language shells out to its own toolchain (installed once by
//! `bash scripts/guest-toolchains.sh`); Go's WIT embedding and preview1 adaptation run in
//! process through `wit-component`, so no `wasm-tools` or `wit-bindgen` CLI is needed. A
//! missing toolchain is a [`BuildError::MissingToolchain`] naming the command that installs it.
//! Builds need no network once the toolchains are installed.
#![warn(missing_docs)]

mod component;
mod detect;
mod error;
mod lang;
mod process;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use component::{
    ACTOR_EXPORT, BATCHED_WORLD, ComponentInfo, WORLD, componentize_core, inspect, validate_actor,
};
pub use detect::{Language, detect};
pub use error::{BuildError, Result};

/// The command that installs every guest toolchain, quoted in [`BuildError::MissingToolchain`].
pub const INSTALL_COMMAND: &str = "bash scripts/guest-toolchains.sh";

/// The variable `scripts/test.sh` sets once it has installed every guest toolchain.
pub const REQUIRE_TOOLCHAINS_ENV: &str = "SLUICE_REQUIRE_GUEST_TOOLCHAINS";

/// Whether a missing guest toolchain (or anything else the test command installs) must fail a
/// test instead of skipping it: true when `CI` or [`REQUIRE_TOOLCHAINS_ENV`] is set to anything
/// but empty, `0` or `false`. The only such gate: `sluice-build`'s tests and `sluice-tests`
/// both ask it, so no test skips in CI what another one fails on.
pub fn toolchains_required() -> bool {
    ["CI", REQUIRE_TOOLCHAINS_ENV]
        .iter()
        .any(|k| truthy(std::env::var(k).ok().as_deref()))
}

/// `Some` value other than empty, `0` or `false` (any case).
fn truthy(v: Option<&str>) -> bool {
    v.is_some_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// Which JavaScript engine a TypeScript component embeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JsBackend {
    /// QuickJS (componentize-qjs): ~1.6 MB, ~6x faster calls than StarlingMonkey; sync
    /// exports only, no web APIs beyond what the SDK installs (`TextEncoder`/`TextDecoder`).
    #[default]
    QuickJs,
    /// StarlingMonkey (SpiderMonkey) via componentize-js: web APIs (`fetch`-era globals,
    /// `URL`, `crypto`…), ~12 MB, slower calls.
    StarlingMonkey,
}

impl JsBackend {
    /// The variable naming the engine when [`BuildOptions::js_backend`] is `None`
    /// (`quickjs` or `starlingmonkey`): how a whole test run is switched to the other one.
    pub const ENV: &'static str = "SLUICE_JS_ENGINE";

    /// `quickjs` or `starlingmonkey`, as [`JsBackend::from_str`](std::str::FromStr) reads it.
    pub fn name(self) -> &'static str {
        match self {
            JsBackend::QuickJs => "quickjs",
            JsBackend::StarlingMonkey => "starlingmonkey",
        }
    }

    /// `choice`, else the engine [`JsBackend::ENV`] names, else the default (QuickJS). An
    /// unknown name in the variable is an error, never a silent default.
    pub fn resolve(choice: Option<JsBackend>) -> Result<JsBackend> {
        if let Some(b) = choice {
            return Ok(b);
        }
        match std::env::var(Self::ENV) {
            Ok(v) if !v.is_empty() => v.parse(),
            _ => Ok(JsBackend::default()),
        }
    }
}

impl std::str::FromStr for JsBackend {
    type Err = BuildError;

    /// `quickjs` (or `qjs`) and `starlingmonkey` (or `sm`), any case.
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "quickjs" | "qjs" => Ok(JsBackend::QuickJs),
            "starlingmonkey" | "sm" => Ok(JsBackend::StarlingMonkey),
            _ => Err(BuildError::UnknownJsEngine {
                name: s.to_string(),
            }),
        }
    }
}

impl fmt::Display for JsBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One progress report of a build.
#[derive(Debug, Clone)]
pub struct Progress {
    /// The language being built.
    pub language: Language,
    /// The step, e.g. `go build (wasip1, c-shared)`.
    pub step: String,
    /// `None` when the step starts; its duration when it ends.
    pub elapsed: Option<Duration>,
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.elapsed {
            None => write!(f, "[{}] {} ...", self.language, self.step),
            Some(d) => write!(
                f,
                "[{}] {} done in {:.1} s",
                self.language,
                self.step,
                d.as_secs_f64()
            ),
        }
    }
}

/// A progress callback.
pub type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;

/// How to build. `BuildOptions::default()` writes `DIR/.sluice/actor.wasm`, detects the
/// language, finds the repository from `SLUICE_ROOT` or the folder's ancestors, uses the
/// engine `SLUICE_JS_ENGINE` names (default QuickJS) for TypeScript and validates the result.
#[derive(Clone, Default)]
pub struct BuildOptions {
    /// Where to write the component (default `DIR/.sluice/actor.wasm`).
    pub output: Option<PathBuf>,
    /// Force a language instead of detecting it.
    pub language: Option<Language>,
    /// The repository holding `wit/` and `guests/` (default: `SLUICE_ROOT`, then the
    /// nearest ancestor of the folder that has both, then the one this crate was built in).
    pub repo_root: Option<PathBuf>,
    /// TypeScript engine; `None` resolves through [`JsBackend::resolve`] (`SLUICE_JS_ENGINE`,
    /// else QuickJS).
    pub js_backend: Option<JsBackend>,
    /// Skip checking that the result exports `sluice:actor/actor` and imports only
    /// `sluice:actor/*` and WASI.
    pub skip_validation: bool,
    /// Called at the start and end of every step (also logged with `tracing`).
    pub progress: Option<ProgressFn>,
}

impl fmt::Debug for BuildOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuildOptions")
            .field("output", &self.output)
            .field("language", &self.language)
            .field("repo_root", &self.repo_root)
            .field("js_backend", &self.js_backend)
            .field("skip_validation", &self.skip_validation)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// What a build produced.
#[derive(Debug, Clone)]
pub struct BuildOutput {
    /// The language that was built.
    pub language: Language,
    /// The component file.
    pub component: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Wall time of the whole build.
    pub elapsed: Duration,
    /// Its imports and exports (empty when validation was skipped).
    pub info: ComponentInfo,
}

/// Builds the actor in `dir` into a component.
pub fn build(dir: &Path, opts: &BuildOptions) -> Result<BuildOutput> {
    let started = Instant::now();
    let dir = process::absolute(dir)?;
    let language = match opts.language {
        Some(l) => l,
        None => detect(&dir).ok_or_else(|| BuildError::UnknownLanguage { dir: dir.clone() })?,
    };
    let output = match &opts.output {
        Some(p) if p.is_absolute() => p.clone(),
        Some(p) => std::env::current_dir()
            .map_err(BuildError::io("reading the current directory"))?
            .join(p),
        None => dir.join(".sluice").join("actor.wasm"),
    };
    if let Some(parent) = output.parent() {
        std::fs::create_dir_all(parent)
            .map_err(BuildError::io(format!("creating {}", parent.display())))?;
    }
    let ctx = lang::Ctx {
        dir: &dir,
        output: &output,
        language,
        repo: repo_root(&dir, opts)?,
        opts,
    };
    match language {
        Language::Go => lang::go::build(&ctx)?,
        Language::Python => lang::python::build(&ctx)?,
        Language::TypeScript => lang::typescript::build(&ctx)?,
        Language::Rust => lang::rust::build(&ctx)?,
    }
    let bytes =
        std::fs::read(&output).map_err(BuildError::io(format!("reading {}", output.display())))?;
    let info = if opts.skip_validation {
        ComponentInfo::default()
    } else {
        ctx.step("validate component", || validate_actor(&bytes, &output))?
    };
    let out = BuildOutput {
        language,
        component: output,
        size: bytes.len() as u64,
        elapsed: started.elapsed(),
        info,
    };
    tracing::info!(
        language = %out.language,
        component = %out.component.display(),
        size = out.size,
        elapsed_ms = out.elapsed.as_millis() as u64,
        "guest built"
    );
    Ok(out)
}

fn is_repo(p: &Path) -> bool {
    p.join("wit").join("actor.wit").is_file() && p.join("guests").is_dir()
}

fn repo_root(dir: &Path, opts: &BuildOptions) -> Result<PathBuf> {
    if let Some(r) = &opts.repo_root {
        return process::absolute(r);
    }
    if let Some(r) = std::env::var_os("SLUICE_ROOT") {
        return process::absolute(Path::new(&r));
    }
    if let Some(found) = dir.ancestors().find(|p| is_repo(p)) {
        return Ok(found.to_path_buf());
    }
    // The checkout this crate was compiled in (host/build -> repository root).
    let built_in = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if is_repo(&built_in) {
        return process::absolute(&built_in);
    }
    Err(BuildError::RepoNotFound {
        from: dir.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::truthy;

    #[test]
    fn only_a_set_value_other_than_empty_zero_or_false_requires_toolchains() {
        for v in ["1", "true", "yes", "TRUE"] {
            assert!(truthy(Some(v)), "{v}");
        }
        for v in [None, Some(""), Some("0"), Some("false"), Some("False")] {
            assert!(!truthy(v), "{v:?}");
        }
    }
}
