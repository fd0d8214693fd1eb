//! The `batch` test actor (guests/TESTKIT.md): what the tests of batched turns queue behind a
//! held turn. `seq` numbers the turns this instance ran, so order and once-only delivery show
//! in the replies; `spin`, `trap` and `forever` fail one turn of a batch in each way.
use sluice_guest::{Actor, Envelope, Error};

struct Batch {
    seen: Vec<String>,
}

fn ms(env: &Envelope) -> u64 {
    std::str::from_utf8(&env.payload)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

impl Actor for Batch {
    fn init(_: &str) -> Result<Self, Error> {
        Ok(Batch { seen: Vec::new() })
    }

    fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> {
        match env.msg_type.as_str() {
            "hold" => {
                std::thread::sleep(std::time::Duration::from_millis(ms(&env)));
                Ok(env.payload)
            }
            "seq" => {
                self.seen
                    .push(String::from_utf8_lossy(&env.payload).into_owned());
                Ok(format!("{}:{}", self.seen.len(), self.seen.last().unwrap()).into_bytes())
            }
            "seen" => Ok(self.seen.join(",").into_bytes()),
            "spin" => {
                let until = std::time::Instant::now() + std::time::Duration::from_millis(ms(&env));
                let mut x: u64 = 0;
                while std::time::Instant::now() < until {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
                Ok(env.payload)
            }
            "trap" => panic!("trap requested"),
            "forever" => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            other => Err(Error::invalid_argument(format!("unknown op {other}"))),
        }
    }
}

sluice_guest::actor!(Batch);
