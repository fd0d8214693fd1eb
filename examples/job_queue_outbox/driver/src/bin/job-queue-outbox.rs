//! `job-queue-outbox [LANG...] [--work DIR] [--console ADDR [--console-token TOKEN]]`: runs
//! every job_queue_outbox scenario for every language given (default: rust go python
//! typescript), with progress on stderr, then prints one row per scenario and one column per
//! language, a legend and one overall line (`28/28 passed`). Exits non-zero if any invariant
//! failed; a language whose folder does not exist is a FAIL ("missing"), never skipped.

use std::path::PathBuf;
use std::time::Instant;

use job_queue_outbox::report::{self, Outcome};
use job_queue_outbox::{Lang, SCENARIOS, root, run_scenario};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut langs = Vec::new();
    let mut work = root().join("target/job-queue-outbox/work");
    let mut console = None;
    let mut console_token = std::env::var("SLUICE_ADMIN_TOKEN").ok();
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
            "--console-token" => {
                console_token = Some(
                    args.next()
                        .ok_or_else(|| anyhow::anyhow!("--console-token TOKEN"))?,
                )
            }
            "-h" | "--help" => {
                eprintln!(
                    "usage: job-queue-outbox [rust|go|python|typescript ...] [--work DIR] [--console ADDR]\n\
                     [--console-token TOKEN]\n\
                     Runs every scenario of examples/job_queue_outbox/PROTOCOL.md per language.\n\
                     --console ADDR serves the web console of the running scenario's host at\n\
                     http://ADDR/ui (e.g. 127.0.0.1:7401). An ADDR that is not loopback needs\n\
                     --console-token (or SLUICE_ADMIN_TOKEN), which every request must carry."
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
        match job_queue_outbox::serve_console(&addr, console_token).await {
            Ok(a) => eprintln!(
                "== console: http://{a}/ui (the host of the scenario that is running; each scenario starts a fresh one)"
            ),
            Err(e) => eprintln!("== console: not served ({e:#}); the scenarios run without it"),
        }
    }

    // results[scenario][lang]
    let mut results: Vec<Vec<Outcome>> = vec![Vec::new(); SCENARIOS.len()];
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
                    Outcome {
                        pass: false,
                        text: short,
                        detail: format!("{e:#}"),
                    }
                }
                Ok(_) => {
                    eprint!("   {lang:<10} {scenario:<20} ... ");
                    let t0 = Instant::now();
                    let r = run_scenario(lang, scenario, &work).await;
                    let secs = t0.elapsed().as_secs_f64();
                    match r {
                        Ok(v) => {
                            eprintln!("PASS ({secs:.1} s)");
                            Outcome {
                                pass: true,
                                text: report::cell(scenario, &v),
                                detail: v.to_string(),
                            }
                        }
                        Err(e) => {
                            eprintln!("FAIL ({secs:.1} s): {e:#}");
                            Outcome {
                                pass: false,
                                text: "see failures".into(),
                                detail: format!("{e:#}"),
                            }
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

    let columns: Vec<String> = langs.iter().map(|l| l.name().to_string()).collect();
    let title = format!(
        "job_queue_outbox: every scenario per language ({:.0} s)",
        started.elapsed().as_secs_f64()
    );
    println!(
        "{}",
        report::render(&title, &columns, &SCENARIOS, &results, report::LEGEND)
    );
    if results.iter().flatten().any(|o| !o.pass) {
        std::process::exit(1);
    }
    Ok(())
}
