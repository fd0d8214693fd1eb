//! The `loop` test actor: `ok` replies `alive`, anything else spins forever.
use sluice_guest::{Actor, Envelope, Error};

struct Loop;

impl Actor for Loop {
    fn init(_: &str) -> Result<Self, Error> {
        Ok(Loop)
    }
    fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> {
        if env.msg_type == "ok" {
            return Ok(b"alive".to_vec());
        }
        let mut x: u64 = 0;
        loop {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }
}

sluice_guest::actor!(Loop);
