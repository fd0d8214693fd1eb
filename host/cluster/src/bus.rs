//! The event bus across hosts: a NATS subject per topic, and the envelope of a published event.
//!
//! Topic `a.b.c` is subject `sluice.<cluster>.bus.a.b.c`: each segment is one NATS token
//! (escaped with [`escape_token`] when it holds anything but `[A-Za-z0-9_-]`, so `>`, spaces or
//! non-ASCII never act as NATS syntax). Subscription patterns map their wildcards onto NATS's
//! with the same meaning: a `*` segment in the middle is NATS `*` (exactly one token); a
//! trailing `*` (one or more further segments) is NATS `>`; `*` alone is `bus.>`. Fairness
//! (DRR per principal), byte budgets and rate limits stay in each host's local bus; this module
//! only carries events between hosts.

use bytes::Bytes;
use futures_util::StreamExt;
use sluice_flow::topic::{TopicError, TopicPattern, validate_topic};

use crate::connect::Connection;
use crate::metrics;
use crate::names::{MAX_NODE_ID, Names, escape_token, unescape_token};
use crate::transport::codec::{Reader, Writer};
use crate::transport::{
    DecodeError, KIND_EVENT, MAX_ID_BYTES, MAX_PRINCIPAL_BYTES, read_header, write_header,
};

