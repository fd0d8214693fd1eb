//! The host's side of the error contract: `ErrorCode` (its WIT names, canonical prefixes and
//! the ingress's HTTP statuses) matches `wit/errors.json`, row for row, and both match the
//! `error-code` enum of `wit/actor.wit`. Each SDK has the same test against the same file.

use std::path::PathBuf;

use serde_json::Value;
use sluice_runtime::{ActorError, ErrorCode};

fn wit_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../wit")
}

fn contract() -> Value {
    let path = wit_dir().join("errors.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).expect("wit/errors.json is JSON")
}

/// The case names of `enum error-code { .. }` in `wit/actor.wit`, in order.
fn wit_error_codes() -> Vec<String> {
    let wit = std::fs::read_to_string(wit_dir().join("actor.wit")).expect("wit/actor.wit");
    let body = wit
        .split("enum error-code {")
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .expect("actor.wit declares enum error-code");
    body.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .map(|l| l.trim_end_matches(',').to_string())
        .collect()
}

#[test]
fn error_codes_match_wit_errors_json() {
    let c = contract();
    let rows = c["codes"].as_array().expect("codes is a list");
    let table: Vec<(String, String, u16)> = rows
        .iter()
        .map(|r| {
            (
                r["code"].as_str().expect("code").to_string(),
                r["name"].as_str().expect("name").to_string(),
                r["http_status"].as_u64().expect("http_status") as u16,
            )
        })
        .collect();
    let host: Vec<(String, String, u16)> = ErrorCode::ALL
        .iter()
        .map(|c| {
            (
                c.as_str().to_string(),
                c.canonical().to_string(),
                c.http_status(),
            )
        })
        .collect();
    assert_eq!(host, table, "host ErrorCode vs wit/errors.json");
    let codes: Vec<String> = table.iter().map(|(c, ..)| c.clone()).collect();
    assert_eq!(
        codes,
        wit_error_codes(),
        "wit/errors.json vs actor.wit error-code"
    );
    for (code, name, _) in &table {
        assert_eq!(
            name,
            &code.replace('-', "_").to_uppercase(),
            "{code}: the prefix is the upper-snake WIT name"
        );
    }
}

#[test]
fn host_messages_take_the_canonical_form() {
    let c = contract();
    let form = c["message_form"].as_str().expect("message_form");
    for code in ErrorCode::ALL {
        let e = ActorError::new(code, "something");
        let want = form
            .replace("{name}", code.canonical())
            .replace("{detail}", "something");
        assert_eq!(e.to_string(), want);
    }
    // An uncoded failure is INTERNAL with its message.
    let uncoded = &c["uncoded"];
    assert_eq!(uncoded["code"], ErrorCode::Internal.as_str());
    assert_eq!(
        ActorError::internal("boom").to_string(),
        uncoded["message"]
            .as_str()
            .expect("uncoded.message")
            .replace("{message}", "boom")
    );
}
