//! One module per guest language; each runs its toolchain and writes `Ctx::output`.

pub(crate) mod go;
pub(crate) mod python;
mod python_leak;
pub(crate) mod rust;
pub(crate) mod typescript;

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::{BuildOptions, Language, Progress};

/// Everything a language build needs.
pub(crate) struct Ctx<'a> {
    pub dir: &'a Path,
    pub output: &'a Path,
    pub language: Language,
    pub repo: PathBuf,
    pub opts: &'a BuildOptions,
}

impl Ctx<'_> {
    /// The repository's `wit/` folder.
    pub fn wit_dir(&self) -> PathBuf {
        self.repo.join("wit")
    }

    fn report(&self, step: &str, elapsed: Option<std::time::Duration>) {
        let p = Progress {
            language: self.language,
            step: step.to_string(),
            elapsed,
        };
        tracing::info!(language = %self.language, step, elapsed_ms = elapsed.map(|d| d.as_millis() as u64), "build step");
        if let Some(cb) = &self.opts.progress {
            cb(&p);
        }
    }

    /// Runs one reported step.
    pub fn step<T>(&self, name: &str, f: impl FnOnce() -> T) -> T {
        self.report(name, None);
        let t0 = Instant::now();
        let r = f();
        self.report(name, Some(t0.elapsed()));
        r
    }
}
