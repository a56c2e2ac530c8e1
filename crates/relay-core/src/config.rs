//! Configuration from `RELAY_*` environment variables, validated once at start.
//!
//! Every problem is reported at once, each naming its variable. The relay fails closed: no key
//! and no explicit `RELAY_ALLOW_UNSIGNED=true`, or no sink, and it does not start.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::sink::FileTarget;
use crate::verify::{KeyRing, Secret};

/// Every variable the relay reads. Any other `RELAY_*` variable is reported as unknown.
pub const KNOWN_VARS: &[&str] = &[
    "RELAY_HMAC_KEYS",
    "RELAY_HMAC_SECRET",
    "RELAY_ALLOW_UNSIGNED",
    "RELAY_MAX_CLOCK_SKEW_SECS",
    "RELAY_MAX_BODY_BYTES",
    "RELAY_PAYLOAD_FIELD",
    "RELAY_FILE_SINK",
    "RELAY_LOG_FORMAT",
    // Read by the relay-gcf server.
    "RELAY_LISTEN",
    // Read by `relay send`.
    "RELAY_SEND_SECRET",
];

/// Default for `RELAY_MAX_BODY_BYTES`: 1 MiB, the SQS message limit.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// Default for `RELAY_MAX_CLOCK_SKEW_SECS`.
pub const DEFAULT_MAX_CLOCK_SKEW_SECS: u64 = 300;
/// Default for `RELAY_PAYLOAD_FIELD`, the DSS default `payload_form_field`.
pub const DEFAULT_PAYLOAD_FIELD: &str = "payload";

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line (the default on Lambda and Cloud Run).
    Json,
    /// Human-readable lines (the default elsewhere).
    Text,
}

/// The relay's validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `RELAY_HMAC_KEYS` (a JSON object `{"<keyId>": "<secret>"}`) and `RELAY_HMAC_SECRET` (one
    /// secret for any keyId). Secrets are used as their UTF-8 bytes, never base64-decoded.
    pub keys: KeyRing,
    /// `RELAY_ALLOW_UNSIGNED`: accept requests without an `Authorization` header. Off by
    /// default; with no key at all it turns verification off entirely.
    pub allow_unsigned: bool,
    /// `RELAY_MAX_CLOCK_SKEW_SECS`: largest accepted distance between the request's `Date` and
    /// the relay's clock, either way (default 300; `0` turns the check off, shown as `None`).
    pub max_clock_skew: Option<Duration>,
    /// `RELAY_MAX_BODY_BYTES`: largest request body accepted; larger ones get 413 without being
    /// read further (default 1048576).
    pub max_body_bytes: usize,
    /// `RELAY_PAYLOAD_FIELD`: the multipart form field holding the JSON payload, the
    /// subscription's `payload_form_field` (default `payload`).
    pub payload_field: String,
    /// `RELAY_FILE_SINK`: append one JSON line per notification to this path, or `-` for stdout.
    pub file_sink: Option<FileTarget>,
    /// `RELAY_LOG_FORMAT`: `json` or `text`; defaults to `json` on Lambda and Cloud Run.
    pub log_format: LogFormat,
}

/// One invalid setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}: {message}")]
pub struct ConfigError {
    /// The variable at fault.
    pub var: &'static str,
    /// What is wrong with it.
    pub message: String,
}

