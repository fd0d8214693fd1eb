//! The typed errors of a guest build.

use std::path::PathBuf;

/// What can go wrong building a guest.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// Nothing in the folder says which language it is.
    #[error(
        "cannot tell the language of {dir}: expected go.mod (Go), app.py or pyproject.toml \
         (Python), package.json/tsconfig.json/app.ts (TypeScript) or Cargo.toml (Rust)"
    )]
    UnknownLanguage {
        /// The folder that was inspected.
        dir: PathBuf,
    },
    /// A toolchain the language needs is not installed.
    #[error("{tool} is not installed ({why}); install it with: {install}")]
    MissingToolchain {
        /// The missing program or package, e.g. `componentize-py`.
        tool: &'static str,
        /// What was looked for.
        why: String,
        /// The exact command that installs it.
        install: String,
    },
    /// The repository layout (wit/, guests/) could not be found.
    #[error(
        "cannot find the Sluice repository (wit/actor.wit and guests/) from {from}; set SLUICE_ROOT or BuildOptions::repo_root"
    )]
    RepoNotFound {
        /// Where the search started.
        from: PathBuf,
    },
    /// A toolchain command failed.
    #[error("{tool} failed ({status}): {command}\n{output}")]
    ToolFailed {
        /// The tool that failed.
        tool: &'static str,
        /// The command line, for reproducing by hand.
        command: String,
        /// Its exit status.
        status: String,
        /// The tail of its output.
        output: String,
    },
    /// Turning a core module into a component, or decoding one, failed.
    #[error("component encoding failed: {0}")]
    Component(String),
    /// The built component does not have the shape of a Sluice actor.
    #[error("{path} is not a Sluice actor component: {reason}")]
    NotAnActor {
        /// The component file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// `SLUICE_JS_ENGINE` (or a `--js-engine` flag) names no engine Sluice knows.
    #[error("unknown JavaScript engine {name:?}: expected quickjs or starlingmonkey")]
    UnknownJsEngine {
        /// The name given.
        name: String,
    },
    /// File system trouble.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl BuildError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BuildError {
        let context = context.into();
        move |source| BuildError::Io { context, source }
    }
}

/// `Result` with [`BuildError`] as the default error.
pub type Result<T, E = BuildError> = std::result::Result<T, E>;
