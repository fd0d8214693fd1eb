//! The `crash` test actor: `ok` replies `alive`, anything else traps.
use sluice_guest::{Actor, Envelope, Error};

struct Crash;

impl Actor for Crash {
    fn init(_: &str) -> Result<Self, Error> {
        Ok(Crash)
    }
    fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> {
        if env.msg_type == "ok" {
            return Ok(b"alive".to_vec());
        }
        panic!("crash requested by {}", env.msg_type);
    }
}

sluice_guest::actor!(Crash);
