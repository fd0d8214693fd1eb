//! Embeds the migration files (`migrations/{sqlite,postgres}/NNNN_description.sql`) as a list
//! for `channel::migrations`. This replaces `sqlx::migrate!`, whose proc-macro crate compiles a
//! second copy of sqlx-core, both drivers and the bundled SQLite for the build host: minutes of
//! every cold build. The list names each file as sqlx's own directory resolver does (version
//! from the number, description from the rest with `_` as spaces), so databases migrated by
//! earlier builds validate unchanged; a test compares the two.
use std::fmt::Write;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    // At run time: a build script compiled in one checkout can be run for another that shares
    // the target dir (a worktree), and env!() would name the first.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("migrations");
    for backend in ["sqlite", "postgres"] {
        let dir = root.join(backend);
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files: Vec<(i64, String, String)> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|entry| {
                let path = entry.expect("a directory entry").path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                let (version, rest) = name
                    .split_once('_')
                    .unwrap_or_else(|| panic!("{name}: expected NNNN_description.sql"));
                let description = rest
                    .strip_suffix(".sql")
                    .filter(|d| !d.ends_with(".up") && !d.ends_with(".down"))
                    .unwrap_or_else(|| panic!("{name}: only simple (non-reversible) .sql files"));
                let version = version
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}: the prefix must be a number"));
                (
                    version,
                    description.replace('_', " "),
                    path.display().to_string(),
                )
            })
            .collect();
        files.sort();
        let mut list = String::from("&[\n");
        for (version, description, path) in &files {
            writeln!(
                list,
                "    ({version}, {description:?}, include_str!({path:?})),"
            )
            .unwrap();
        }
        list.push(']');
        std::fs::write(
            Path::new(&out).join(format!("migrations_{backend}.rs")),
            list,
        )
        .expect("writing to OUT_DIR");
    }
}
