//! The driver's final report: one row per scenario, one column per language, in at most
//! [`MAX_COLUMNS`] columns, a legend for every abbreviation in the cells, and one overall line
//! (`28/28 passed`). `examples/rust/embedded/job_queue` prints the same format.

use serde_json::Value;

/// The scenarios, in the order the driver (and the embedded example) runs them.
pub const SCENARIOS: [&str; 7] = [
    "thundering_herd",
    "config_wave_deploy",
    "send_heartbeat",
    "heartbeat_burst",
    "telemetry_test",
    "offline_delivery",
    "poison_message",
];

/// The widest line the table and the legend print.
pub const MAX_COLUMNS: usize = 100;
/// Width of the scenario column (the longest name, `config_wave_deploy`).
const NAME_WIDTH: usize = 18;
/// Width of one language's cell: four of them and their separators fit in [`MAX_COLUMNS`].
pub const CELL_WIDTH: usize = 18;

/// One scenario run of one language.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Every invariant held.
    pub pass: bool,
    /// The key numbers ([`cell`]) when it passed; the short reason when it failed.
    pub text: String,
    /// The whole JSON report, or the whole error.
    pub detail: String,
}

/// A duration in ms as the cells show it: `41ms`, `0.9s`, `12s` (at most four characters).
pub fn fmt_ms(ms: u64) -> String {
    match ms {
        0..100 => format!("{ms}ms"),
        100..1000 => format!("{:.1}s", ms as f64 / 1000.0),
        1000..10_000 => format!("{:.1}s", ms as f64 / 1000.0),
        _ => format!("{}s", (ms + 500) / 1000),
    }
}

fn get(v: &Value, k: &str) -> String {
    match &v[k] {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        x => x.to_string(),
    }
}

fn ms(v: &Value, k: &str) -> String {
    v[k].as_u64().map_or_else(|| "-".into(), fmt_ms)
}

/// The key numbers of a scenario's JSON report, as [`LEGEND`] explains them. Fits in
/// [`CELL_WIDTH`] after the `ok ` of a passing cell.
pub fn cell(scenario: &str, v: &Value) -> String {
    let split = |v: &Value| format!("{}+{}", get(v, "delivered"), get(v, "queued"));
    match scenario {
        "thundering_herd" => format!("{} {}", split(v), ms(v, "wall_ms")),
        "config_wave_deploy" => format!(
            "{} cs{} {}",
            split(&v["total"]),
            get(v, "config_server_queued"),
            ms(v, "deploy_ms")
        ),
        "send_heartbeat" => format!("#{} {}", get(v, "seq"), split(v)),
        "heartbeat_burst" => format!("{} got{}", split(v), get(v, "processed")),
        "telemetry_test" => format!(
            "fast{} ob{}",
            get(v, "fast_path_success"),
            get(v, "outbox_fallback")
        ),
        "offline_delivery" => format!(
            "{} {}+{}",
            split(v),
            ms(v, "rollout_ms"),
            ms(v, "recovery_ms")
        ),
        "poison_message" => format!("{} tries {}", get(v, "attempts"), ms(v, "dead_ms")),
        _ => "?".into(),
    }
}

/// What every abbreviation in the cells means (each line within [`MAX_COLUMNS`]).
pub const LEGEND: &str = "\
legend:
  ok / FAIL    every invariant of the scenario held / one broke (the reason is under failures)
  N+M          a dispatch's split: N delivered at once, M queued in the outbox for the relay
               (receiver busy or at the limit); M is retried until delivered, not a failure
  12ms, 1.2s   thundering_herd: the leader's dispatch; config_wave_deploy: until every worker
               runs 2.1.0; poison_message: until the message is dead-lettered
  csN          config_wave_deploy: N config downloads queued (the two-slot servers were full)
  #N           send_heartbeat: the seq of the last of three heartbeats every worker ended on
  gotN         heartbeat_burst: heartbeats the busy leader processed of 50 (overwrite: 1-10)
  fastN obN    telemetry_test: of 200 samples, N asked directly, N sent through the outbox
               after the collector's four-slot mailbox refused them
  T1+T2        offline_delivery: the rollout's reply (then `sluice run` is SIGKILLed), then the
               restarted host's delivery of all 200 firmware messages in order
  N tries      poison_message: attempts before the DLQ (max_attempts); replayed once after the
               fix, delivered once
";

