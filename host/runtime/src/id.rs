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
        if key.is_empty() || key.len() > 256 || key.chars().any(char::is_control) {
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
}
