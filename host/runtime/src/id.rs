//! Actor addresses: `Type/key`, location-transparent (never a host name).

use std::fmt;
use std::sync::Arc;

use crate::error::ActorError;

/// A location-transparent actor address: `Type/key`. Never a host name.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ActorId {
    full: Arc<str>,
    split: usize,
}

impl ActorId {
    /// Parses and validates `Type/key`.
    pub fn parse(s: &str) -> Result<Self, ActorError> {
        let Some(split) = s.find('/') else {
            return Err(ActorError::invalid_argument(format!(
                "actor id {s:?} is not of the form Type/key"
            )));
        };
        validate_type_name(&s[..split]).map_err(ActorError::invalid_argument)?;
        let key = &s[split + 1..];
        if !is_short_printable(key) {
            return Err(ActorError::invalid_argument(format!(
                "actor key in {s:?} must be 1..=256 printable characters"
            )));
        }
        Ok(Self {
            full: Arc::from(s),
            split,
        })
    }

    /// Builds `Type/key` from parts.
    pub fn new(ty: &str, key: &str) -> Result<Self, ActorError> {
        Self::parse(&format!("{ty}/{key}"))
    }

    /// The actor type.
    pub fn actor_type(&self) -> &str {
        &self.full[..self.split]
    }

    /// The key within the type.
    pub fn key(&self) -> &str {
        &self.full[self.split + 1..]
    }

    /// The whole id.
    pub fn as_str(&self) -> &str {
        &self.full
    }
}

impl fmt::Display for ActorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full)
    }
}

impl fmt::Debug for ActorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ActorId({})", self.full)
    }
}

/// 1..=256 bytes, none of them part of a control character (Unicode `Cc`: C0, DEL, C1).
/// The rule for actor keys and message types: bounded for storage and logs, free of line
/// breaks and escapes, otherwise any text.
fn is_short_printable(s: &str) -> bool {
    !s.is_empty() && s.len() <= 256 && !s.chars().any(char::is_control)
}

/// Message types follow the rule for keys: 1..=256 bytes without control characters.
/// Checked wherever a message type enters: the ingress, the `Host` API, and a guest's
/// tell, ask, schedule, tell-reliable and dispatch.
pub fn validate_msg_type(msg_type: &str) -> Result<(), ActorError> {
    if is_short_printable(msg_type) {
        return Ok(());
    }
    // Never echo an oversize value: its length says enough.
    let got = match msg_type.len() {
        0 => "an empty one".to_string(),
        n if n > 256 => format!("{n} bytes"),
        _ => format!("{msg_type:?}"),
    };
    Err(ActorError::invalid_argument(format!(
        "msg_type must be 1..=256 bytes without control characters, got {got}"
    )))
}

/// Actor type names: 1..=64 of `[A-Za-z0-9_.-]`.
pub fn validate_type_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
    {
        return Err(format!(
            "actor type {name:?} must be 1..=64 characters of [A-Za-z0-9_.-]"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actor_ids_parse_type_and_key() {
        let id = ActorId::parse("Worker/worker-7").unwrap();
        assert_eq!(id.actor_type(), "Worker");
        assert_eq!(id.key(), "worker-7");
        assert_eq!(ActorId::parse("Worker/a/b").unwrap().key(), "a/b");
    }

    #[test]
    fn bad_actor_ids_are_invalid_argument() {
        for bad in ["Worker", "/k", "Wor ker/k", "Worker/", "Worker/\n"] {
            let e = ActorId::parse(bad).unwrap_err();
            assert_eq!(e.code, crate::error::ErrorCode::InvalidArgument, "{bad:?}");
        }
    }

    #[test]
    fn msg_types_are_1_to_256_bytes_without_control_characters() {
        for ok in [
            "echo",
            "a",
            "orders.created",
            "with space/slash",
            "é",
            &"x".repeat(256),
        ] {
            assert_eq!(validate_msg_type(ok), Ok(()), "{ok:?}");
        }
        // 128 two-byte characters are 256 bytes; one more is over.
        assert_eq!(validate_msg_type(&"é".repeat(128)), Ok(()));
        for (bad, got) in [
            (String::new(), "an empty one".to_string()),
            ("x".repeat(257), "257 bytes".to_string()),
            ("é".repeat(129), "258 bytes".to_string()),
            ("a\nb".to_string(), r#""a\nb""#.to_string()),
            ("tab\t".to_string(), r#""tab\t""#.to_string()),
            ("nul\0".to_string(), r#""nul\0""#.to_string()),
            ("del\u{7f}".to_string(), r#""del\u{7f}""#.to_string()),
            ("c1\u{85}".to_string(), r#""c1\u{85}""#.to_string()),
        ] {
            let e = validate_msg_type(&bad).unwrap_err();
            assert_eq!(e.code, crate::error::ErrorCode::InvalidArgument, "{bad:?}");
            assert_eq!(
                e.to_string(),
                format!(
                    "INVALID_ARGUMENT: msg_type must be 1..=256 bytes without control characters, got {got}"
                )
            );
        }
    }
}
