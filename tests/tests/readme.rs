//! Every code block of every README.md in the repository is run, checked against the real
//! thing, or marked as not run ([`how_checked`] says which, and a block it cannot place fails
//! the walk):
//!
//! - The top README's five-minute quickstart, followed as written: a folder holding the Sluice
//!   checkout (as `sluice`) and a new `counter` crate next to it; the `Cargo.toml` and
//!   `src/lib.rs` blocks verbatim; the build, app and call commands of the last block, with
//!   each reply its `# → …` comment promises. Only the addresses differ: the host listens on
//!   ports the OS picks, so parallel tests never collide.
//! - Its `toml` blocks, loaded by the host's own loaders and started as a real host.
//! - Its `text` blocks of `sluice new` and `sluice run` output, compared with what the real
//!   binary prints (numbers aside), including the `cached:` line of a second start.
//! - The `sluice new L hello` command blocks of the SDK READMEs, compared with the next
//!   commands the scaffold prints (the commands `tests/tests/cli_new.rs` runs).
//! - The SDK READMEs' `go`/`python`/`ts`/`rust`/`toml` blocks: compiled, and their unit tests
//!   run, by `scripts/lint-guests.sh readmes` (checked here to extract that README).
//! - The SDK READMEs' `sh` blocks: run as written, in order, from a checkout, with
//!   `path/to/actor` a project `sluice new` made and `/path/to/sluice` the checkout
//!   ([`sdk_shell_blocks`]).
//! - A block marked in its info string is shown, not run: `output` (sample output),
//!   `fragment` (part of a file, not compilable alone), `manual` (commands for the reader to
//!   run; no README has one today).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sluice_tests::{SluiceRun, root, rust_guest, sluice_binary, wait_until};

/// The quickstart section's fenced blocks, as (language, body).
fn quickstart_blocks() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let start = readme
        .find("## Five-minute quickstart")
        .expect("README has a quickstart");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut blocks = Vec::new();
    let mut rest = section;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let nl = after.find('\n').unwrap();
        let lang = after[..nl].trim().to_string();
        let body_and_rest = &after[nl + 1..];
        let close = body_and_rest.find("```").expect("a closed block");
        blocks.push((lang, body_and_rest[..close].to_string()));
        rest = &body_and_rest[close + 3..];
    }
    blocks
}

