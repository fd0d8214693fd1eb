//! A Sluice actor in Rust. Build: `sluice build .` (or see guests/rust/README.md).

use sluice_guest::{Actor, Envelope, Error, ErrorCode, host};

pub struct MyActor {
    count: u64,
}

impl Actor for MyActor {
    /// `config` is the actor's `init` table from app-config.toml, as JSON.
    fn init(_config: &str) -> Result<Self, Error> {
        Ok(MyActor { count: 0 })
    }

    fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> {
        self.count += 1;
        match env.msg_type.as_str() {
            "ping" => {
                Ok(format!(r#"{{"pong":{},"at":{}}}"#, self.count, host::now_ms()).into_bytes())
            }
            "forward" => match host::ask("Worker/1", "process", &env.payload, 2000) {
                Err(e) if e.code == ErrorCode::ResourceExhausted => {
                    let retry = e
                        .retry_after_ms
                        .map_or("null".to_string(), |ms| ms.to_string());
                    Ok(format!(r#"{{"busy":true,"retry_after_ms":{retry}}}"#).into_bytes())
                }
                reply => reply,
            },
            "count" => Ok(self.count.to_string().into_bytes()),
            // Errors read `CODE: detail` (wit/errors.json); a plain error through
            // `.map_err(Error::uncoded)?` is INTERNAL, and a panic traps the instance.
            other => Err(Error::canonical(
                ErrorCode::InvalidArgument,
                format_args!("unknown msg-type {other:?}"),
            )),
        }
    }
}

sluice_guest::actor!(MyActor);

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_guest::testing::{Call, FakeHost};

    // `FakeHost` stands in for the host while it lives: it records the host calls the actor
    // makes (`fake.calls()`, `fake.logs()`), answers them from its settings, and fails the
    // next one on demand (`fake.fail_next`).

    #[test]
    fn ping_counts_and_reads_the_host_clock() {
        let fake = FakeHost::install();
        fake.set_now_ms(42);
        let mut a = MyActor::init("{}").unwrap();
        assert_eq!(
            fake.handle(&mut a, "ping", "").unwrap(),
            br#"{"pong":1,"at":42}"#
        );
        assert_eq!(
            fake.handle(&mut a, "ping", "").unwrap(),
            br#"{"pong":2,"at":42}"#
        );
    }

    #[test]
    fn forward_asks_the_worker_and_reports_a_full_mailbox() {
        let fake = FakeHost::install();
        fake.set_ask_reply(br#"{"done":true}"#);
        let mut a = MyActor::init("{}").unwrap();
        assert_eq!(
            fake.handle(&mut a, "forward", r#"{"job":1}"#).unwrap(),
            br#"{"done":true}"#
        );
        let ask = Call::Ask {
            to: "Worker/1".into(),
            msg_type: "process".into(),
            payload: br#"{"job":1}"#.to_vec(),
            timeout_ms: 2000,
        };
        assert_eq!(fake.calls(), [ask]);

        fake.fail_next(Error {
            retry_after_ms: Some(7),
            ..Error::canonical(ErrorCode::ResourceExhausted, "mailbox full")
        });
        assert_eq!(
            fake.handle(&mut a, "forward", "{}").unwrap(),
            br#"{"busy":true,"retry_after_ms":7}"#
        );
    }

    #[test]
    fn counts_and_refuses_unknown_types_in_the_canonical_form() {
        let fake = FakeHost::install();
        let mut a = MyActor::init("{}").unwrap();
        let e = fake.handle(&mut a, "nope", "").unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument);
        assert_eq!(e.message, r#"INVALID_ARGUMENT: unknown msg-type "nope""#);
        assert_eq!(fake.handle(&mut a, "count", "").unwrap(), b"2");
    }
}