/// Why a bus operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BusError {
    /// The topic or pattern breaks the topic grammar (`INVALID_ARGUMENT`).
    #[error(transparent)]
    Topic(#[from] TopicError),
    /// The payload is over the limit.
    #[error("INVALID_ARGUMENT: payload of {len} bytes exceeds max_payload_bytes={max}")]
    TooLarge {
        /// Its size.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// NATS refused or is unreachable.
    #[error("cluster: bus {op} failed: {reason}")]
    Nats {
        /// The operation.
        op: &'static str,
        /// The client's reason.
        reason: String,
    },
    /// A received message is not a bus event of this cluster.
    #[error("cluster: malformed bus event: {0}")]
    Decode(#[from] DecodeError),
    /// A received subject is not a topic of this cluster.
    #[error("cluster: subject {0:?} is not a bus topic")]
    Subject(String),
}

/// The NATS subject of publish topic `topic`.
pub fn topic_subject(names: &Names, topic: &str) -> Result<String, TopicError> {
    validate_topic(topic)?;
    let mut s = names.bus_prefix();
    for seg in topic.split('.') {
        s.push('.');
        s.push_str(&escape_token(seg));
    }
    Ok(s)
}

/// The NATS subject filter of subscription pattern `pattern`.
pub fn pattern_subject(names: &Names, pattern: &str) -> Result<String, TopicError> {
    TopicPattern::parse(pattern)?;
    let segments: Vec<&str> = pattern.split('.').collect();
    let mut s = names.bus_prefix();
    for (i, seg) in segments.iter().enumerate() {
        s.push('.');
        match *seg {
            "*" if i + 1 == segments.len() => s.push('>'),
            "*" => s.push('*'),
            seg => s.push_str(&escape_token(seg)),
        }
    }
    Ok(s)
}

/// The topic a bus subject stands for, if it is one of this cluster's.
pub fn subject_topic(names: &Names, subject: &str) -> Option<String> {
    let rest = subject
        .strip_prefix(&names.bus_prefix())?
        .strip_prefix('.')?;
    let segs: Option<Vec<String>> = rest.split('.').map(unescape_token).collect();
    let topic = segs?.join(".");
    validate_topic(&topic).ok().map(|_| topic)
}

/// One published event as it travels between hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusEvent {
    /// The topic (from the subject).
    pub topic: String,
    /// Who published it (the bus's per-principal fairness key).
    pub principal: String,
    /// The publishing actor (`Type/key`), if an actor published it.
    pub publisher: Option<String>,
    /// The publishing host's node id (a host skips its own events: it delivered them locally).
    pub origin: String,
    /// The payload.
    pub payload: Bytes,
}

fn encode(e: &BusEvent) -> Bytes {
    let mut w = Writer::with_capacity(16 + e.origin.len() + e.principal.len() + e.payload.len());
    write_header(&mut w, KIND_EVENT);
    w.str(&e.origin);
    w.str(&e.principal);
    w.str(e.publisher.as_deref().unwrap_or(""));
    w.bytes(&e.payload);
    w.buf.into()
}

/// Decodes an event received on `subject` within `max_payload` bytes of payload.
pub fn decode_event(
    names: &Names,
    subject: &str,
    frame: &Bytes,
    max_payload: usize,
) -> Result<BusEvent, BusError> {
    let topic = subject_topic(names, subject).ok_or_else(|| BusError::Subject(subject.into()))?;
    let mut r = Reader::new(frame);
    read_header(&mut r, KIND_EVENT)?;
    let origin = r.str("origin", MAX_NODE_ID)?;
    let principal = r.str("principal", MAX_PRINCIPAL_BYTES)?;
    let publisher = r.str("publisher", MAX_ID_BYTES)?;
    let payload = r.bytes("payload", max_payload)?;
    r.finish()?;
    Ok(BusEvent {
        topic,
        principal,
        publisher: (!publisher.is_empty()).then_some(publisher),
        origin,
        payload,
    })
}

/// Publishes and subscribes bus events over NATS for one host.
#[derive(Clone, Debug)]
pub struct Bus {
    conn: Connection,
    max_payload: usize,
}

impl Bus {
    /// The bus of `conn`'s cluster; payloads over `max_payload` bytes are refused both ways.
    pub fn new(conn: &Connection, max_payload: usize) -> Self {
        Self {
            conn: conn.clone(),
            max_payload,
        }
    }

    /// Publishes to every host subscribed to a pattern covering `topic`.
    pub async fn publish(
        &self,
        topic: &str,
        principal: &str,
        publisher: Option<&str>,
        payload: Bytes,
    ) -> Result<(), BusError> {
        if payload.len() > self.max_payload {
            return Err(BusError::TooLarge {
                len: payload.len(),
                max: self.max_payload,
            });
        }
        let subject = topic_subject(self.conn.names(), topic)?;
        let frame = encode(&BusEvent {
            topic: topic.to_string(),
            principal: principal.to_string(),
            publisher: publisher.map(str::to_string),
            origin: self.conn.node_id().to_string(),
            payload,
        });
        self.conn
            .client()
            .publish(subject, frame)
            .await
            .map_err(|e| BusError::Nats {
                op: "publish",
                reason: e.to_string(),
            })?;
        metrics::bus_event("out");
        Ok(())
    }

    /// Events of other hosts on topics covered by `pattern`. Malformed messages come out as
    /// errors (the stream goes on); this host's own events are skipped.
    pub async fn subscribe(
        &self,
        pattern: &str,
    ) -> Result<impl futures_util::Stream<Item = Result<BusEvent, BusError>> + use<>, BusError>
    {
        let filter = pattern_subject(self.conn.names(), pattern)?;
        let sub = self
            .conn
            .client()
            .subscribe(filter)
            .await
            .map_err(|e| BusError::Nats {
                op: "subscribe",
                reason: e.to_string(),
            })?;
        // Events published after this returns reach the subscription.
        self.conn
            .round_trip()
            .await
            .map_err(|reason| BusError::Nats {
                op: "subscribe",
                reason,
            })?;
        let names = self.conn.names().clone();
        let me = self.conn.node_id().to_string();
        let max = self.max_payload;
        Ok(sub.filter_map(move |msg| {
            let decoded = decode_event(&names, &msg.subject, &msg.payload, max);
            let out = match decoded {
                Ok(e) if e.origin == me => None,
                Ok(e) => {
                    metrics::bus_event("in");
                    Some(Ok(e))
                }
                Err(e) => {
                    metrics::decode_error("event");
                    Some(Err(e))
                }
            };
            std::future::ready(out)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        Names::new("c").unwrap()
    }

    #[test]
    fn topics_map_segment_per_token() {
        let n = names();
        assert_eq!(
            topic_subject(&n, "orders.eu.new").unwrap(),
            "sluice.c.bus.orders.eu.new"
        );
        assert_eq!(
            topic_subject(&n, "a b.>.é").unwrap(),
            "sluice.c.bus.a=20b.=3E.=C3=A9"
        );
        for t in ["orders.eu.new", "a b.>.é", "x"] {
            assert_eq!(
                subject_topic(&n, &topic_subject(&n, t).unwrap()).as_deref(),
                Some(t)
            );
        }
        assert!(topic_subject(&n, "a.*").is_err());
        assert!(topic_subject(&n, "a..b").is_err());
        assert_eq!(subject_topic(&n, "sluice.other.bus.a"), None);
    }

    #[test]
    fn wildcards_keep_their_meaning() {
        let n = names();
        assert_eq!(pattern_subject(&n, "a.*.c").unwrap(), "sluice.c.bus.a.*.c");
        assert_eq!(pattern_subject(&n, "a.b.*").unwrap(), "sluice.c.bus.a.b.>");
        assert_eq!(pattern_subject(&n, "*").unwrap(), "sluice.c.bus.>");
        assert_eq!(pattern_subject(&n, "*.x").unwrap(), "sluice.c.bus.*.x");
        assert!(pattern_subject(&n, "a.b*").is_err());
    }

    #[test]
    fn events_round_trip_and_garbage_is_a_typed_error() {
        let n = names();
        let e = BusEvent {
            topic: "a.b".into(),
            principal: "alice".into(),
            publisher: Some("Pub/1".into()),
            origin: "h1".into(),
            payload: Bytes::from_static(b"hello"),
        };
        let subject = topic_subject(&n, "a.b").unwrap();
        assert_eq!(decode_event(&n, &subject, &encode(&e), 100).unwrap(), e);
        assert!(matches!(
            decode_event(&n, &subject, &encode(&e), 4),
            Err(BusError::Decode(DecodeError::TooLong { .. }))
        ));
        assert!(matches!(
            decode_event(&n, &subject, &Bytes::from_static(b"junk"), 100),
            Err(BusError::Decode(_))
        ));
        assert!(matches!(
            decode_event(&n, "elsewhere", &encode(&e), 100),
            Err(BusError::Subject(_))
        ));
    }
}
