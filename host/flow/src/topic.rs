//! Topic validation and subscription-pattern matching for the event bus.
//!
//! A topic is a dot-separated list of non-empty segments, at most
//! [`MAX_TOPIC_SEGMENTS`] of them (a DoS guard: matching never splits an
//! unbounded string). A pattern uses the same grammar plus `*` segments:
//!
//! | pattern  | matches                                   | does not match      |
//! |----------|-------------------------------------------|---------------------|
//! | `a.b.c`  | `a.b.c` only (equal segment count)        | `a.b`, `a.b.c.d`    |
//! | `a.*.c`  | exactly one segment in that position      | `a.c`, `a.x.y.c`    |
//! | `a.b.*`  | **one or more** further segments: `a.b.c`, `a.b.c.d` | `a.b` |
//! | `*`      | every valid topic                         |                     |
//!
//! A `*` in the last position is the namespace (trailing) wildcard; a `*`
//! anywhere else stands for exactly one segment. Following the seed, the
//! trailing form does not match the bare prefix (`a.b.*` ∌ `a.b`): subscribe
//! to `a.b` as well if you want it. `*` must be a whole segment (`a.b*` is
//! rejected), and a publish topic may not contain `*` at all.
//!
//! Both the broadcast and the routed path use [`TopicPattern`], so the two
//! agree on what a subscription covers.

use std::fmt;

/// Most dot-separated segments a topic or pattern may have.
pub const MAX_TOPIC_SEGMENTS: usize = 20;

/// Why a topic or pattern was refused. Every variant maps to the
/// `INVALID_ARGUMENT` error code guests see.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopicError {
    /// The string is empty.
    #[error("INVALID_ARGUMENT: topic is empty")]
    Empty,
    /// Two dots in a row, or a leading/trailing dot.
    #[error("INVALID_ARGUMENT: topic segment {index} is empty")]
    EmptySegment {
        /// Zero-based position of the empty segment.
        index: usize,
    },
    /// More than [`MAX_TOPIC_SEGMENTS`] segments.
    #[error("INVALID_ARGUMENT: topic has more than {max} segments", max = MAX_TOPIC_SEGMENTS)]
    TooDeep,
    /// A publish topic contained `*`, or a pattern used `*` inside a segment.
    #[error("INVALID_ARGUMENT: '*' is only allowed as a whole segment of a subscription pattern")]
    MisplacedWildcard,
}

impl TopicError {
    /// The canonical error code carried across the guest boundary.
    pub fn code(&self) -> &'static str {
        "INVALID_ARGUMENT"
    }
}

/// Checks the shared grammar; `allow_wildcard` distinguishes patterns from topics.
/// Returns the segment count.
fn check(s: &str, allow_wildcard: bool) -> Result<usize, TopicError> {
    if s.is_empty() {
        return Err(TopicError::Empty);
    }
    let mut count = 0;
    for (index, seg) in s.split('.').enumerate() {
        // Stop before counting further: a hostile 1 MB topic of dots costs
        // at most 21 iterations here.
        if index >= MAX_TOPIC_SEGMENTS {
            return Err(TopicError::TooDeep);
        }
        if seg.is_empty() {
            return Err(TopicError::EmptySegment { index });
        }
        if seg.contains('*') && !(allow_wildcard && seg == "*") {
            return Err(TopicError::MisplacedWildcard);
        }
        count = index + 1;
    }
    Ok(count)
}

/// Validates a publish topic: non-empty segments, no `*`, at most
/// [`MAX_TOPIC_SEGMENTS`] segments.
pub fn validate_topic(topic: &str) -> Result<(), TopicError> {
    check(topic, false).map(|_| ())
}

/// A parsed subscription pattern. Cheap to match: no allocation per call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPattern {
    raw: Box<str>,
    /// The last segment is `*` (namespace wildcard: one or more segments).
    trailing: bool,
    /// Segment count including a trailing `*`.
    segments: usize,
}