/// Every problem found in one configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid configuration:")?;
        for e in &self.0 {
            write!(f, "\n  - {e}")?;
        }
        Ok(())
    }
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigErrors> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads variables through `var`, so tests and tools need not touch the process environment.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigErrors> {
        let mut errors = Vec::new();
        let mut fail =
            |var: &'static str, message: String| errors.push(ConfigError { var, message });

        let named = match var("RELAY_HMAC_KEYS") {
            None => BTreeMap::new(),
            Some(raw) => match parse_keys(&raw) {
                Ok(keys) => keys,
                Err(message) => {
                    fail("RELAY_HMAC_KEYS", message);
                    BTreeMap::new()
                }
            },
        };
        let any = match var("RELAY_HMAC_SECRET") {
            Some(s) if s.is_empty() => {
                fail("RELAY_HMAC_SECRET", "is set but empty".into());
                None
            }
            other => other.map(Secret::new),
        };
        let keys = KeyRing::new(named, any);

        let allow_unsigned = parse_or(
            "RELAY_ALLOW_UNSIGNED",
            var("RELAY_ALLOW_UNSIGNED"),
            false,
            parse_bool,
            &mut fail,
        );
        let skew_secs = parse_or(
            "RELAY_MAX_CLOCK_SKEW_SECS",
            var("RELAY_MAX_CLOCK_SKEW_SECS"),
            DEFAULT_MAX_CLOCK_SKEW_SECS,
            |s| {
                s.parse::<u64>().map_err(|_| {
                    "expected a whole number of seconds (0 turns the check off)".into()
                })
            },
            &mut fail,
        );
        let max_body_bytes = parse_or(
            "RELAY_MAX_BODY_BYTES",
            var("RELAY_MAX_BODY_BYTES"),
            DEFAULT_MAX_BODY_BYTES,
            |s| match s.parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err("expected a positive number of bytes".into()),
            },
            &mut fail,
        );
        let payload_field = match var("RELAY_PAYLOAD_FIELD") {
            None => DEFAULT_PAYLOAD_FIELD.to_owned(),
            Some(s) if s.is_empty() || s.contains('"') => {
                fail(
                    "RELAY_PAYLOAD_FIELD",
                    "expected a non-empty form field name without quotes".into(),
                );
                DEFAULT_PAYLOAD_FIELD.to_owned()
            }
            Some(s) => s,
        };
        let file_sink = match var("RELAY_FILE_SINK") {
            None => None,
            Some(s) if s.is_empty() => {
                fail(
                    "RELAY_FILE_SINK",
                    "is set but empty; give a path, or - for stdout".into(),
                );
                None
            }
            Some(s) if s == "-" => Some(FileTarget::Stdout),
            Some(s) => Some(FileTarget::Path(PathBuf::from(s))),
        };
        let on_platform = var("AWS_LAMBDA_FUNCTION_NAME").is_some() || var("K_SERVICE").is_some();
        let log_format = parse_or(
            "RELAY_LOG_FORMAT",
            var("RELAY_LOG_FORMAT"),
            if on_platform {
                LogFormat::Json
            } else {
                LogFormat::Text
            },
            |s| match s {
                "json" => Ok(LogFormat::Json),
                "text" => Ok(LogFormat::Text),
                _ => Err("expected json or text".into()),
            },
            &mut fail,
        );

        if keys.is_empty() && !allow_unsigned {
            fail(
                "RELAY_HMAC_KEYS",
                "no HMAC key is configured: set RELAY_HMAC_KEYS or RELAY_HMAC_SECRET (or, to accept unsigned notifications, RELAY_ALLOW_UNSIGNED=true)".into(),
            );
        }
        if file_sink.is_none() {
            fail(
                "RELAY_FILE_SINK",
                "no sink is configured: set RELAY_FILE_SINK to a path, or - for stdout".into(),
            );
        }

        if !errors.is_empty() {
            return Err(ConfigErrors(errors));
        }
        Ok(Self {
            keys,
            allow_unsigned,
            max_clock_skew: (skew_secs > 0).then(|| Duration::from_secs(skew_secs)),
            max_body_bytes,
            payload_field,
            file_sink,
            log_format,
        })
    }

    /// `RELAY_*` names among `names` that the relay does not know, most likely typos.
    pub fn unknown_vars(names: impl IntoIterator<Item = String>) -> Vec<String> {
        names
            .into_iter()
            .filter(|n| n.starts_with("RELAY_") && !KNOWN_VARS.contains(&n.as_str()))
            .collect()
    }

    /// The effective settings as `(variable, value)` pairs, secrets masked, for `relay check`.
    pub fn effective(&self) -> Vec<(&'static str, String)> {
        let keys: BTreeMap<&str, &str> = self.keys.key_ids().map(|id| (id, "****")).collect();
        vec![
            (
                "RELAY_HMAC_KEYS",
                serde_json::to_string(&keys).unwrap_or_default(),
            ),
            (
                "RELAY_HMAC_SECRET",
                if self.keys.has_catch_all() {
                    "****"
                } else {
                    "(unset)"
                }
                .into(),
            ),
            ("RELAY_ALLOW_UNSIGNED", self.allow_unsigned.to_string()),
            (
                "RELAY_MAX_CLOCK_SKEW_SECS",
                self.max_clock_skew
                    .map_or("0 (check off)".into(), |d| d.as_secs().to_string()),
            ),
            ("RELAY_MAX_BODY_BYTES", self.max_body_bytes.to_string()),
            ("RELAY_PAYLOAD_FIELD", self.payload_field.clone()),
            (
                "RELAY_FILE_SINK",
                self.file_sink
                    .as_ref()
                    .map_or("(unset)".into(), ToString::to_string),
            ),
            (
                "RELAY_LOG_FORMAT",
                match self.log_format {
                    LogFormat::Json => "json",
                    LogFormat::Text => "text",
                }
                .into(),
            ),
        ]
    }
}

fn parse_or<T>(
    name: &'static str,
    raw: Option<String>,
    default: T,
    parse: impl Fn(&str) -> Result<T, String>,
    fail: &mut impl FnMut(&'static str, String),
) -> T {
    match raw {
        None => default,
        Some(s) => match parse(s.trim()) {
            Ok(v) => v,
            Err(message) => {
                fail(name, format!("{message}, got {s:?}"));
                default
            }
        },
    }
}

fn parse_bool(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(true),
        "false" | "0" | "no" | "" => Ok(false),
        _ => Err("expected true or false".into()),
    }
}