/// The table, the legend, the JSON report of each passing run, the failures, and the overall
/// line. `results[i]` holds scenario `scenarios[i]`'s outcome per column.
pub fn render(
    title: &str,
    columns: &[String],
    scenarios: &[&str],
    results: &[Vec<Outcome>],
    legend: &str,
) -> String {
    let mut out = format!("\n{title}\n");
    let mut line = format!("{:<NAME_WIDTH$}", "scenario");
    for c in columns {
        line.push_str(&format!("  {c:<CELL_WIDTH$}"));
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out.push_str(&"-".repeat(NAME_WIDTH + columns.len() * (CELL_WIDTH + 2)));
    out.push('\n');
    for (scenario, row) in scenarios.iter().zip(results) {
        let mut line = format!("{scenario:<NAME_WIDTH$}");
        for o in row {
            let text = if o.pass {
                format!("ok {}", o.text)
            } else {
                format!("FAIL {}", o.text)
            };
            line.push_str(&format!("  {text:<CELL_WIDTH$}"));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push('\n');
    out.push_str(legend);
    out.push_str("\nreports (JSON, per run):\n");
    for (scenario, row) in scenarios.iter().zip(results) {
        for (o, c) in row.iter().zip(columns) {
            if o.pass {
                out.push_str(&format!("  {c} {scenario}: {}\n", o.detail));
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut failures = String::new();
    for (scenario, row) in scenarios.iter().zip(results) {
        for (o, c) in row.iter().zip(columns) {
            // A missing language fails all its scenarios with one reason: say it once.
            if o.pass || (o.text == "missing" && !seen.insert(o.detail.clone())) {
                continue;
            }
            failures.push_str(&format!("  {c} {scenario}: {}\n", o.detail));
        }
    }
    if !failures.is_empty() {
        out.push_str("\nfailures:\n");
        out.push_str(&failures);
    }
    out.push('\n');
    out.push_str(&overall(results));
    out
}

/// The last line: `28/28 passed`, or `26/28 passed, 2 failed`.
pub fn overall(results: &[Vec<Outcome>]) -> String {
    let all: Vec<&Outcome> = results.iter().flatten().collect();
    let passed = all.iter().filter(|o| o.pass).count();
    let failed = all.len() - passed;
    if failed == 0 {
        format!("{passed}/{} passed", all.len())
    } else {
        format!("{passed}/{} passed, {failed} failed", all.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Reports with the widest numbers a run gives (even splits, three-digit counts, slow
    /// runs), for every scenario.
    fn widest() -> Vec<(&'static str, Value)> {
        vec![
            (
                "thundering_herd",
                json!({"delivered": 50, "queued": 50, "wall_ms": 99_999}),
            ),
            (
                "config_wave_deploy",
                json!({"total": {"delivered": 100, "queued": 0},
                "config_server_queued": 99, "deploy_ms": 880}),
            ),
            (
                "send_heartbeat",
                json!({"seq": 3, "delivered": 50, "queued": 50}),
            ),
            (
                "heartbeat_burst",
                json!({"delivered": 25, "queued": 25, "processed": 10}),
            ),
            (
                "telemetry_test",
                json!({"fast_path_success": 100, "outbox_fallback": 100}),
            ),
            (
                "offline_delivery",
                json!({"delivered": 0, "queued": 200, "rollout_ms": 99, "recovery_ms": 59_000}),
            ),
            ("poison_message", json!({"attempts": 5, "dead_ms": 99_999})),
        ]
    }

    #[test]
    fn the_table_and_legend_of_four_languages_fit_in_100_columns() {
        let rows = widest();
        let names: Vec<&str> = rows.iter().map(|(s, _)| *s).collect();
        let results: Vec<Vec<Outcome>> = rows
            .iter()
            .map(|(s, v)| {
                let c = cell(s, v);
                assert!(c.len() + 3 <= CELL_WIDTH, "{s}: {c:?} is too wide");
                vec![
                    Outcome {
                        pass: true,
                        text: c,
                        detail: v.to_string(),
                    };
                    4
                ]
            })
            .collect();
        let cols: Vec<String> = ["rust", "go", "python", "typescript"]
            .map(String::from)
            .to_vec();
        let text = render("t", &cols, &names, &results, LEGEND);
        let (table, _) = text.split_once("reports (JSON").unwrap();
        for l in table.lines() {
            assert!(l.chars().count() <= MAX_COLUMNS, "{} columns: {l}", l.len());
        }
        assert!(
            table.contains("thundering_herd     ok 50+50 100s"),
            "{table}"
        );
        assert_eq!(text.lines().last(), Some("28/28 passed"));
    }

    #[test]
    fn the_legend_explains_every_abbreviation_a_cell_uses() {
        for (s, v) in widest() {
            for word in cell(s, &v).split([' ', '+']) {
                let abbrev: String = word.chars().filter(|c| c.is_ascii_alphabetic()).collect();
                let explained = match abbrev.as_str() {
                    "" => LEGEND.contains("N+M"),
                    "ms" | "s" => LEGEND.contains("12ms, 1.2s"),
                    a => LEGEND.contains(&format!("  {a}N")) || LEGEND.contains(&format!(" {a}")),
                };
                assert!(explained, "{s}: {word:?} is not in the legend");
            }
        }
    }

    #[test]
    fn durations_take_at_most_four_characters() {
        for (ms, text) in [
            (10, "10ms"),
            (99, "99ms"),
            (880, "0.9s"),
            (1216, "1.2s"),
            (59_000, "59s"),
        ] {
            assert_eq!(fmt_ms(ms), text);
        }
    }

    #[test]
    fn the_overall_line_counts_failures() {
        let ok = Outcome {
            pass: true,
            text: String::new(),
            detail: String::new(),
        };
        let bad = Outcome {
            pass: false,
            ..ok.clone()
        };
        assert_eq!(overall(&[vec![ok.clone(), bad]]), "1/2 passed, 1 failed");
        assert_eq!(overall(&[vec![ok.clone(), ok]]), "2/2 passed");
    }
}
