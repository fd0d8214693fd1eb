//! The `crash` test actor: `ok` replies `alive`, `recurse` overflows the stack, anything else
//! panics. Both trap.
use sluice_guest::{Actor, Envelope, Error};

struct Crash;

/// Recursion the optimiser cannot turn into a loop: each frame keeps a buffer alive.
#[inline(never)]
#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    let buf = std::hint::black_box([depth; 64]);
    recurse(depth + 1) + buf[(depth % 64) as usize]
}

impl Actor for Crash {
    fn init(_: &str) -> Result<Self, Error> {
        Ok(Crash)
    }
    fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> {
        match env.msg_type.as_str() {
            "ok" => Ok(b"alive".to_vec()),
            "recurse" => Ok(recurse(0).to_string().into_bytes()),
            other => panic!("crash requested by {other}"),
        }
    }
}

sluice_guest::actor!(Crash);
