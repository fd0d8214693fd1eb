//! The `probe` test actor: reports what of the outside world WASI lets it see — environment
//! variables, files and directories, stdout/stderr, the network — so tests can check that a guest gets
//! nothing unless its app config grants it.
use serde_json::{Value, json};
use sluice_guest::{Actor, Envelope, Error};

struct Probe;

fn outcome<T: Into<Value>>(r: std::io::Result<T>) -> Value {
    match r {
        Ok(v) => json!({"ok": true, "value": v.into()}),
        Err(e) => json!({"ok": false, "error": e.to_string()}),
    }
}

fn list(dir: &str) -> std::io::Result<Vec<String>> {
    let mut names = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<std::io::Result<Vec<_>>>()?;
    names.sort();
    Ok(names)
}

impl Actor for Probe {
    fn init(_config: &str) -> Result<Self, Error> {
        Ok(Probe)
    }

    fn handle(&mut self, env: Envelope) -> Result<Vec<u8>, Error> {
        let arg = String::from_utf8_lossy(&env.payload).into_owned();
        let reply = match env.msg_type.as_str() {
            "env" => Value::Object(
                std::env::vars()
                    .map(|(k, v)| (k, Value::String(v)))
                    .collect(),
            ),
            "read" => outcome(std::fs::read_to_string(&arg)),
            "list" => outcome(list(&arg)),
            // The payload is `path\ncontent`.
            "write" => {
                let (path, content) = arg.split_once('\n').unwrap_or((&arg, ""));
                outcome(std::fs::write(path, content).map(|()| Value::Null))
            }
            "connect" => outcome(std::net::TcpStream::connect(&arg).map(|_| Value::Null)),
            "print" => {
                println!("{arg} (stdout)");
                eprintln!("{arg} (stderr)");
                json!({"ok": true})
            }
            other => {
                return Err(Error::invalid_argument(format!(
                    "unknown message type {other}"
                )));
            }
        };
        Ok(reply.to_string().into_bytes())
    }
}

sluice_guest::actor!(Probe);
