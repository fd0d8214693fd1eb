//! The Rust SDK's side of the error contract: its codes, prefixes and error kinds match
//! `wit/errors.json` row for row, and a plain error becomes its `uncoded` form. Runs natively
//! (`cargo test -p sluice-guest`); no host import is called.

use serde_json::Value;
use sluice_guest::{CODES, Error, prefix};

fn contract() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../wit/errors.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("wit/errors.json")).expect("JSON")
}

#[test]
fn error_table_matches_wit_errors_json() {
    let c = contract();
    let want: Vec<(String, String, String)> = c["codes"]
        .as_array()
        .expect("codes")
        .iter()
        .map(|r| {
            (
                r["code"].as_str().unwrap().into(),
                r["name"].as_str().unwrap().into(),
                r["type"].as_str().unwrap().into(),
            )
        })
        .collect();
    let got: Vec<(String, String, String)> = CODES
        .iter()
        .map(|&code| {
            let e = Error::new(code, "x");
            (e.code_str().into(), prefix(code).into(), e.kind().into())
        })
        .collect();
    assert_eq!(got, want);
}

#[test]
fn messages_take_the_canonical_form() {
    let c = contract();
    let form = c["message_form"].as_str().unwrap();
    for code in CODES {
        let want = form
            .replace("{name}", prefix(code))
            .replace("{detail}", "d 7");
        assert_eq!(
            Error::canonical(code, format_args!("d {}", 7)).message,
            want
        );
    }
    let e = Error::uncoded(std::io::Error::other("boom"));
    assert_eq!(e.code_str(), c["uncoded"]["code"].as_str().unwrap());
    assert_eq!(
        e.message,
        c["uncoded"]["message"]
            .as_str()
            .unwrap()
            .replace("{message}", "boom")
    );
}
