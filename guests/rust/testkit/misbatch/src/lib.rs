//! The `misbatch` test actor (guests/TESTKIT.md, Rust only): a guest that misuses the batched-turn
//! contract on purpose, written against the raw bindings instead of `sluice_guest::actor!`, so
//! the tests can show the host holds every message's guarantee against a guest that does not.
//! `arm` picks what the next `batch.run` does wrong; a fresh instance starts unarmed.
use std::cell::{Cell, RefCell};

use sluice_guest::bindings::exports::sluice::actor::{actor, batch};
use sluice_guest::bindings::sluice::actor::turns;
use sluice_guest::bindings::sluice::actor::types::ActorError;
use sluice_guest::{Envelope, Error};

thread_local! {
    /// Turns this instance ran through `handle`.
    static TURNS: Cell<u32> = const { Cell::new(0) };
    static ARMED: RefCell<String> = const { RefCell::new(String::new()) };
}

struct Misbatch;

fn reply(env: &Envelope) -> Vec<u8> {
    let n = TURNS.with(|t| t.get());
    format!("{n}:{}", String::from_utf8_lossy(&env.payload)).into_bytes()
}

impl actor::Guest for Misbatch {
    fn init(_config: String) -> Result<(), ActorError> {
        Ok(())
    }

    fn handle(env: Envelope) -> Result<Vec<u8>, ActorError> {
        TURNS.with(|t| t.set(t.get() + 1));
        match env.msg_type.as_str() {
            "arm" => {
                ARMED.with(|a| *a.borrow_mut() = String::from_utf8_lossy(&env.payload).into());
                Ok(reply(&env))
            }
            "hold" => {
                let ms = String::from_utf8_lossy(&env.payload)
                    .trim()
                    .parse()
                    .unwrap_or(0);
                std::thread::sleep(std::time::Duration::from_millis(ms));
                Ok(reply(&env))
            }
            // The import belongs to `batch.run`: the host traps this instance.
            "next-in-handle" => {
                let _ = turns::next(None);
                Ok(reply(&env))
            }
            "echo" => Ok(reply(&env)),
            other => Err(Error::invalid_argument(format!("unknown op {other}")).into()),
        }
    }
}

impl batch::Guest for Misbatch {
    fn run() {
        let armed = ARMED.with(|a| std::mem::take(&mut *a.borrow_mut()));
        match armed.as_str() {
            // A result before any turn was taken.
            "result-first" => {
                let _ = turns::next(Some(Ok(b"bogus".as_slice())));
            }
            // The running turn's result withheld while asking for the next message.
            "skip-result" => {
                let _ = turns::next(None);
                let _ = turns::next(None);
            }
            // A turn taken, then `run` returns without ending it.
            "return-early" => {
                let _ = turns::next(None);
            }
            _ => {
                let mut done: Option<Result<Vec<u8>, ActorError>> = None;
                while let Some(env) =
                    turns::next(done.as_ref().map(|r| r.as_ref().map(Vec::as_slice)))
                {
                    done = Some(<Misbatch as actor::Guest>::handle(env));
                }
            }
        }
    }
}

sluice_guest::bindings::export!(Misbatch);