fn parse_keys(raw: &str) -> Result<BTreeMap<String, Secret>, String> {
    // Deliberately no echo of the input: it holds secrets.
    let map: BTreeMap<String, serde_json::Value> = serde_json::from_str(raw)
        .map_err(|_| "expected a JSON object of {\"<keyId>\": \"<secret>\"}".to_owned())?;
    map.into_iter()
        .map(|(id, secret)| match secret {
            serde_json::Value::String(s) if !s.is_empty() && !id.is_empty() => {
                Ok((id, Secret::new(s)))
            }
            _ => Err(format!(
                "the key {id:?} must have a non-empty string secret and a non-empty keyId"
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigErrors> {
        let vars: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Config::from_vars(|name| vars.get(name).cloned())
    }

    fn vars_of(err: ConfigErrors) -> Vec<&'static str> {
        err.0.into_iter().map(|e| e.var).collect()
    }

    #[test]
    fn defaults_with_one_key_and_a_sink() {
        let c = config(&[("RELAY_HMAC_SECRET", "s"), ("RELAY_FILE_SINK", "-")]).unwrap();
        assert_eq!(c.max_body_bytes, 1_048_576);
        assert_eq!(c.max_clock_skew, Some(Duration::from_secs(300)));
        assert_eq!(c.payload_field, "payload");
        assert!(!c.allow_unsigned);
        assert_eq!(c.file_sink, Some(FileTarget::Stdout));
        assert_eq!(c.log_format, LogFormat::Text);
    }

    #[test]
    fn fails_closed_without_keys() {
        let err = config(&[("RELAY_FILE_SINK", "-")]).unwrap_err();
        assert_eq!(vars_of(err), ["RELAY_HMAC_KEYS"]);
        let c = config(&[("RELAY_FILE_SINK", "-"), ("RELAY_ALLOW_UNSIGNED", "true")]).unwrap();
        assert!(c.allow_unsigned && c.keys.is_empty());
    }

    #[test]
    fn reports_every_bad_variable_by_name() {
        let err = config(&[
            ("RELAY_HMAC_KEYS", "not json"),
            ("RELAY_MAX_BODY_BYTES", "0"),
            ("RELAY_MAX_CLOCK_SKEW_SECS", "-1"),
            ("RELAY_ALLOW_UNSIGNED", "maybe"),
            ("RELAY_LOG_FORMAT", "xml"),
            ("RELAY_PAYLOAD_FIELD", ""),
        ])
        .unwrap_err();
        let text = err.to_string();
        assert_eq!(
            vars_of(err),
            [
                "RELAY_HMAC_KEYS",
                "RELAY_ALLOW_UNSIGNED",
                "RELAY_MAX_CLOCK_SKEW_SECS",
                "RELAY_MAX_BODY_BYTES",
                "RELAY_PAYLOAD_FIELD",
                "RELAY_LOG_FORMAT",
                "RELAY_HMAC_KEYS",
                "RELAY_FILE_SINK",
            ]
        );
        assert!(
            !text.contains("not json"),
            "secrets are never echoed: {text}"
        );
    }

    #[test]
    fn keys_rotate_and_are_masked() {
        let c = config(&[
            (
                "RELAY_HMAC_KEYS",
                r#"{"old": "s3cret-1", "new": "s3cret-2"}"#,
            ),
            ("RELAY_MAX_CLOCK_SKEW_SECS", "0"),
            ("RELAY_FILE_SINK", "/tmp/x.jsonl"),
        ])
        .unwrap();
        assert_eq!(c.keys.key_ids().collect::<Vec<_>>(), ["new", "old"]);
        assert_eq!(c.max_clock_skew, None);
        let shown = format!("{:?}", c.effective());
        assert!(
            shown.contains(r#"{\"new\":\"****\",\"old\":\"****\"}"#),
            "{shown}"
        );
        assert!(!shown.contains("s3cret") && !format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn rejects_empty_secrets() {
        let err = config(&[
            ("RELAY_HMAC_KEYS", r#"{"k": ""}"#),
            ("RELAY_FILE_SINK", "-"),
        ])
        .unwrap_err();
        assert_eq!(vars_of(err), ["RELAY_HMAC_KEYS", "RELAY_HMAC_KEYS"]);
    }

    #[test]
    fn json_logs_on_the_platforms() {
        let c = config(&[
            ("RELAY_HMAC_SECRET", "s"),
            ("RELAY_FILE_SINK", "-"),
            ("K_SERVICE", "relay"),
        ])
        .unwrap();
        assert_eq!(c.log_format, LogFormat::Json);
    }

    #[test]
    fn spots_unknown_relay_variables() {
        let names = ["RELAY_HMAC_SECERT", "RELAY_FILE_SINK", "PATH"].map(String::from);
        assert_eq!(Config::unknown_vars(names), ["RELAY_HMAC_SECERT"]);
    }
}