/// Runs one shell line (bash) in `dir`, failing the test with its output if it fails.
fn sh(dir: &Path, line: &str) {
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", line])
        .current_dir(dir)
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "`{line}` failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The reply a command's `# → …` comment promises, if it has one.
fn promised(line: &str) -> Option<&str> {
    line.split_once("# → ").map(|(_, r)| r.trim())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quickstart_builds_a_rust_actor_that_answers_as_the_readme_says() {
    let blocks = quickstart_blocks();
    let shells: Vec<&str> = blocks
        .iter()
        .filter(|(l, _)| l == "sh")
        .map(|(_, b)| b.as_str())
        .collect();
    let [setup, run] = shells[..] else {
        panic!(
            "the quickstart has two shell blocks, found {}",
            shells.len()
        );
    };
    let cargo_toml = &blocks.iter().find(|(l, _)| l == "toml").unwrap().1;
    let lib_rs = &blocks.iter().find(|(l, _)| l == "rust").unwrap().1;

    // The setup builds the very binary the tests use, puts it on PATH, and makes the crate
    // next to the checkout.
    assert!(setup.contains("cargo build -p sluice-cli"), "{setup}");
    assert!(setup.contains("target/debug:$PATH"), "{setup}");
    let bin = sluice_binary("sluice-readme");
    let work = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(root(), work.path().join("sluice")).unwrap();
    let new_crate = setup
        .lines()
        .find_map(|l| {
            l.split("&&")
                .map(str::trim)
                .find(|c| c.starts_with("cargo new"))
        })
        .expect("the setup makes the crate with cargo new");
    sh(work.path(), new_crate);
    let counter = work.path().join("counter");
    std::fs::write(counter.join("Cargo.toml"), cargo_toml).unwrap();
    std::fs::write(counter.join("src/lib.rs"), lib_rs).unwrap();

    // The last block: its build and app lines run as written; `sluice run` starts the host;
    // every promised reply is checked.
    let mut lines = run.lines().peekable();
    let mut host: Option<SluiceRun> = None;
    let mut checked = 0;
    while let Some(line) = lines.next() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line.contains("<<'TOML'") {
            let mut doc = vec![line.to_string()];
            for more in lines.by_ref() {
                doc.push(more.to_string());
                if more.trim() == "TOML" {
                    break;
                }
            }
            sh(&counter, &doc.join("\n"));
        } else if let Some(app) = line.strip_prefix("sluice run ") {
            let app = app.split_whitespace().next().unwrap();
            host = Some(SluiceRun::start(&bin, &counter.join(app), &[], &[]).await);
        } else if let Some(args) = line.strip_prefix("sluice call ") {
            let h = host.as_ref().expect("sluice run comes first");
            let args: Vec<&str> = args.split('#').next().unwrap().split_whitespace().collect();
            let out = Command::new(&bin)
                .arg("call")
                .args(&args)
                .args(["--host", &h.ingress])
                .output()
                .unwrap();
            assert!(out.status.success(), "{line}: {:?}", out);
            let want = promised(line).expect("a call with its reply");
            assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), want, "{line}");
            checked += 1;
        } else if let Some(curl) = line.strip_prefix("curl -X POST localhost:7400") {
            let h = host.as_ref().expect("sluice run comes first");
            let path = curl.split_whitespace().next().unwrap();
            let body = reqwest::Client::new()
                .post(format!("{}{path}", h.ingress))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            assert_eq!(body.trim(), promised(line).unwrap(), "{line}");
            checked += 1;
        } else {
            sh(&counter, line);
        }
    }
    assert_eq!(checked, 3, "every promised reply was checked");
}

/// One fenced code block of a README.
#[derive(Debug)]
struct Block {
    /// The README, relative to the repository root.
    file: String,
    /// The line of its opening fence (1-based).
    line: usize,
    /// Its info string (`toml`, `text output`, …).
    info: String,
    body: String,
    /// The `## ` heading it is under ("" before the first).
    section: String,
}

impl Block {
    fn lang(&self) -> &str {
        self.info.split_whitespace().next().unwrap_or("")
    }

    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// The words an info string may add after the language to mark a block that is shown, not run.
const MARKS: [&str; 3] = ["output", "fragment", "manual"];

/// Every README.md under the repository root (build output and dependencies aside).
fn readmes() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            if e.file_type().unwrap().is_dir() {
                if !name.starts_with('.') && !["target", "node_modules"].contains(&name.as_str()) {
                    walk(&path, out);
                }
            } else if name == "README.md" {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root(), &mut out);
    out.sort();
    out
}

