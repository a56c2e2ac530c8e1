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
use std::time::SystemTime;

use serde::Deserialize;
use serde_json::Value;

use super::{ActiveSplit, matches_anything};
use crate::route::Pattern;
use crate::sink::{SinkConfig, SinkTable};

/// A moment, written in RFC 3339 (`2026-12-01T17:00:00Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(pub SystemTime);

impl std::str::FromStr for Timestamp {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        humantime::parse_rfc3339_weak(text.trim())
            .map(Self)
            .map_err(|e| format!("expected an RFC 3339 time such as 2026-12-01T17:00:00Z: {e}"))
    }
}

crate::text::deserialize_from_text!(Timestamp, "an RFC 3339 time");

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        humantime::format_rfc3339_seconds(self.0).fmt(f)
    }
}

/// A split as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitSpec {
    /// Unique name: `[A-Za-z0-9_-]`, at most 40 characters (it names created queues).
    pub name: String,
    /// What it takes: a route pattern, which must not match everything.
    #[serde(rename = "match")]
    pub pattern: Value,
    /// Where it sends what it takes: a sink table, as under `[sinks.<name>]`.
    pub to: SinkTable,
    /// Deliver to the routes as well.
    #[serde(default)]
    pub copy: bool,
    /// When it was registered: the earliest registered split wins where splits overlap.
    pub registered_at: Timestamp,
    /// When it stops taking notifications.
    pub expires_at: Timestamp,
    /// Its destination was created for it, and goes with it.
    #[serde(default)]
    pub created: bool,
}

/// The longest split name.
pub const MAX_NAME_CHARS: usize = 40;

impl SplitSpec {
    /// Checks the split and compiles its pattern.
    pub fn check(&self) -> Result<ActiveSplit, String> {
        let fail = |message: String| format!("split {:?}: {message}", self.name);
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
        if matches_anything(&pattern) {
            return Err(fail(
                "its match takes every notification; a split takes a slice of a shared stream, so give it a condition that some notifications fail".into(),
            ));
        }
        if self.expires_at <= self.registered_at {
            return Err(fail("it expires before it was registered".into()));
        }
        let sink = SinkConfig {
            name: format!("split:{}", self.name),
            target: self.to.target.clone(),
            selection: self.to.selection.clone(),
        };
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
