//! A `[[splits]]` entry: a developer's slice of the live stream, sent to their own destination
//! until it expires.
//!
//! ```toml
//! [[splits]]
//! name = "alice"
//! match = { match = { bundle_uuid = [{ prefix = "aa" }] } }
//! to = { type = "sqs", queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/relay-split-alice-3f9c" }
//! registered_at = "2026-12-01T09:00:00Z"
//! expires_at = "2026-12-01T17:00:00Z"
//! copy = false      # true: the routes get it too
//! created = true    # `relay split start --create` made the queue; `stop` and `gc` delete it
//! ```

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ActiveSplit, RoutesError, matches_anything};
use crate::route::Pattern;
use crate::sink::SinkSpec;

/// A moment, written in RFC 3339 (`2026-12-01T17:00:00Z`), which reaches from 1970 to the end
/// of 9999: a moment outside that range is written as the nearest end of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(pub SystemTime);

/// The latest moment RFC 3339 writes, 9999-12-31T23:59:59Z, in seconds since the epoch.
const LATEST_SECS: u64 = 253_402_300_799;

impl Timestamp {
    /// `start` plus `duration`, when that is a moment RFC 3339 writes (by the end of 9999).
    pub fn checked_after(start: SystemTime, duration: Duration) -> Option<Self> {
        let at = start.checked_add(duration)?;
        let secs = at.duration_since(UNIX_EPOCH).ok()?.as_secs();
        (secs <= LATEST_SECS).then_some(Self(at))
    }
}

impl std::str::FromStr for Timestamp {
    type Err = crate::text::InvalidValue;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        humantime::parse_rfc3339_weak(text.trim())
            .map(Self)
            .map_err(|e| {
                format!("expected an RFC 3339 time such as 2026-12-01T17:00:00Z: {e}").into()
            })
    }
}

crate::text::deserialize_from_text!(Timestamp, "an RFC 3339 time");
crate::text::serialize_as_text!(Timestamp);

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // humantime panics outside 1970..=9999; such a moment is written as the nearest end.
        let secs = self
            .0
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            .min(LATEST_SECS);
        humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).fmt(f)
    }
}

/// A split as written; it serializes to the same table (`copy` and `created` only when true).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SplitSpec {
    /// Unique name: `[A-Za-z0-9_-]`, at most 40 characters (it names created queues).
    pub name: String,
    /// What it takes: a route pattern, which must not match everything.
    #[serde(rename = "match")]
    pub pattern: Value,
    /// Where it sends what it takes: a sink table, as under `[sinks.<name>]`.
    pub to: SinkSpec,
    /// Deliver to the routes as well.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub copy: bool,
    /// When it was registered: the earliest registered split wins where splits overlap.
    pub registered_at: Timestamp,
    /// When it stops taking notifications.
    pub expires_at: Timestamp,
    /// Its destination was created for it, and goes with it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub created: bool,
    /// Match on `$request`, which no sender signs (`crate::route::UNSIGNED_REQUEST`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accept_unsigned: bool,
}

/// The longest split name.
pub(crate) const MAX_NAME_CHARS: usize = 40;

/// The longest a split lasts, from its registration to its expiry, unless
/// `RELAY_SPLIT_MAX_TTL_SECS` says otherwise: 7 days.
pub const DEFAULT_SPLIT_MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

