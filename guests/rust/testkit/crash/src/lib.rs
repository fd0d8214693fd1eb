//! The `crash` test actor: `ok` replies `alive`, `recurse` overflows the stack Rust keeps in
//! linear memory, `deep` overflows wasm's own call stack, anything else panics. All trap.
use sluice_guest::{Actor, Envelope, Error};

struct Crash;

/// Recursion the optimiser cannot turn into a loop: each frame keeps a buffer alive.
#[inline(never)]
#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    let buf = std::hint::black_box([depth; 64]);
    recurse(depth + 1) + buf[(depth % 64) as usize]
}

/// Recursion that keeps nothing in linear memory (no local has its address taken), so every
/// frame lives on wasm's own call stack and running off it is the engine's stack overflow.
/// `stop` comes from the payload, so the optimiser cannot bound the depth; the work after the
/// call keeps it from becoming a loop.
#[inline(never)]
fn deep(depth: u64, stop: u64) -> u64 {
    if depth == stop {
        return depth;
    }
    let below = deep(depth + 1, stop);
    below ^ (below >> 7) ^ depth
}

impl Actor for Crash {
    fn init(_: &str) -> Result<Self, Error> {
        Ok(Crash)
    }
    fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> {
        match env.msg_type.as_str() {
            "ok" => Ok(b"alive".to_vec()),
            "recurse" => Ok(recurse(0).to_string().into_bytes()),
            "deep" => {
                let stop = std::str::from_utf8(&env.payload)
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                    .unwrap_or(u64::MAX);
                Ok(deep(0, stop).to_string().into_bytes())
            }
            other => panic!("crash requested by {other}"),
        }
    }
}

sluice_guest::actor!(Crash);
