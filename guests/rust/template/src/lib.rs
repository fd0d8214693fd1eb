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
                Err(e) if e.code == ErrorCode::ResourceExhausted => Ok(format!(
                    r#"{{"busy":true,"retry_after_ms":{:?}}}"#,
                    e.retry_after_ms
                )
                .into_bytes()),
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

    fn env(msg_type: &str) -> Envelope {
        Envelope {
            sender: None,
            msg_type: msg_type.into(),
            payload: vec![],
            principal: "system".into(),
            deadline_ms: None,
        }
    }

    #[test]
    fn counts_and_refuses_unknown_types_in_the_canonical_form() {
        let mut a = MyActor::init("{}").unwrap();
        let e = a.handle(env("nope")).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument);
        assert_eq!(e.message, r#"INVALID_ARGUMENT: unknown msg-type "nope""#);
        assert_eq!(a.handle(env("count")).unwrap(), b"2");
    }
}