impl SplitSpec {
    /// Checks the split and compiles its pattern; a split that lasts longer than `max_ttl` from
    /// its registration to its expiry is refused.
    pub fn check(&self, max_ttl: Duration) -> Result<ActiveSplit, RoutesError> {
        let fail = |message: String| RoutesError::Split {
            split: self.name.clone(),
            message,
        };
        let name_ok = !self.name.is_empty()
            && self.name.chars().count() <= MAX_NAME_CHARS
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !name_ok {
            return Err(fail(format!(
                "a name is 1 to {MAX_NAME_CHARS} letters, digits, hyphens or underscores"
            )));
        }
        let pattern = Pattern::compile(&self.pattern)
            .map_err(|e| fail(format!("{}: {}", e.at, e.message)))?;
        if pattern.uses_request() && !self.accept_unsigned {
            return Err(fail(format!("match {}", crate::route::UNSIGNED_REQUEST)));
        }
        if matches_anything(&pattern) {
            return Err(fail(
                "its match takes every notification; a split takes a slice of a shared stream, so give it a condition that some notifications fail".into(),
            ));
        }
        if self.expires_at <= self.registered_at {
            return Err(fail("it expires before it was registered".into()));
        }
        let lasts = self
            .expires_at
            .0
            .duration_since(self.registered_at.0)
            .unwrap_or_default();
        if lasts > max_ttl {
            return Err(fail(format!(
                "it lasts {} from its registration to its expiry; a split lasts at most {} (RELAY_SPLIT_MAX_TTL_SECS)",
                humantime::format_duration(lasts),
                humantime::format_duration(max_ttl)
            )));
        }
        let sink = self.to.named(&format!("split:{}", self.name));
        sink.target
            .shape(&sink.selection)
            .map_err(|e| fail(format!("to, {e}")))?;
        Ok(ActiveSplit {
            name: self.name.clone(),
            pattern,
            sink,
            copy: self.copy,
            expires_at: self.expires_at.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::StoredRoutes;

    /// Splits, with and without `copy`, to a created queue and to a file.
    const SPLITS: &str = r#"
[[splits]]
name = "alice"
match = { match = { bundle_uuid = [{ prefix = "aa" }] }, size = [{ numeric = [">", 1.5] }] }
to = { type = "sqs", queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/relay-split-alice-3f9c0a" }
registered_at = "2026-12-01T09:00:00Z"
expires_at = "2026-12-01T17:00:00Z"
copy = true
created = true

[[splits]]
name = "bob"
match = { event_type = ["CREATE"] }
to = { type = "file", path = "-" }
registered_at = "2026-12-01T09:30:00Z"
expires_at = "2026-12-01T10:00:00Z"
"#;

    #[test]
    fn a_stored_document_serializes_to_what_parses_back_equal() {
        // A document with every sink type, routes with and without a pattern, and splits.
        let document = format!("{}\n{SPLITS}", relay_testkit::config::EVERY_SINK_TYPE);
        let parsed = StoredRoutes::parse(&document).unwrap();
        assert_eq!(
            (parsed.sinks.len(), parsed.routes.len(), parsed.splits.len()),
            (4, 2, 2)
        );
        let written = toml::to_string(&parsed).unwrap();
        let again = StoredRoutes::parse(&written).unwrap_or_else(|e| panic!("{e}\n{written}"));
        assert_eq!(again, parsed, "{written}");
        assert_eq!(toml::to_string(&again).unwrap(), written);

        // The shape users write: tagged sinks, RFC 3339 times, integers, and no false flags.
        for line in [
            r#"type = "sqs""#,
            r#"type = "pubsub""#,
            r#"queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/dss.fifo""#,
            "max_message_bytes = 4096",
            r#"registered_at = "2026-12-01T09:00:00Z""#,
            r#"path = "-""#,
            r#"message_deduplication_id = "{$dedup_key}""#,
        ] {
            assert!(
                written.lines().any(|l| l.trim() == line),
                "{line}\n{written}"
            );
        }
        assert_eq!(written.matches("created = true").count(), 1, "{written}");
        for absent in ["= false", "emulator_host", "max_message_bytes = 1048576"] {
            assert!(!written.contains(absent), "{absent}\n{written}");
        }
    }

    #[test]
    fn defaults_written_out_parse_back_equal() {
        // The same sinks with every default spelled out read the same as without.
        let spelled = StoredRoutes::parse(
            "[sinks.q]\ntype = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/1/q\"\nmax_message_bytes = 1048576\nextra_attributes = {}\n",
        )
        .unwrap();
        let written = toml::to_string(&spelled).unwrap();
        assert_eq!(StoredRoutes::parse(&written).unwrap(), spelled, "{written}");
        assert!(!written.contains("max_message_bytes"), "{written}");
    }
}
