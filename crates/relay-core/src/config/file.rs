//! The configuration file named by `RELAY_CONFIG`: relay settings, named sinks and routes.
//!
//! ```toml
//! [relay]                      # any RELAY_* setting, lower-cased without the prefix
//! max_clock_skew_secs = 300
//! hmac_keys = { "hca-dss:…" = "…" }
//!
//! [sinks.indexer]
//! type = "sqs"
//! queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/indexer.fifo"
//! message_group_id = "{match.bundle_uuid}"
//!
//! [[routes]]
//! name = "creates"
//! match = { event_type = ["CREATE"] }
//! to = ["indexer"]
//! ```
//!
//! Environment variables override `[relay]` settings. Sinks live either here or in the
//! variables, never both.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::KNOWN_VARS;
use crate::route::RouteSpec;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    /// Relay settings: the `RELAY_*` variables, lower-cased, without the prefix.
    #[serde(default)]
    relay: BTreeMap<String, toml::Value>,
    /// Named sinks.
    #[serde(default)]
    pub(crate) sinks: BTreeMap<String, SinkSpec>,
    /// Ordered routes.
    #[serde(default)]
    routes: Vec<RouteToml>,
}

/// Which destination a sink is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SinkKind {
    Sqs,
    Sns,
    Pubsub,
    File,
}

/// One `[sinks.<name>]` table. Which fields apply depends on `type`; the rest are refused.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SinkSpec {
    /// `sqs`, `sns`, `pubsub` or `file`.
    #[serde(rename = "type")]
    pub(crate) kind: SinkKind,
    /// SQS: the queue URL (a name ending in `.fifo` is FIFO).
    pub(crate) queue_url: Option<String>,
    /// SNS: the topic ARN.
    pub(crate) topic_arn: Option<String>,
    /// Pub/Sub: `projects/<project>/topics/<topic>`.
    pub(crate) topic: Option<String>,
    /// File: a path, or `-` for standard output.
    pub(crate) path: Option<String>,
    /// Body plus attributes above this get 413 (SQS, SNS, Pub/Sub; each has its default).
    pub(crate) max_message_bytes: Option<usize>,
    /// The relay attributes to send, by name (default: all, in priority order).
    pub(crate) attributes: Option<Vec<String>>,
    /// Static attributes added to every message.
    #[serde(default)]
    pub(crate) extra_attributes: BTreeMap<String, String>,
    /// FIFO queues and topics: the `MessageGroupId` template (default `{subscription_id}`).
    pub(crate) message_group_id: Option<String>,
    /// FIFO queues and topics: the `MessageDeduplicationId` template (default `{$dedup_key}`).
    pub(crate) message_deduplication_id: Option<String>,
    /// Pub/Sub: the ordering key template (default: no ordering key).
    pub(crate) ordering_key: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteToml {
    name: String,
    #[serde(rename = "match")]
    pattern: Option<toml::Value>,
    to: Vec<String>,
    #[serde(default)]
    stop: bool,
    #[serde(default)]
    fallback: bool,
}

impl FileConfig {
    /// Reads and parses the file; the error names the file and, from the TOML parser, the line.
    pub(crate) fn load(path: &str) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        let file: Self = toml::from_str(&text).map_err(|e| format!("{path}: {e}"))?;
        for name in file.relay.keys() {
            let var = format!("RELAY_{}", name.to_ascii_uppercase());
            if !KNOWN_VARS.contains(&var.as_str()) || name.to_ascii_lowercase() != *name {
                return Err(format!(
                    "{path}: [relay] {name} is not a relay setting (settings are the RELAY_* variables, lower-cased, without the prefix)"
                ));
            }
            if matches!(
                name.as_str(),
                "sqs_queue_url" | "sns_topic_arn" | "pubsub_topic" | "file_sink"
            ) {
                return Err(format!(
                    "{path}: [relay] {name}: put destinations under [sinks.<name>]"
                ));
            }
        }
        Ok(file)
    }

    /// The `[relay]` value for a `RELAY_*` variable, in the variable's text form.
    pub(crate) fn setting(&self, var: &str) -> Option<String> {
        let name = var.strip_prefix("RELAY_")?.to_ascii_lowercase();
        Some(match self.relay.get(&name)? {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => serde_json::to_string(other).ok()?,
        })
    }

    /// True when the file lists routes.
    pub(crate) fn has_routes(&self) -> bool {
        !self.routes.is_empty()
    }

    /// The routes, with patterns as JSON.
    pub(crate) fn routes(&self) -> Result<Vec<RouteSpec>, String> {
        self.routes
            .iter()
            .map(|r| {
                let pattern = match &r.pattern {
                    None => None,
                    Some(p) => Some(
                        serde_json::to_value(p)
                            .map_err(|e| format!("route {:?}, match: {e}", r.name))?,
                    ),
                };
                Ok(RouteSpec {
                    name: r.name.clone(),
                    pattern,
                    to: r.to.clone(),
                    stop: r.stop,
                    fallback: r.fallback,
                })
            })
            .collect()
    }
}
