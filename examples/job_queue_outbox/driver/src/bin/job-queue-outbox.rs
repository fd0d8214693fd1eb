//! `job-queue-outbox [LANG...] [--work DIR]`: runs every job_queue_outbox scenario for every
//! language given (default: rust go python typescript), with progress on stderr, then prints
//! one row per scenario and one column per language. Exits non-zero if any invariant failed;
//! a language whose folder does not exist is a FAIL ("missing"), never skipped.

use std::path::PathBuf;
use std::time::Instant;

use job_queue_outbox::{Lang, SCENARIOS, root, run_scenario, summary};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut langs = Vec::new();
    let mut work = root().join("target/job-queue-outbox/work");
    let mut console = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--work" => {
                work = PathBuf::from(args.next().ok_or_else(|| anyhow::anyhow!("--work DIR"))?)
            }
            "--console" => {
                console = Some(
                    args.next()
                        .ok_or_else(|| anyhow::anyhow!("--console ADDR"))?,
                )
            }
            "-h" | "--help" => {
                eprintln!(
                    "usage: job-queue-outbox [rust|go|python|typescript ...] [--work DIR] [--console ADDR]\n\
                     Runs every scenario of examples/job_queue_outbox/PROTOCOL.md per language.\n\
                     --console ADDR serves the web console of the running scenario's host at\n\
                     http://ADDR/ui (e.g. 127.0.0.1:7401)."
                );
                return Ok(());
            }
            other => langs.push(
                Lang::parse(other).ok_or_else(|| anyhow::anyhow!("unknown language {other}"))?,
            ),
        }
    }
    if langs.is_empty() {
        langs = Lang::ALL.to_vec();
    }
    std::fs::create_dir_all(&work)?;
    if let Some(addr) = console {
        // A taken port costs the picture, not the run.
        match job_queue_outbox::serve_console(&addr).await {
            Ok(a) => eprintln!(
                "== console: http://{a}/ui (the host of the scenario that is running; each scenario starts a fresh one)"
            ),
            Err(e) => eprintln!("== console: not served ({e:#}); the scenarios run without it"),
        }
    }

    // results[scenario][lang] = (pass, cell text, detail)
    let mut results: Vec<Vec<(bool, String, String)>> = vec![Vec::new(); SCENARIOS.len()];
    let started = Instant::now();
    for &lang in &langs {
        eprintln!("== {lang}: building examples/job_queue_outbox/{lang}");
        let built = tokio::task::block_in_place(|| job_queue_outbox::build(lang));
        for (i, scenario) in SCENARIOS.iter().enumerate() {
            let cell = match &built {
                Err(e) => {
                    let short = if e.to_string().starts_with("missing") {
                        "missing".to_string()
                    } else {
                        "build failed".to_string()
                    };
                    (false, short, format!("{e:#}"))
                }
                Ok(_) => {
                    eprint!("   {lang:<10} {scenario:<20} ... ");
                    let t0 = Instant::now();
                    let r = run_scenario(lang, scenario, &work).await;
                    let secs = t0.elapsed().as_secs_f64();
                    match r {
                        Ok(v) => {
                            eprintln!("PASS ({secs:.1} s)");
                            (true, summary(scenario, &v), v.to_string())
                        }
                        Err(e) => {
                            eprintln!("FAIL ({secs:.1} s): {e:#}");
                            (false, "invariant failed".into(), format!("{e:#}"))
                        }
                    }
                }
            };
            results[i].push(cell);
        }
        if let Err(e) = &built {
            eprintln!("   {lang}: FAIL: {e:#}");
        }
    }

    // The report: one row per scenario, one column per language.
    let width = 44;
    let mut out = String::new();
    out.push_str(&format!(
        "\njob_queue_outbox ({:.0} s)\n",
        started.elapsed().as_secs_f64()
    ));
    out.push_str(&format!("{:<20}", "scenario"));
    for l in &langs {
        out.push_str(&format!(" | {:<width$}", l.name()));
    }
    out.push('\n');
    out.push_str(&"-".repeat(20 + langs.len() * (width + 3)));
    out.push('\n');
    let mut failed = 0;
    for (i, scenario) in SCENARIOS.iter().enumerate() {
        out.push_str(&format!("{scenario:<20}"));
        for (pass, text, _) in &results[i] {
            if !pass {
                failed += 1;
            }
            let cell = format!("{} {text}", if *pass { "PASS" } else { "FAIL" });
            out.push_str(&format!(" | {cell:<width$}"));
        }
        out.push('\n');
    }
    out.push_str("\nreports:\n");
    for (i, scenario) in SCENARIOS.iter().enumerate() {
        for ((pass, _, detail), l) in results[i].iter().zip(&langs) {
            if *pass {
                out.push_str(&format!("  {l} {scenario}: {detail}\n"));
            }
        }
    }
    let failures: Vec<String> = SCENARIOS
        .iter()
        .enumerate()
        .flat_map(|(i, s)| {
            results[i]
                .iter()
                .zip(&langs)
                .filter(|((pass, _, _), _)| !pass)
                .map(move |((_, _, detail), l)| format!("  {l} {s}: {detail}"))
        })
        .collect();
    if !failures.is_empty() {
        out.push_str("\nfailures:\n");
        // A missing language fails all its scenarios with one reason: say it once.
        let mut seen = std::collections::BTreeSet::new();
        for f in failures {
            let key = f
                .split_once(": ")
                .map(|x| x.1.to_string())
                .unwrap_or_default();
            if key.starts_with("missing") && !seen.insert(key) {
                continue;
            }
            out.push_str(&f);
            out.push('\n');
        }
    }
    println!("{out}");
    if failed > 0 {
        eprintln!("job-queue-outbox: {failed} scenario run(s) failed");
        std::process::exit(1);
    }
    Ok(())
}
