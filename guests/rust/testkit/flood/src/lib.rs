//! The `flood` test actor: tells `count` messages to `to` as fast as it can and reports.
use serde_json::{Value, json};
use sluice_guest::{Actor, Envelope, Error, TellReceipt, host};

struct Flood;

impl Actor for Flood {
    fn init(_: &str) -> Result<Self, Error> {
        Ok(Flood)
    }
    fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> {
        if env.msg_type == "ok" {
            return Ok(b"alive".to_vec());
        }
        let req: Value = serde_json::from_slice(&env.payload)
            .map_err(|e| Error::invalid_argument(e.to_string()))?;
        let to = req["to"].as_str().unwrap_or("");
        let msg_type = req["msg_type"].as_str().unwrap_or("echo");
        let count = req["count"].as_u64().unwrap_or(0);
        let (mut queued, mut displaced, mut dropped, mut refused) = (0u64, 0u64, 0u64, 0u64);
        let mut first: Option<Error> = None;
        for i in 0..count {
            match host::tell(to, msg_type, i.to_string()) {
                Ok(TellReceipt::Queued) => queued += 1,
                Ok(TellReceipt::DisplacedOldest) => displaced += 1,
                Ok(TellReceipt::DroppedNewest) => dropped += 1,
                Err(e) => {
                    refused += 1;
                    first.get_or_insert(e);
                }
            }
        }
        Ok(json!({"queued": queued, "displaced": displaced, "dropped": dropped, "refused": refused,
            "first_error": first.as_ref().map(|e| e.message.clone()),
            "first_error_type": first.as_ref().map(|e| e.kind())})
        .to_string()
        .into_bytes())
    }
}

sluice_guest::actor!(Flood);
