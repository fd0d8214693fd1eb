//! The event type carried by the bus, and the principal classes used as metric labels.

use std::sync::Arc;
use std::time::Instant;

/// The principal of anything published without one (runtime-internal events,
/// calls that arrived without an authenticated principal).
pub const SYSTEM_PRINCIPAL: &str = "system";

/// One published event. Shared as `Arc<Event>` by every receiver it reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Dot-separated topic, validated at publish.
    pub topic: Arc<str>,
    /// Opaque payload bytes.
    pub payload: Vec<u8>,
    /// Who published it; routed queues are per principal.
    pub principal: Arc<str>,
    /// The publishing actor (`Type/key`), if an actor published it.
    pub source: Option<Arc<str>>,
    /// Metric label of `sluice_bus_events_published_total` (bounded: chosen in code).
    pub kind: &'static str,
    /// Never evicted from a routed queue (replies, stream terminators, supervision).
    pub control: bool,
    /// Set by [`EventBus::publish`](crate::EventBus::publish) (`None` before);
    /// queueing delay is measured from here. Not set at construction so a
    /// publish reads the clock once.
    pub published_at: Option<Instant>,
    /// The publisher's trace context (the turn that published it), so each delivery is a
    /// span of the same trace. `None` when traces are off.
    pub trace: Option<sluice_trace::TraceParent>,
}

impl Event {
    /// An `ipc` event from the [`SYSTEM_PRINCIPAL`].
    pub fn new(topic: impl Into<Arc<str>>, payload: impl Into<Vec<u8>>) -> Self {
        Self {
            topic: topic.into(),
            payload: payload.into(),
            principal: Arc::from(SYSTEM_PRINCIPAL),
            source: None,
            kind: "ipc",
            control: false,
            published_at: None,
            trace: None,
        }
    }

    /// Sets the publishing principal.
    pub fn with_principal(mut self, principal: impl Into<Arc<str>>) -> Self {
        self.principal = principal.into();
        self
    }

    /// Sets the publishing actor.
    pub fn with_source(mut self, source: impl Into<Arc<str>>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Sets the publisher's trace context (`None`: untraced).
    pub fn with_trace(mut self, trace: Option<sluice_trace::TraceParent>) -> Self {
        self.trace = trace;
        self
    }

    /// Sets the metric kind label.
    pub fn with_kind(mut self, kind: &'static str) -> Self {
        self.kind = kind;
        self
    }

    /// Marks the event as a control message or stream terminator (never evicted).
    pub fn as_control(mut self) -> Self {
        self.control = true;
        self
    }

    /// Bytes charged against route budgets: payload bytes plus topic bytes,
    /// so a flood of empty payloads still costs something.
    pub fn cost(&self) -> usize {
        self.payload.len() + self.topic.len()
    }

    /// Time since publish at `now` (zero if not yet published).
    pub fn queued_for(&self, now: Instant) -> std::time::Duration {
        self.published_at.map_or(std::time::Duration::ZERO, |t| {
            now.saturating_duration_since(t)
        })
    }

    /// The metric class of the publisher.
    pub fn principal_class(&self) -> PrincipalClass {
        PrincipalClass::of(&self.principal)
    }
}

/// The bounded stand-in for a principal on metric labels.
///
/// Rule: `system` (or empty) is [`System`](Self::System); ids starting with
/// `agent:` or `agent.` are [`Agent`](Self::Agent); everything else is
/// [`User`](Self::User).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrincipalClass {
    /// The host itself.
    System,
    /// An automated agent.
    Agent,
    /// Anyone else.
    User,
}

impl PrincipalClass {
    /// All classes, in label-index order.
    pub const ALL: [PrincipalClass; 3] = [Self::System, Self::Agent, Self::User];

    /// Classifies a principal id.
    pub fn of(principal: &str) -> Self {
        if principal.is_empty() || principal == SYSTEM_PRINCIPAL {
            Self::System
        } else if principal.starts_with("agent:") || principal.starts_with("agent.") {
            Self::Agent
        } else {
            Self::User
        }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::Agent => "agent",
            Self::User => "user",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principal_class_rule() {
        assert_eq!(PrincipalClass::of("system"), PrincipalClass::System);
        assert_eq!(PrincipalClass::of(""), PrincipalClass::System);
        assert_eq!(PrincipalClass::of("agent:42"), PrincipalClass::Agent);
        assert_eq!(PrincipalClass::of("agent.x"), PrincipalClass::Agent);
        assert_eq!(PrincipalClass::of("agentsmith"), PrincipalClass::User);
        assert_eq!(PrincipalClass::of("alice"), PrincipalClass::User);
        assert_eq!(Event::new("a.b", vec![0; 10]).cost(), 13);
    }
}
