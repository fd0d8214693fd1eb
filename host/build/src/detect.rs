//! Which language a guest folder is written in.

use std::fmt;
use std::path::Path;

/// A guest language `sluice build` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    /// Mainline Go (wasip1, c-shared) + wit-bindgen Go bindings + the reactor adapter.
    Go,
    /// componentize-py.
    Python,
    /// TypeScript/JavaScript through esbuild and jco componentize.
    TypeScript,
    /// `cargo build --target wasm32-wasip2`.
    Rust,
}

impl Language {
    /// Lower-case name, as in messages and file names.
    pub fn name(self) -> &'static str {
        match self {
            Language::Go => "go",
            Language::Python => "python",
            Language::TypeScript => "typescript",
            Language::Rust => "rust",
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Detects the language from marker files; `None` when there are none.
///
/// Order matters only for mixed folders: a `go.mod` wins over a `package.json` (tooling files
/// often sit beside Go code), and `Cargo.toml` is checked last.
pub fn detect(dir: &Path) -> Option<Language> {
    let has = |f: &str| dir.join(f).is_file();
    if has("go.mod") {
        Some(Language::Go)
    } else if has("app.py") || has("pyproject.toml") {
        Some(Language::Python)
    } else if has("package.json") || has("tsconfig.json") || has("app.ts") || has("app.js") {
        Some(Language::TypeScript)
    } else if has("Cargo.toml") {
        Some(Language::Rust)
    } else {
        None
    }
}
