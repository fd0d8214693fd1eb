//! The trace context a message carries across actors and the outbox: a W3C `traceparent`
//! ([`TraceParent`], 26 bytes, `Copy`), and the two moves between it and a `tracing` span —
//! a span taking one up as its parent ([`set_parent`]) and a span's own context to send on
//! ([`of`]).
//!
//! Nothing here exports anything. The `sluice` binary installs an OpenTelemetry layer and an
//! OTLP exporter when it is asked to, and then calls [`enable`]; until then [`enabled`] is
//! false, every message's context is `None`, and the runtime creates no per-turn span at all
//! (one relaxed load per message is the whole cost).
#![warn(missing_docs)]

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Whether spans are exported (see [`enable`]).
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Turns trace propagation on for this process: messages carry their sender's span context
/// and turns, dispatches and relay attempts run in spans. Call it once an OpenTelemetry layer
/// is installed in the global `tracing` subscriber.
pub fn enable() {
    // Relaxed: a message sent just before the flag is seen simply carries no context.
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether [`enable`] was called.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// A W3C trace context (`traceparent`, version 00): the trace, the span that sent the
/// message, and the sampled flag.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    /// 16-byte trace id; never all zero.
    pub trace_id: [u8; 16],
    /// 8-byte id of the parent span; never all zero.
    pub span_id: [u8; 8],
    /// Trace flags (bit 0: sampled).
    pub flags: u8,
}

/// Why a `traceparent` string was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(&'static str);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid traceparent: {}", self.0)
    }
}

impl std::error::Error for ParseError {}

fn hex_into(s: &str, out: &mut [u8]) -> Result<(), ParseError> {
    let b = s.as_bytes();
    if b.len() != out.len() * 2 {
        return Err(ParseError("wrong field length"));
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => Err(ParseError("not lowercase hex")),
    };
    for (i, o) in out.iter_mut().enumerate() {
        *o = (nibble(b[2 * i])? << 4) | nibble(b[2 * i + 1])?;
    }
    Ok(())
}

impl FromStr for TraceParent {
    type Err = ParseError;

    /// `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`. A later version is read by its
    /// first four fields, as the W3C spec asks; version `ff` and all-zero ids are refused.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let s = s.trim();
        let mut parts = s.split('-');
        let (Some(v), Some(t), Some(p), Some(f)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(ParseError("expected version-traceid-spanid-flags"));
        };
        let mut version = [0u8; 1];
        hex_into(v, &mut version)?;
        if version[0] == 0xff || (version[0] == 0 && parts.next().is_some()) {
            return Err(ParseError("unsupported version"));
        }
        let mut tp = TraceParent {
            trace_id: [0; 16],
            span_id: [0; 8],
            flags: 0,
        };
        hex_into(t, &mut tp.trace_id)?;
        hex_into(p, &mut tp.span_id)?;
        let mut flags = [0u8; 1];
        hex_into(f, &mut flags)?;
        tp.flags = flags[0];
        if tp.trace_id == [0; 16] || tp.span_id == [0; 8] {
            return Err(ParseError("all-zero id"));
        }
        Ok(tp)
    }
}

struct Hex<'a>(&'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Display for TraceParent {
    /// The header form, `00-<trace id>-<span id>-<flags>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            Hex(&self.trace_id),
            Hex(&self.span_id),
            self.flags
        )
    }
}

impl fmt::Debug for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceParent({self})")
    }
}

impl TraceParent {
    /// The trace id as 32 lowercase hex digits.
    pub fn trace_id_hex(&self) -> String {
        Hex(&self.trace_id).to_string()
    }

    /// The span context this stands for, as received from elsewhere (remote).
    fn span_context(&self) -> SpanContext {
        SpanContext::new(
            TraceId::from_bytes(self.trace_id),
            SpanId::from_bytes(self.span_id),
            TraceFlags::new(self.flags),
            true,
            TraceState::default(),
        )
    }

    fn from_span_context(sc: &SpanContext) -> Option<Self> {
        sc.is_valid().then(|| TraceParent {
            trace_id: sc.trace_id().to_bytes(),
            span_id: sc.span_id().to_bytes(),
            flags: sc.trace_flags().to_u8(),
        })
    }
}

/// Makes `parent` the parent of `span`, which must not have been entered yet. Does nothing
/// when `parent` is `None`, the span is disabled, or no OpenTelemetry layer is installed
/// (the span then keeps its `tracing` parent).
pub fn set_parent(span: &tracing::Span, parent: Option<TraceParent>) {
    if let Some(p) = parent
        && !span.is_disabled()
    {
        let cx = opentelemetry::Context::new().with_remote_span_context(p.span_context());
        // Fails only without the layer or after the span started: either way it keeps the
        // parent it has, which is all we could do.
        let _ = span.set_parent(cx);
    }
}

/// The context of `span` to send with a message, so the receiver's span is its child.
/// `None` when propagation is off ([`enabled`]), the span is disabled, or no OpenTelemetry
/// layer gives it an id.
pub fn of(span: &tracing::Span) -> Option<TraceParent> {
    if !enabled() || span.is_disabled() {
        return None;
    }
    TraceParent::from_span_context(span.context().span().span_context())
}

/// The context of the current span ([`of`] of `Span::current()`).
pub fn current() -> Option<TraceParent> {
    if !enabled() {
        return None;
    }
    of(&tracing::Span::current())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_round_trips_through_its_header_form() {
        let tp: TraceParent = SAMPLE.parse().unwrap();
        assert_eq!(tp.to_string(), SAMPLE);
        assert_eq!(tp.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(tp.flags, 1);
        let sc = tp.span_context();
        assert_eq!(TraceParent::from_span_context(&sc), Some(tp));
    }

    #[test]
    fn malformed_traceparents_are_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert!(bad.parse::<TraceParent>().is_err(), "{bad:?} was accepted");
        }
        // A later version is read by its first four fields.
        let future = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more";
        assert!(future.parse::<TraceParent>().is_ok());
    }

    #[test]
    fn nothing_is_propagated_while_disabled() {
        let span = tracing::info_span!("turn");
        assert_eq!(of(&span), None);
        assert_eq!(current(), None);
    }
}