/// The fenced blocks of `text` (from `file`), and the lines that open an indented code block
/// (which cannot carry a mark, so a README must fence every block).
fn blocks_of(file: &str, text: &str) -> (Vec<Block>, Vec<usize>) {
    let (mut blocks, mut indented) = (Vec::new(), Vec::new());
    let mut section = String::new();
    let mut open: Option<(usize, String, Vec<&str>)> = None;
    let (mut prev_blank, mut in_list) = (true, false);
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        if let Some((at, info, body)) = open.as_mut() {
            if fence.is_some_and(|rest| rest.trim().is_empty()) {
                blocks.push(Block {
                    file: file.to_string(),
                    line: *at,
                    info: info.clone(),
                    body: body.join("\n"),
                    section: section.clone(),
                });
                open = None;
            } else {
                body.push(line);
            }
            continue;
        }
        if let Some(info) = fence {
            open = Some((i + 1, info.trim().to_string(), Vec::new()));
            prev_blank = false;
            continue;
        }
        if line.trim().is_empty() {
            prev_blank = true;
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let item = {
            let t = line.trim_start();
            t.starts_with("- ")
                || t.starts_with("* ")
                || t.split_once(". ")
                    .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        if indent == 0 {
            in_list = item;
            if let Some(h) = line.strip_prefix("## ") {
                section = h.trim().to_string();
            }
        } else if prev_blank && !item && indent >= if in_list { 6 } else { 4 } {
            indented.push(i + 1);
        }
        prev_blank = false;
    }
    assert!(open.is_none(), "{file}: a fence is never closed");
    (blocks, indented)
}

/// Every block of every README.
fn all_blocks() -> Vec<Block> {
    let mut all = Vec::new();
    for path in readmes() {
        let file = path
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let (blocks, indented) = blocks_of(&file, &std::fs::read_to_string(&path).unwrap());
        assert!(
            indented.is_empty(),
            "{file}: indented code blocks at lines {indented:?}: fence them (```sh, ```text output, …) so each says how it is checked"
        );
        all.extend(blocks);
    }
    all
}

/// How `b` is run or checked, or `None` when nothing does it.
fn how_checked(b: &Block) -> Option<&'static str> {
    let marks: Vec<&str> = b.info.split_whitespace().skip(1).collect();
    if !marks.is_empty() {
        return marks
            .iter()
            .all(|m| MARKS.contains(m))
            .then_some("marked: shown, not run");
    }
    let lang = b.lang();
    let sdk = b
        .file
        .strip_prefix("guests/")
        .and_then(|f| f.strip_suffix("/README.md"));
    match (b.file.as_str(), lang) {
        ("README.md", _) if b.section.starts_with("Five-minute quickstart") => {
            Some("run by the_quickstart_builds_a_rust_actor_that_answers_as_the_readme_says")
        }
        ("README.md", "sh") if b.section == "The two commands" => {
            Some("each line is an executable script of the repository, syntax-checked")
        }
        ("README.md", "toml") => {
            Some("loaded and started by readme_toml_blocks_load_as_real_configs")
        }
        ("README.md", "text") if b.body.starts_with("$ sluice new ") => {
            Some("compared by readme_sluice_new_blocks_match_the_scaffold")
        }
        ("README.md", "text") if b.body.lines().all(|l| l.starts_with("sluice: ")) => {
            Some("compared by readme_run_output_matches_a_real_sluice_run")
        }
        ("README.md", "text") if b.section == "Layout" => Some("every path it names exists"),
        (f, "python" | "ts") if f.starts_with("examples/") => {
            Some("an excerpt of the example's source, whitespace aside")
        }
        (_, "sh") if b.body.starts_with("sluice new ") => {
            Some("compared by readme_sluice_new_blocks_match_the_scaffold")
        }
        (_, "sh") if sdk.is_some() => Some(SDK_SHELL),
        _ if matches!(
            (sdk, lang),
            (Some("go"), "go")
                | (Some("python"), "python")
                | (Some("typescript"), "ts")
                | (Some("rust"), "rust" | "toml")
        ) =>
        {
            Some("compiled and its unit tests run by scripts/lint-guests.sh readmes")
        }
        _ => None,
    }
}