impl TopicPattern {
    /// Parses and validates a pattern.
    pub fn parse(pattern: &str) -> Result<Self, TopicError> {
        let segments = check(pattern, true)?;
        let trailing = pattern == "*" || pattern.ends_with(".*");
        Ok(Self {
            raw: pattern.into(),
            trailing,
            segments,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// Whether `topic` is covered by this pattern. A topic that is itself
    /// invalid (empty segments, too deep) never matches.
    pub fn matches(&self, topic: &str) -> bool {
        let mut topic_segs = topic.split('.');
        let mut pat_segs = self.raw.split('.');
        let fixed = if self.trailing {
            self.segments - 1
        } else {
            self.segments
        };
        // Compare the fixed-position prefix segment by segment.
        for _ in 0..fixed {
            let (Some(p), Some(t)) = (pat_segs.next(), topic_segs.next()) else {
                return false;
            };
            if t.is_empty() || (p != "*" && p != t) {
                return false;
            }
        }
        // The remainder must be empty (exact) or 1..=MAX-fixed non-empty
        // segments (trailing wildcard).
        let mut rest = 0;
        for t in topic_segs {
            rest += 1;
            if t.is_empty() || fixed + rest > MAX_TOPIC_SEGMENTS {
                return false;
            }
        }
        if self.trailing { rest >= 1 } else { rest == 0 }
    }
}

impl fmt::Display for TopicPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl std::str::FromStr for TopicPattern {
    type Err = TopicError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        TopicPattern::parse(p).unwrap().matches(t)
    }

    fn deep(n: usize) -> String {
        vec!["s"; n].join(".")
    }

    #[test]
    fn exact_pattern_matches_only_equal_segment_count() {
        assert!(m("a.b.c", "a.b.c"));
        assert!(!m("a.b.c", "a.b"));
        assert!(!m("a.b.c", "a.b.c.d"));
        assert!(!m("a.b.c", "a.b.x"));
        assert!(m("a", "a"));
    }

    #[test]
    fn mid_wildcard_matches_exactly_one_segment() {
        assert!(m("a.*.c", "a.b.c"));
        assert!(m("a.*.c", "a.zz.c"));
        assert!(!m("a.*.c", "a.c"));
        assert!(!m("a.*.c", "a.b.b.c"));
        assert!(!m("a.*.c", "a.b.d"));
        assert!(m("*.b", "x.b"));
        assert!(!m("*.b", "b"));
    }

    #[test]
    fn trailing_wildcard_matches_one_or_more_segments_but_not_the_prefix() {
        assert!(m("a.b.*", "a.b.c"));
        assert!(m("a.b.*", "a.b.c.d.e"));
        assert!(!m("a.b.*", "a.b"));
        assert!(!m("a.b.*", "a.x.c"));
        assert!(m("*", "anything"));
        assert!(m("*", "any.thing.at.all"));
        assert!(m("a.*.c.*", "a.b.c.d.e"));
        assert!(!m("a.*.c.*", "a.b.c"));
    }

    #[test]
    fn empty_segments_are_rejected_in_topics_and_patterns() {
        assert_eq!(validate_topic(""), Err(TopicError::Empty));
        assert_eq!(
            validate_topic("a..b"),
            Err(TopicError::EmptySegment { index: 1 })
        );
        assert_eq!(
            validate_topic(".a"),
            Err(TopicError::EmptySegment { index: 0 })
        );
        assert_eq!(
            validate_topic("a."),
            Err(TopicError::EmptySegment { index: 1 })
        );
        assert!(TopicPattern::parse("a..*").is_err());
        assert!(TopicPattern::parse("").is_err());
        // Invalid topics never match, even a catch-all.
        assert!(!m("*", "a..b"));
        assert!(!m("a.*", "a."));
    }

    #[test]
    fn wildcards_must_be_whole_segments_and_absent_from_publish_topics() {
        assert_eq!(validate_topic("a.*"), Err(TopicError::MisplacedWildcard));
        assert_eq!(
            TopicPattern::parse("a.b*"),
            Err(TopicError::MisplacedWildcard)
        );
        assert_eq!(
            TopicPattern::parse("a.**"),
            Err(TopicError::MisplacedWildcard)
        );
    }

    #[test]
    fn depth_limit_is_twenty_segments_on_both_topics_and_patterns() {
        assert!(validate_topic(&deep(20)).is_ok());
        assert_eq!(validate_topic(&deep(21)), Err(TopicError::TooDeep));
        assert!(TopicPattern::parse(&deep(20)).is_ok());
        assert_eq!(TopicPattern::parse(&deep(21)), Err(TopicError::TooDeep));
        assert_eq!(
            TopicPattern::parse(&format!("{}.*", deep(20))),
            Err(TopicError::TooDeep)
        );
        // A trailing wildcard never admits a topic past the limit.
        assert!(m("s.*", &deep(20)));
        assert!(!m("s.*", &deep(21)));
        assert!(!m("*", &deep(21)));
        // A 100k-dot topic is refused without walking all of it.
        assert_eq!(
            validate_topic(&".".repeat(100_000)),
            Err(TopicError::EmptySegment { index: 0 })
        );
        assert_eq!(validate_topic(&deep(50_000)), Err(TopicError::TooDeep));
        assert_eq!(TopicError::TooDeep.code(), "INVALID_ARGUMENT");
        assert_eq!(
            TopicError::TooDeep.to_string(),
            "INVALID_ARGUMENT: topic has more than 20 segments"
        );
    }
}
