//! The `slow` test actor: waits `payload` milliseconds (WASI clock), then replies the payload.
use sluice_guest::{Actor, Envelope, Error};

struct Slow;

impl Actor for Slow {
    fn init(_: &str) -> Result<Self, Error> {
        Ok(Slow)
    }
    fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> {
        if env.msg_type == "ok" {
            return Ok(b"alive".to_vec());
        }
        let ms: u64 = std::str::from_utf8(&env.payload)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100);
        std::thread::sleep(std::time::Duration::from_millis(ms));
        Ok(env.payload)
    }
}

sluice_guest::actor!(Slow);
