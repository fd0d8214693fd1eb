//! The `hog` test actor: `ok` replies `alive`, anything else allocates 1 MiB chunks forever.
use sluice_guest::{Actor, Envelope, Error};

struct Hog {
    chunks: Vec<Vec<u8>>,
}

impl Actor for Hog {
    fn init(_: &str) -> Result<Self, Error> {
        Ok(Hog { chunks: Vec::new() })
    }
    fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> {
        if env.msg_type == "ok" {
            return Ok(b"alive".to_vec());
        }
        loop {
            let mut chunk = vec![0u8; 1 << 20];
            // Touch every page so the memory is real, not just reserved.
            for i in (0..chunk.len()).step_by(4096) {
                chunk[i] = 1;
            }
            self.chunks.push(std::hint::black_box(chunk));
        }
    }
}

sluice_guest::actor!(Hog);