/// A block's lines with every run of digits as `#` and runs of spaces as one: what real
/// output must match (times, sizes, ports and versions vary).
fn shape(line: &str) -> String {
    let mut out = String::new();
    for c in line
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
    {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn every_readme_code_block_is_run_checked_or_marked() {
    let blocks = all_blocks();
    assert!(
        blocks.len() > 40,
        "the walk found only {} blocks",
        blocks.len()
    );
    let unchecked: Vec<String> = blocks
        .iter()
        .filter(|b| how_checked(b).is_none())
        .map(|b| format!("{} ```{}", b.at(), b.info))
        .collect();
    assert!(
        unchecked.is_empty(),
        "blocks no test runs or checks (run them here, or mark them with one of {MARKS:?}): {unchecked:#?}"
    );

    // What needs no host is checked here.
    let lint = std::fs::read_to_string(root().join("scripts/lint-guests.sh")).unwrap();
    for b in &blocks {
        match how_checked(b).unwrap() {
            "each line is an executable script of the repository, syntax-checked" => {
                let scripts: Vec<&str> = b
                    .body
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .collect();
                assert!(!scripts.is_empty(), "{}", b.at());
                for s in scripts {
                    let path = root().join(
                        s.strip_prefix("./")
                            .unwrap_or_else(|| panic!("{}: {s} is not ./script", b.at())),
                    );
                    let mode = std::os::unix::fs::PermissionsExt::mode(
                        &std::fs::metadata(&path)
                            .unwrap_or_else(|e| panic!("{}: {s}: {e}", b.at()))
                            .permissions(),
                    );
                    assert!(mode & 0o111 != 0, "{}: {s} is not executable", b.at());
                    let ok = Command::new("bash").arg("-n").arg(&path).status().unwrap();
                    assert!(ok.success(), "{}: {s} does not parse", b.at());
                }
            }
            "every path it names exists" => {
                for l in b
                    .body
                    .lines()
                    .filter(|l| !l.starts_with(' ') && !l.is_empty())
                {
                    let p = l.split_whitespace().next().unwrap();
                    assert!(root().join(p).exists(), "{}: {p} does not exist", b.at());
                }
            }
            "an excerpt of the example's source, whitespace aside" => {
                let dir = root().join(Path::new(&b.file).parent().unwrap());
                let ext = if b.lang() == "ts" { "ts" } else { "py" };
                let mut source = String::new();
                for e in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
                    if e.path().extension().is_some_and(|x| x == ext) {
                        source.push_str(&std::fs::read_to_string(e.path()).unwrap());
                    }
                }
                let bare = |t: &str| t.split_whitespace().collect::<String>();
                assert!(
                    bare(&source).contains(&bare(&b.body)),
                    "{}: the excerpt is not in {}/*.{ext}",
                    b.at(),
                    dir.display()
                );
            }
            "compiled and its unit tests run by scripts/lint-guests.sh readmes" => {
                let call = format!("blocks {} {}", b.file, b.lang());
                assert!(
                    lint.contains(&call),
                    "{}: lint-guests.sh has no `{call}`",
                    b.at()
                );
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_toml_blocks_load_as_real_configs() {
    let blocks: Vec<Block> = all_blocks()
        .into_iter()
        .filter(|b| {
            b.file == "README.md"
                && b.lang() == "toml"
                && how_checked(b).is_some_and(|h| h.starts_with("loaded"))
        })
        .collect();
    assert!(blocks.len() >= 5, "{blocks:#?}");
    let echo = std::fs::read(rust_guest("echo")).unwrap();
    let cache = tempfile::tempdir().unwrap();
    for b in &blocks {
        let mut doc: toml::Table =
            toml::from_str(&b.body).unwrap_or_else(|e| panic!("{}: {e}", b.at()));
        if doc.contains_key("contexts") {
            // The CLI's config file: the target it names, as the CLI resolves it.
            let file = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(file.path(), &b.body).unwrap();
            let path = file.path().to_string_lossy().into_owned();
            let env = |k: &str| (k == "SLUICE_CONFIG").then(|| path.clone());
            let current = doc["current"].as_str().unwrap();
            for (api, key) in [
                (sluice_cli::target::Api::Admin, "admin"),
                (sluice_cli::target::Api::Ingress, "ingress"),
            ] {
                let t = sluice_cli::target::resolve_in(api, None, &env).unwrap();
                assert_eq!(
                    t.url,
                    doc["contexts"][current][key].as_str().unwrap(),
                    "{}",
                    b.at()
                );
                assert!(
                    t.source.starts_with(&format!("context {current} (")),
                    "{}: {t:?}",
                    b.at()
                );
            }
            continue;
        }
        // An app config: a child whose other keys the block elides (`# ...`) gets the echo
        // guest's; a type a subscription names but no child declares is the echo guest too.
        let dir = tempfile::tempdir().unwrap();
        let mut modules = Vec::new();
        let children = doc
            .entry("supervisor")
            .or_insert(toml::Table::new().into())
            .as_table_mut()
            .unwrap()
            .entry("children")
            .or_insert(toml::value::Array::new().into())
            .as_array_mut()
            .unwrap();
        for (i, c) in children.iter_mut().enumerate() {
            let c = c.as_table_mut().unwrap();
            c.entry("name").or_insert(format!("child-{i}").into());
            c.entry("actor_type").or_insert(format!("Type{i}").into());
            c.entry("module").or_insert("echo.wasm".into());
            modules.push(c["module"].as_str().unwrap().to_string());
        }
        let subscribed: Vec<String> = doc
            .get("bus")
            .and_then(|bus| bus.get("subscriptions"))
            .and_then(toml::Value::as_array)
            .map(|subs| {
                subs.iter()
                    .map(|s| s["actor_type"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default();
        let children = doc["supervisor"]["children"].as_array_mut().unwrap();
        for ty in subscribed {
            if !children
                .iter()
                .any(|c| c["actor_type"].as_str() == Some(&ty))
            {
                let mut c = toml::Table::new();
                c.insert("name".into(), ty.to_lowercase().into());
                c.insert("actor_type".into(), ty.clone().into());
                c.insert("module".into(), "echo.wasm".into());
                children.push(c.into());
                modules.push("echo.wasm".into());
            }
        }
        for m in &modules {
            std::fs::write(dir.path().join(m), &echo).unwrap();
        }
        let declared = children.len();
        let text = toml::to_string(&doc).unwrap();
        std::fs::write(dir.path().join("app-config.toml"), &text).unwrap();
        let cache_dir = cache.path().to_path_buf();
        let (host, app) =
            sluice_app::start(dir.path(), |cfg| cfg.cache_dir = Some(cache_dir.clone()))
                .await
                .unwrap_or_else(|e| {
                    panic!("{}: the block does not start a host: {e}\n{text}", b.at())
                });
        assert_eq!(app.supervisor.children.len(), declared, "{}", b.at());
        for c in &app.supervisor.children {
            assert_eq!(
                sluice_tests::type_status(&host, &c.actor_type).version,
                1,
                "{}: {}",
                b.at(),
                c.actor_type
            );
        }
        host.shutdown();
    }
}

#[test]
fn readme_sluice_new_blocks_match_the_scaffold() {
    let bin = sluice_binary("sluice-readme");
    let blocks = all_blocks();
    let mut compared = 0;
    for b in blocks.iter().filter(|b| {
        how_checked(b) == Some("compared by readme_sluice_new_blocks_match_the_scaffold")
    }) {
        let (shown, command) = match b.body.strip_prefix("$ ") {
            // The top README: the command and what it prints.
            Some(rest) => {
                let (cmd, out) = rest.split_once('\n').unwrap();
                (Some(out.to_string()), cmd.to_string())
            }
            // An SDK README: the command, then the next three it prints.
            None => (None, b.body.lines().next().unwrap().to_string()),
        };
        let args: Vec<&str> = command.split_whitespace().collect();
        let ["sluice", "new", lang, name] = args[..] else {
            panic!("{}: not `sluice new LANG NAME`: {command}", b.at())
        };
        let work = tempfile::tempdir().unwrap();
        let out = Command::new(&bin)
            .args(["new", lang, name])
            .current_dir(work.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}: {out:?}", b.at());
        let printed = String::from_utf8(out.stdout).unwrap();
        match shown {
            Some(shown) => assert_eq!(shown.trim_end(), printed.trim_end(), "{}", b.at()),
            None => {
                let next: Vec<String> = printed
                    .lines()
                    .skip_while(|l| *l != "next:")
                    .skip(1)
                    .map(shape)
                    .collect();
                // A shell comment (`# in another terminal: …`) is the README's own.
                let readme: Vec<String> = b
                    .body
                    .lines()
                    .skip(1)
                    .map(|l| shape(l.split(" #").next().unwrap()))
                    .collect();
                assert_eq!(
                    readme,
                    next,
                    "{}: the README's next commands drifted from the scaffold's",
                    b.at()
                );
            }
        }
        compared += 1;
    }
    assert_eq!(
        compared, 5,
        "the top README's and each SDK README's `sluice new` block"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_run_output_matches_a_real_sluice_run() {
    let blocks: Vec<Block> = all_blocks()
        .into_iter()
        .filter(|b| {
            how_checked(b) == Some("compared by readme_run_output_matches_a_real_sluice_run")
        })
        .collect();
    assert_eq!(
        blocks.len(),
        3,
        "the run, the second start and the console blocks: {blocks:#?}"
    );
    // The README's app: folder `app`, one type Counter from counter.wasm.
    let work = tempfile::tempdir().unwrap();
    let app = work.path().join("app");
    std::fs::create_dir(&app).unwrap();
    std::fs::copy(rust_guest("echo"), app.join("counter.wasm")).unwrap();
    std::fs::write(
        app.join("app-config.toml"),
        "[[supervisor.children]]\nname = \"counter\"\nactor_type = \"Counter\"\nmodule = \"counter.wasm\"\n",
    )
    .unwrap();
    let bin = sluice_binary("sluice-readme");
    let mut printed = Vec::new();
    for start in ["first", "second"] {
        let mut run = SluiceRun::start(&bin, &app, &[], &[]).await;
        wait_until(Duration::from_secs(120), "the ready line", || {
            run.stdout_has("sluice: ready: ")
        })
        .await;
        let lines: Vec<String> = run
            .stderr_lines()
            .into_iter()
            .chain(run.stdout_lines())
            // The README runs `sluice run app` from the folder holding it.
            .map(|l| shape(&l.replace(&app.display().to_string(), "app")))
            .collect();
        printed.push((start, lines));
        // Killed and waited for: the second start has the folder (and its outbox) to itself.
        run.kill();
    }
    let [(_, first), (_, second)] = &printed[..] else {
        unreachable!()
    };
    for b in &blocks {
        let cached = b.body.contains("] cached: ");
        let real = if cached { second } else { first };
        for line in b.body.lines() {
            let want = shape(line.split("  #").next().unwrap());
            assert!(
                real.contains(&want),
                "{}: `{line}` is not what a {} start prints: {real:#?}",
                b.at(),
                if cached { "second" } else { "first" }
            );
        }
    }
    assert!(
        !second.iter().any(|l| l.contains("] done: compiled ")),
        "a second start compiles nothing: {second:#?}"
    );
}

/// How the SDK READMEs' shell blocks are checked.
const SDK_SHELL: &str = "run from a checkout by sdk_shell_blocks";

/// The line of each SDK README's "Before you start" that builds the `sluice` command: the
/// test puts the binary the suite built on `PATH` instead (a `cargo build` of one package
/// here would compile the host again with other features).
const BUILD_SLUICE: &str = r#"cargo build -p sluice-cli && export PATH="$PWD/target/debug:$PATH""#;

/// Runs every `sh` block of `guests/LANG/README.md` as the reader would: in order, each in a
/// bash of its own (`set -euo pipefail`) started in a checkout, with `sluice` on `PATH`,
/// `path/to/actor` a project `sluice new LANG` made and `/path/to/sluice` that checkout.
///
/// The checkout is the real one seen through symlinks, so whatever a block writes at its top
/// (a built `actor.wasm`) stays in a temporary folder; `guests/python` is a copy, because
/// `pip install ./guests/python` builds in the source tree. Python blocks run in a virtual
/// environment (system packages visible) so `pip install` touches nothing outside it.
fn sdk_shell_blocks(lang: &str) {
    let file = format!("guests/{lang}/README.md");
    let blocks: Vec<Block> = all_blocks()
        .into_iter()
        .filter(|b| b.file == file && how_checked(b) == Some(SDK_SHELL))
        .collect();
    assert!(
        blocks.len() >= 3,
        "{file}: only {} shell blocks",
        blocks.len()
    );
    assert!(
        blocks[0].body.lines().any(|l| l.trim() == BUILD_SLUICE),
        "{file}: the first shell block builds sluice with `{BUILD_SLUICE}`"
    );

    let work = tempfile::tempdir().unwrap();
    let checkout = work.path().join("sluice");
    std::fs::create_dir_all(checkout.join("guests")).unwrap();
    for e in std::fs::read_dir(root()).unwrap().map(Result::unwrap) {
        let name = e.file_name();
        if name != "guests" && name != "target" {
            std::os::unix::fs::symlink(e.path(), checkout.join(&name)).unwrap();
        }
    }
    for e in std::fs::read_dir(root().join("guests"))
        .unwrap()
        .map(Result::unwrap)
    {
        let to = checkout.join("guests").join(e.file_name());
        if e.file_name() == "python" && lang == "python" {
            sluice_tests::copy_source_tree(&e.path(), &to);
        } else {
            std::os::unix::fs::symlink(e.path(), to).unwrap();
        }
    }
    let bin = work.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(sluice_binary("sluice-readme-sdk"), bin.join("sluice")).unwrap();
    let mut path = vec![bin];
    if lang == "python" {
        let venv = work.path().join("venv");
        sh(
            work.path(),
            &format!("python3 -m venv --system-site-packages {}", venv.display()),
        );
        path.push(venv.join("bin"));
    }
    path.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap()));
    let path = std::env::join_paths(path).unwrap();

    let projects = work.path().join("projects");
    std::fs::create_dir_all(&projects).unwrap();
    let made = Command::new(work.path().join("bin/sluice"))
        .args(["new", lang, "actor"])
        .current_dir(&projects)
        .output()
        .unwrap();
    assert!(made.status.success(), "sluice new {lang}: {made:?}");
    let actor = projects.join("actor");

    for b in &blocks {
        assert!(
            !b.body.contains("sluice run"),
            "{}: a host started in the background would outlive the block; `sluice run` \
             belongs to the `sluice new` block (compared with the scaffold, run by cli_new.rs)",
            b.at()
        );
        let script: String = b
            .body
            .lines()
            .filter(|l| l.trim() != BUILD_SLUICE)
            .collect::<Vec<_>>()
            .join("\n")
            .replace("/path/to/sluice", checkout.to_str().unwrap())
            .replace("path/to/actor", actor.to_str().unwrap());
        let t0 = std::time::Instant::now();
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .current_dir(&checkout)
            .env("PATH", &path)
            .env("PYTEST_ADDOPTS", "-p no:cacheprovider")
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("VIRTUAL_ENV")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: the block failed ({}):\n{script}\n--- stdout\n{}\n--- stderr\n{}",
            b.at(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // What the blocks install goes into the reader's project, never into the checkout's
        // own toolchains (an `npm install` of the SDK folder once pruned its jco).
        assert!(
            root()
                .join("guests/typescript/node_modules/@bytecodealliance/jco/package.json")
                .is_file(),
            "{}: the block removed guests/typescript/node_modules' jco",
            b.at()
        );
        eprintln!("{}: ran in {:.1} s", b.at(), t0.elapsed().as_secs_f64());
    }
}

mod sdk_shell_blocks {
    #[test]
    fn go() {
        super::sdk_shell_blocks("go")
    }
    #[test]
    fn python() {
        super::sdk_shell_blocks("python")
    }
    #[test]
    fn typescript() {
        super::sdk_shell_blocks("typescript")
    }
    #[test]
    fn rust() {
        super::sdk_shell_blocks("rust")
    }
}
