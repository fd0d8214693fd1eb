//! The runtime's files depend on each other in one direction only, and each stays small.
//!
//! Every `crate::…` and `super::…` path in a file (in `use` lines and in code) is resolved to
//! the file that defines the module it names; those are the file's dependencies. The graph
//! must have no cycle: no two files import each other, directly or through others. `lib.rs`
//! only declares and re-exports, so no file may reach an item through the crate root.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Files past this many lines are more than one concept (the tests at their end excluded).
const MAX_LINES: usize = 400;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, as module paths (`actor::cell`) → file.
fn modules(dir: &Path, prefix: &[String], out: &mut BTreeMap<Vec<String>, PathBuf>) {
    for e in std::fs::read_dir(dir).expect("reading src") {
        let p = e.expect("a dir entry").path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            let mut next = prefix.to_vec();
            next.push(name);
            modules(&p, &next, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let mut path = prefix.to_vec();
            if name != "mod" && name != "lib" {
                path.push(name);
            }
            out.insert(path, p);
        }
    }
}

/// The module a path names: the longest prefix of `segments` that is a module.
fn resolve(mods: &BTreeMap<Vec<String>, PathBuf>, segments: &[String]) -> Option<Vec<String>> {
    (0..=segments.len())
        .rev()
        .map(|n| segments[..n].to_vec())
        .find(|p| mods.contains_key(p))
}

/// `crate::a::b` and `super::a` paths in `text` (comments skipped), from module `me`.
fn references(text: &str, me: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        for start in ["crate::", "super::"] {
            let mut rest = code;
            while let Some(i) = rest.find(start) {
                let before = rest[..i].chars().last();
                rest = &rest[i..];
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    rest = &rest[start.len()..];
                    continue;
                }
                let path: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                rest = &rest[path.len().max(1)..];
                let mut segs: Vec<String> = path
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                let mut base: Vec<String> = Vec::new();
                if segs.first().is_some_and(|s| s == "crate") {
                    segs.remove(0);
                } else {
                    // `super` is the enclosing module: `a` for a/b.rs, the root for a/mod.rs.
                    base = me.to_vec();
                    while segs.first().is_some_and(|s| s == "super") {
                        segs.remove(0);
                        base.pop();
                    }
                }
                base.extend(segs);
                out.push(base);
            }
        }
    }
    out
}

#[test]
fn runtime_files_form_an_acyclic_graph_of_small_files() {
    let mut mods = BTreeMap::new();
    modules(&src(), &[], &mut mods);
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let mut problems = Vec::new();
    for (me, file) in &mods {
        let text = std::fs::read_to_string(file).expect("reading a source file");
        let body = text.split("#[cfg(test)]").next().unwrap_or(&text);
        let lines = body.lines().count();
        if lines > MAX_LINES {
            problems.push(format!(
                "{} has {lines} lines (> {MAX_LINES})",
                file.display()
            ));
        }
        if me.is_empty() {
            continue; // lib.rs: declarations and re-exports only
        }
        let deps = edges.entry(me.clone()).or_default();
        for r in references(body, me) {
            match resolve(&mods, &r) {
                Some(m) if m.is_empty() => problems.push(format!(
                    "{} reaches `{}` through the crate root; use the defining module",
                    file.display(),
                    r.join("::")
                )),
                Some(m) if &m != me => {
                    deps.insert(m);
                }
                _ => {}
            }
        }
    }
    // Depth-first search for a cycle.
    fn visit(
        n: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<Vec<String>, u8>,
        stack: &mut Vec<Vec<String>>,
        cycles: &mut Vec<String>,
    ) {
        match state.get(n) {
            Some(2) => return,
            Some(1) => {
                let i = stack.iter().position(|s| s == n).unwrap();
                let ring: Vec<String> = stack[i..]
                    .iter()
                    .chain(std::iter::once(n))
                    .map(|m| m.join("::"))
                    .collect();
                cycles.push(ring.join(" -> "));
                return;
            }
            _ => {}
        }
        state.insert(n.clone(), 1);
        stack.push(n.clone());
        for d in edges.get(n).into_iter().flatten() {
            visit(d, edges, state, stack, cycles);
        }
        stack.pop();
        state.insert(n.clone(), 2);
    }
    let mut state = BTreeMap::new();
    let mut cycles = Vec::new();
    for n in edges.keys() {
        visit(n, &edges, &mut state, &mut Vec::new(), &mut cycles);
    }
    problems.extend(cycles.into_iter().map(|c| format!("import cycle: {c}")));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The check sees the graph: the supervisor depends on the instance it runs.
    assert!(
        edges[&vec!["actor".to_string(), "supervisor".to_string()]]
            .contains(&vec!["actor".to_string(), "instance".to_string()])
    );
}
