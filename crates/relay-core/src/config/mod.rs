//! Configuration from `RELAY_*` environment variables, validated once at start.
//!
//! Every problem is reported at once, each naming its variable. The relay fails closed: no key
//! and no explicit `RELAY_ALLOW_UNSIGNED=true`, or no sink, and it does not start.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

mod file;

use crate::notification::Attributes;
use crate::route::{Router, Template};
use crate::sink::FileTarget;
use crate::verify::{KeyRing, Secret};

use file::{FileConfig, SinkKind, SinkSpec};

/// Every variable the relay reads. Any other `RELAY_*` variable is reported as unknown.
pub const KNOWN_VARS: &[&str] = &[
    "RELAY_CONFIG",
    "RELAY_HMAC_KEYS",
    "RELAY_HMAC_SECRET",
    "RELAY_HMAC_KEYS_SECRET_ARN",
    "RELAY_ALLOW_UNSIGNED",
    "RELAY_MAX_CLOCK_SKEW_SECS",
    "RELAY_MAX_BODY_BYTES",
    "RELAY_PAYLOAD_FIELD",
    "RELAY_FILE_SINK",
    "RELAY_SQS_QUEUE_URL",
    "RELAY_SQS_MAX_MESSAGE_BYTES",
    "RELAY_SNS_TOPIC_ARN",
    "RELAY_SNS_MAX_MESSAGE_BYTES",
    "RELAY_PUBSUB_TOPIC",
    "RELAY_PUBSUB_ORDERING",
    "RELAY_PUBSUB_MAX_MESSAGE_BYTES",
    "RELAY_SINK_TIMEOUT_MS",
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

/// Default for `RELAY_SQS_MAX_MESSAGE_BYTES`: the SQS limit for body plus attributes.
pub const DEFAULT_SQS_MAX_MESSAGE_BYTES: usize = 1024 * 1024;
/// Default for `RELAY_SNS_MAX_MESSAGE_BYTES`: the SNS limit for body plus attributes.
pub const DEFAULT_SNS_MAX_MESSAGE_BYTES: usize = 256 * 1024;
/// Default for `RELAY_PUBSUB_MAX_MESSAGE_BYTES`: the Pub/Sub limit for data plus attributes.
pub const DEFAULT_PUBSUB_MAX_MESSAGE_BYTES: usize = 10_000_000;
/// Default for `RELAY_SINK_TIMEOUT_MS`.
pub const DEFAULT_SINK_TIMEOUT_MS: u64 = 5000;

/// An SQS queue to publish to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqsTarget {
    /// `RELAY_SQS_QUEUE_URL`: the queue URL; a name ending in `.fifo` makes it a FIFO queue
    /// (`MessageGroupId` = subscription_id, `MessageDeduplicationId` = the dedup key).
    pub queue_url: String,
    /// `RELAY_SQS_MAX_MESSAGE_BYTES`: body plus attributes larger than this get 413 before any
    /// call (default 1048576, the SQS limit; older queues may be set lower).
    pub max_message_bytes: usize,
}

impl SqsTarget {
    /// True for a FIFO queue.
    pub fn is_fifo(&self) -> bool {
        self.queue_url.ends_with(".fifo")
    }
}

/// An SNS topic to publish to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnsTarget {
    /// `RELAY_SNS_TOPIC_ARN`: the topic ARN; a name ending in `.fifo` makes it a FIFO topic.
    pub topic_arn: String,
    /// `RELAY_SNS_MAX_MESSAGE_BYTES`: body plus attributes larger than this get 413 (default
    /// 262144, the SNS limit).
    pub max_message_bytes: usize,
}

impl SnsTarget {
    /// True for a FIFO topic.
    pub fn is_fifo(&self) -> bool {
        self.topic_arn.ends_with(".fifo")
    }
}

/// A Pub/Sub topic to publish to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PubSubTarget {
    /// `RELAY_PUBSUB_TOPIC`: `projects/<project>/topics/<topic>`.
    pub topic: String,
    /// `RELAY_PUBSUB_MAX_MESSAGE_BYTES`: data plus attributes larger than this get 413
    /// (default 10000000, the Pub/Sub limit).
    pub max_message_bytes: usize,
    /// `PUBSUB_EMULATOR_HOST` (`host:port`): talk to that emulator with anonymous credentials
    /// instead of Google with the platform's default credentials.
    pub emulator_host: Option<String>,
}

/// Where a sink delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A local file or stdout.
    File(FileTarget),
    /// An SQS queue.
    Sqs(SqsTarget),
    /// An SNS topic.
    Sns(SnsTarget),
    /// A Pub/Sub topic.
    PubSub(PubSubTarget),
}

/// How a sink shapes each message, beyond the payload (which never changes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SinkOptions {
    /// The relay attributes to send, by name; `None` sends all, in priority order.
    pub attributes: Option<Vec<String>>,
    /// Static attributes added after the relay's own.
    pub extra_attributes: Vec<(String, String)>,
    /// FIFO `MessageGroupId` (SQS, SNS); set for every FIFO target.
    pub message_group_id: Option<Template>,
    /// FIFO `MessageDeduplicationId` (SQS, SNS); set for every FIFO target.
    pub message_deduplication_id: Option<Template>,
    /// Pub/Sub ordering key; `None` publishes without one.
    pub ordering_key: Option<Template>,
}

/// A named sink: where it delivers and how it shapes messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkConfig {
    /// The name routes use (`file`, `sqs`, `sns` and `pubsub` on the variables' path).
    pub name: String,
    /// The destination.
    pub target: Target,
    /// Message shaping.
    pub options: SinkOptions,
}

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
    /// `RELAY_HMAC_KEYS_SECRET_ARN`: an AWS Secrets Manager secret read once at start, whose
    /// `SecretString` is either a `RELAY_HMAC_KEYS` JSON object or one plain secret for any keyId.
    /// Its keys join the ones above; the secret stays out of the function's environment.
    pub keys_secret_arn: Option<String>,
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
    /// The sinks: from `RELAY_CONFIG`'s `[sinks]`, or from `RELAY_FILE_SINK` (named `file`),
    /// `RELAY_SQS_QUEUE_URL` (`sqs`), `RELAY_SNS_TOPIC_ARN` (`sns`) and `RELAY_PUBSUB_TOPIC`
    /// (`pubsub`, ordered by bundle with `RELAY_PUBSUB_ORDERING=true`).
    pub sinks: Vec<SinkConfig>,
    /// The routes over [`sinks`](Self::sinks): from `RELAY_CONFIG`'s `[[routes]]`, or every
    /// notification to every sink.
    pub router: Router,
    /// `RELAY_CONFIG`: the configuration file, when one is used.
    pub config_file: Option<String>,
    /// `RELAY_SINK_TIMEOUT_MS`: the deadline for each sink to acknowledge, retries included
    /// (default 5000). Past it the sender gets 503 and retries.
    pub sink_timeout: Duration,
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
        let config_file = var("RELAY_CONFIG").filter(|p| !p.is_empty());
        let file = match config_file.as_deref().map(FileConfig::load).transpose() {
            Ok(file) => file,
            Err(message) => {
                return Err(ConfigErrors(vec![ConfigError {
                    var: "RELAY_CONFIG",
                    message,
                }]));
            }
        };
        // Variables override the file's [relay] settings.
        let var = |name: &str| var(name).or_else(|| file.as_ref().and_then(|f| f.setting(name)));
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
        let keys_secret_arn = var("RELAY_HMAC_KEYS_SECRET_ARN").and_then(|arn| {
            let parts: Vec<&str> = arn.splitn(7, ':').collect();
            match parts.as_slice() {
                ["arn", partition, "secretsmanager", region, account, "secret", name]
                    if partition.starts_with("aws")
                        && !region.is_empty()
                        && !account.is_empty()
                        && !name.is_empty() =>
                {
                    Some(arn)
                }
                _ => {
                    fail(
                        "RELAY_HMAC_KEYS_SECRET_ARN",
                        format!("expected a Secrets Manager secret ARN such as arn:aws:secretsmanager:us-east-1:123456789012:secret:dss-relay-hmac, got {arn:?}"),
                    );
                    None
                }
            }
        });

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
        let bytes = |s: &str| match s.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err("expected a positive number of bytes".to_owned()),
        };
        let sqs = var("RELAY_SQS_QUEUE_URL").and_then(|url| match check_queue_url(&url) {
            Ok(()) => Some(SqsTarget {
                queue_url: url,
                max_message_bytes: DEFAULT_SQS_MAX_MESSAGE_BYTES,
            }),
            Err(message) => {
                fail("RELAY_SQS_QUEUE_URL", format!("{message}, got {url:?}"));
                None
            }
        });
        let sqs_max = parse_or(
            "RELAY_SQS_MAX_MESSAGE_BYTES",
            var("RELAY_SQS_MAX_MESSAGE_BYTES"),
            DEFAULT_SQS_MAX_MESSAGE_BYTES,
            bytes,
            &mut fail,
        );
        let sqs = sqs.map(|t| SqsTarget {
            max_message_bytes: sqs_max,
            ..t
        });
        let sns = var("RELAY_SNS_TOPIC_ARN").and_then(|arn| match check_topic_arn(&arn) {
            Ok(()) => Some(arn),
            Err(message) => {
                fail("RELAY_SNS_TOPIC_ARN", format!("{message}, got {arn:?}"));
                None
            }
        });
        let sns_max = parse_or(
            "RELAY_SNS_MAX_MESSAGE_BYTES",
            var("RELAY_SNS_MAX_MESSAGE_BYTES"),
            DEFAULT_SNS_MAX_MESSAGE_BYTES,
            bytes,
            &mut fail,
        );
        let sns = sns.map(|topic_arn| SnsTarget {
            topic_arn,
            max_message_bytes: sns_max,
        });
        let topic = var("RELAY_PUBSUB_TOPIC").and_then(|topic| match check_pubsub_topic(&topic) {
            Ok(()) => Some(topic),
            Err(message) => {
                fail("RELAY_PUBSUB_TOPIC", format!("{message}, got {topic:?}"));
                None
            }
        });
        let ordering = parse_or(
            "RELAY_PUBSUB_ORDERING",
            var("RELAY_PUBSUB_ORDERING"),
            false,
            parse_bool,
            &mut fail,
        );
        let pubsub_max = parse_or(
            "RELAY_PUBSUB_MAX_MESSAGE_BYTES",
            var("RELAY_PUBSUB_MAX_MESSAGE_BYTES"),
            DEFAULT_PUBSUB_MAX_MESSAGE_BYTES,
            bytes,
            &mut fail,
        );
        let emulator_host = var("PUBSUB_EMULATOR_HOST").filter(|h| !h.is_empty());
        let pubsub = topic.map(|topic| PubSubTarget {
            topic,
            max_message_bytes: pubsub_max,
            emulator_host: emulator_host.clone(),
        });
        let sink_timeout_ms = parse_or(
            "RELAY_SINK_TIMEOUT_MS",
            var("RELAY_SINK_TIMEOUT_MS"),
            DEFAULT_SINK_TIMEOUT_MS,
            |s| match s.parse::<u64>() {
                Ok(n) if (1..=60_000).contains(&n) => Ok(n),
                _ => Err("expected milliseconds between 1 and 60000".into()),
            },
            &mut fail,
        );

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

        if keys.is_empty() && keys_secret_arn.is_none() && !allow_unsigned {
            fail(
                "RELAY_HMAC_KEYS",
                "no HMAC key is configured: set RELAY_HMAC_KEYS, RELAY_HMAC_SECRET or RELAY_HMAC_KEYS_SECRET_ARN (or, to accept unsigned notifications, RELAY_ALLOW_UNSIGNED=true)".into(),
            );
        }
        let from_variables =
            file_sink.is_some() || sqs.is_some() || sns.is_some() || pubsub.is_some();
        let (sinks, router) = match file.as_ref().filter(|f| !f.sinks.is_empty()) {
            Some(file) => {
                if from_variables {
                    fail(
                        "RELAY_CONFIG",
                        "it defines [sinks], and sink variables (RELAY_SQS_QUEUE_URL, RELAY_SNS_TOPIC_ARN, RELAY_PUBSUB_TOPIC, RELAY_FILE_SINK) are set too: name sinks in one place".into(),
                    );
                }
                let path = config_file.as_deref().unwrap_or_default();
                let mut sinks = Vec::new();
                for (name, spec) in &file.sinks {
                    match sink_from_file(name, spec, emulator_host.as_deref()) {
                        Ok(sink) => sinks.push(sink),
                        Err(message) => {
                            fail("RELAY_CONFIG", format!("{path}: sink {name:?}, {message}"))
                        }
                    }
                }
                let names = sinks.iter().map(|s: &SinkConfig| s.name.clone()).collect();
                let router = file
                    .routes()
                    .and_then(|specs| Router::compile(&specs, names).map_err(|e| e.to_string()))
                    .map_err(|message| fail("RELAY_CONFIG", format!("{path}: {message}")))
                    .ok();
                (sinks, router)
            }
            None => {
                if file.as_ref().is_some_and(FileConfig::has_routes) {
                    fail(
                        "RELAY_CONFIG",
                        "it lists [[routes]] but no [sinks.<name>] for them to name".into(),
                    );
                }
                let mut sinks = Vec::new();
                if let Some(target) = file_sink {
                    sinks.push(SinkConfig {
                        name: "file".into(),
                        target: Target::File(target),
                        options: SinkOptions::default(),
                    });
                }
                if let Some(target) = sqs {
                    let options = fifo_defaults(target.is_fifo());
                    sinks.push(SinkConfig {
                        name: "sqs".into(),
                        target: Target::Sqs(target),
                        options,
                    });
                }
                if let Some(target) = sns {
                    let options = fifo_defaults(target.is_fifo());
                    sinks.push(SinkConfig {
                        name: "sns".into(),
                        target: Target::Sns(target),
                        options,
                    });
                }
                if let Some(target) = pubsub {
                    let ordering_key = ordering
                        .then(|| Template::parse("{match.bundle_uuid}").expect("valid template"));
                    let options = SinkOptions {
                        ordering_key,
                        ..SinkOptions::default()
                    };
                    sinks.push(SinkConfig {
                        name: "pubsub".into(),
                        target: Target::PubSub(target),
                        options,
                    });
                }
                if sinks.is_empty() {
                    fail(
                        "RELAY_FILE_SINK",
                        "no sink is configured: set RELAY_SQS_QUEUE_URL, RELAY_SNS_TOPIC_ARN, RELAY_PUBSUB_TOPIC or RELAY_FILE_SINK, or name sinks in RELAY_CONFIG".into(),
                    );
                }
                let router = Router::to_all(sinks.iter().map(|s| s.name.clone()).collect());
                (sinks, Some(router))
            }
        };

        if !errors.is_empty() {
            return Err(ConfigErrors(errors));
        }
        Ok(Self {
            keys,
            keys_secret_arn,
            allow_unsigned,
            max_clock_skew: (skew_secs > 0).then(|| Duration::from_secs(skew_secs)),
            max_body_bytes,
            payload_field,
            sinks,
            router: router.expect("no routing error was reported"),
            config_file,
            sink_timeout: Duration::from_millis(sink_timeout_ms),
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

    /// The effective settings as `(name, value)` pairs, secrets masked, for `relay check`:
    /// the variables, then one line per sink and per route.
    pub fn effective(&self) -> Vec<(String, String)> {
        let keys: BTreeMap<&str, &str> = self.keys.key_ids().map(|id| (id, "****")).collect();
        let show = |value: Option<String>| value.unwrap_or_else(|| UNSET.to_owned());
        let mut lines: Vec<(String, String)> = [
            ("RELAY_CONFIG", show(self.config_file.clone())),
            (
                "RELAY_HMAC_KEYS",
                serde_json::to_string(&keys).unwrap_or_default(),
            ),
            (
                "RELAY_HMAC_SECRET",
                show(self.keys.has_catch_all().then(|| "****".into())),
            ),
            (
                "RELAY_HMAC_KEYS_SECRET_ARN",
                show(self.keys_secret_arn.clone()),
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
                "RELAY_SINK_TIMEOUT_MS",
                self.sink_timeout.as_millis().to_string(),
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
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        for sink in &self.sinks {
            lines.push((format!("sink {}", sink.name), sink.describe()));
        }
        for route in self.router.routes() {
            let to: Vec<&str> = route
                .to
                .iter()
                .map(|&i| self.router.sink_names()[i].as_str())
                .collect();
            let kind = if route.fallback {
                "fallback".to_owned()
            } else if route.pattern.is_empty() {
                "everything".to_owned()
            } else {
                format!("match {}", route.pattern.source())
            };
            let stop = if route.stop { ", then stop" } else { "" };
            lines.push((
                format!("route {}", route.name),
                format!("{kind} -> {}{stop}", to.join(", ")),
            ));
        }
        lines
    }
}

impl SinkConfig {
    /// One line describing the sink, for `relay check`.
    pub fn describe(&self) -> String {
        let mut text = match &self.target {
            Target::File(t) => format!("file {t}"),
            Target::Sqs(t) => format!("sqs {} (max {} bytes)", t.queue_url, t.max_message_bytes),
            Target::Sns(t) => format!("sns {} (max {} bytes)", t.topic_arn, t.max_message_bytes),
            Target::PubSub(t) => {
                let via = t
                    .emulator_host
                    .as_deref()
                    .map(|h| format!(", emulator {h}"))
                    .unwrap_or_default();
                format!(
                    "pubsub {} (max {} bytes{via})",
                    t.topic, t.max_message_bytes
                )
            }
        };
        let o = &self.options;
        if let Some(names) = &o.attributes {
            text.push_str(&format!("; attributes {}", names.join(", ")));
        }
        for (k, v) in &o.extra_attributes {
            text.push_str(&format!("; {k}={v}"));
        }
        for (label, template) in [
            ("group id", &o.message_group_id),
            ("dedup id", &o.message_deduplication_id),
            ("ordering key", &o.ordering_key),
        ] {
            if let Some(t) = template {
                text.push_str(&format!("; {label} {}", t.source()));
            }
        }
        text
    }
}

/// FIFO targets get `{subscription_id}` groups and the stable dedup key, as the DSS's own
/// queues did.
fn fifo_defaults(fifo: bool) -> SinkOptions {
    if !fifo {
        return SinkOptions::default();
    }
    SinkOptions {
        message_group_id: Some(Template::parse("{subscription_id}").expect("valid template")),
        message_deduplication_id: Some(Template::parse("{$dedup_key}").expect("valid template")),
        ..SinkOptions::default()
    }
}

/// Checks one `[sinks.<name>]` table against its type; the error names the field.
fn sink_from_file(
    name: &str,
    spec: &SinkSpec,
    emulator_host: Option<&str>,
) -> Result<SinkConfig, String> {
    // Which fields a sink of this type takes; any other that is set is named in the error.
    let allowed: &[&str] = match spec.kind {
        SinkKind::Sqs => &[
            "queue_url",
            "message_group_id",
            "message_deduplication_id",
            "max_message_bytes",
        ],
        SinkKind::Sns => &[
            "topic_arn",
            "message_group_id",
            "message_deduplication_id",
            "max_message_bytes",
        ],
        SinkKind::Pubsub => &["topic", "ordering_key", "max_message_bytes"],
        SinkKind::File => &["path"],
    };
    let set = [
        ("queue_url", spec.queue_url.is_some()),
        ("topic_arn", spec.topic_arn.is_some()),
        ("topic", spec.topic.is_some()),
        ("path", spec.path.is_some()),
        ("message_group_id", spec.message_group_id.is_some()),
        (
            "message_deduplication_id",
            spec.message_deduplication_id.is_some(),
        ),
        ("ordering_key", spec.ordering_key.is_some()),
        ("max_message_bytes", spec.max_message_bytes.is_some()),
    ];
    if let Some((field, _)) = set
        .iter()
        .find(|(field, present)| *present && !allowed.contains(field))
    {
        let kind = format!("{:?}", spec.kind).to_lowercase();
        return Err(format!("{field}: not an option of a {kind} sink"));
    }
    let required = |field: &Option<String>, name: &str| {
        field.clone().ok_or_else(|| format!("{name}: required"))
    };
    let template = |t: &Option<String>, field: &str| {
        t.as_deref()
            .map(Template::parse)
            .transpose()
            .map_err(|e| format!("{field}: {e}"))
    };
    let target = match spec.kind {
        SinkKind::Sqs => {
            let queue_url = required(&spec.queue_url, "queue_url")?;
            check_queue_url(&queue_url).map_err(|e| format!("queue_url: {e}"))?;
            let max_message_bytes = spec
                .max_message_bytes
                .unwrap_or(DEFAULT_SQS_MAX_MESSAGE_BYTES);
            Target::Sqs(SqsTarget {
                queue_url,
                max_message_bytes,
            })
        }
        SinkKind::Sns => {
            let topic_arn = required(&spec.topic_arn, "topic_arn")?;
            check_topic_arn(&topic_arn).map_err(|e| format!("topic_arn: {e}"))?;
            let max_message_bytes = spec
                .max_message_bytes
                .unwrap_or(DEFAULT_SNS_MAX_MESSAGE_BYTES);
            Target::Sns(SnsTarget {
                topic_arn,
                max_message_bytes,
            })
        }
        SinkKind::Pubsub => {
            let topic = required(&spec.topic, "topic")?;
            check_pubsub_topic(&topic).map_err(|e| format!("topic: {e}"))?;
            let max_message_bytes = spec
                .max_message_bytes
                .unwrap_or(DEFAULT_PUBSUB_MAX_MESSAGE_BYTES);
            Target::PubSub(PubSubTarget {
                topic,
                max_message_bytes,
                emulator_host: emulator_host.map(str::to_owned),
            })
        }
        SinkKind::File => {
            let path = required(&spec.path, "path")?;
            Target::File(if path == "-" {
                FileTarget::Stdout
            } else {
                FileTarget::Path(PathBuf::from(path))
            })
        }
    };
    let fifo = match &target {
        Target::Sqs(t) => t.is_fifo(),
        Target::Sns(t) => t.is_fifo(),
        _ => false,
    };
    let defaults = fifo_defaults(fifo);
    let message_group_id = template(&spec.message_group_id, "message_group_id")?;
    let message_deduplication_id =
        template(&spec.message_deduplication_id, "message_deduplication_id")?;
    if !fifo && (message_group_id.is_some() || message_deduplication_id.is_some()) {
        return Err("message_group_id: only FIFO queues and topics (names ending in .fifo) take group and deduplication ids".into());
    }
    let unknown = spec
        .attributes
        .iter()
        .flatten()
        .find(|n| !Attributes::ORDER.contains(&n.as_str()));
    if let Some(unknown) = unknown {
        return Err(format!(
            "attributes: unknown attribute {unknown:?}; the relay's are {:?}",
            Attributes::ORDER
        ));
    }
    if let Some(reserved) = spec
        .extra_attributes
        .keys()
        .find(|k| k.starts_with("dss.") || k.starts_with("relay.") || k.is_empty())
    {
        return Err(format!(
            "extra_attributes: {reserved:?} is reserved (dss.* and relay.* are the relay's own)"
        ));
    }
    let count = spec
        .attributes
        .as_ref()
        .map_or(Attributes::ORDER.len(), Vec::len)
        + spec.extra_attributes.len();
    if matches!(target, Target::Sqs(_) | Target::Sns(_)) && count > 10 {
        return Err(format!(
            "extra_attributes: {count} attributes in all; SQS and SNS take at most 10 (select fewer with attributes = [...])"
        ));
    }
    Ok(SinkConfig {
        name: name.to_owned(),
        target,
        options: SinkOptions {
            attributes: spec.attributes.clone(),
            extra_attributes: spec.extra_attributes.clone().into_iter().collect(),
            message_group_id: message_group_id.or(defaults.message_group_id),
            message_deduplication_id: message_deduplication_id
                .or(defaults.message_deduplication_id),
            ordering_key: template(&spec.ordering_key, "ordering_key")?,
        },
    })
}

const UNSET: &str = "(unset)";

fn check_queue_url(url: &str) -> Result<(), String> {
    let uri: http::Uri = url.parse().map_err(|_| "expected a queue URL".to_owned())?;
    let path = uri.path().trim_matches('/');
    match (uri.scheme_str(), uri.host(), path.split('/').count()) {
        (Some("https" | "http"), Some(_), 2) => Ok(()),
        _ => Err(
            "expected a queue URL such as https://sqs.us-east-1.amazonaws.com/123456789012/name"
                .into(),
        ),
    }
}

fn check_topic_arn(arn: &str) -> Result<(), String> {
    let parts: Vec<&str> = arn.split(':').collect();
    match parts.as_slice() {
        ["arn", partition, "sns", region, account, name]
            if partition.starts_with("aws")
                && !region.is_empty()
                && !account.is_empty()
                && !name.is_empty() =>
        {
            Ok(())
        }
        _ => Err("expected a topic ARN such as arn:aws:sns:us-east-1:123456789012:name".into()),
    }
}

fn check_pubsub_topic(topic: &str) -> Result<(), String> {
    match topic.split('/').collect::<Vec<_>>().as_slice() {
        ["projects", project, "topics", name] if !project.is_empty() && name.len() >= 3 => Ok(()),
        _ => Err("expected projects/<project>/topics/<topic>".into()),
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

/// Parses a `RELAY_HMAC_KEYS` value: a JSON object of non-empty keyIds to non-empty secrets.
pub(crate) fn parse_keys(raw: &str) -> Result<BTreeMap<String, Secret>, String> {
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
        assert_eq!(c.sinks.len(), 1);
        assert_eq!(c.sinks[0].target, Target::File(FileTarget::Stdout));
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
    fn queue_and_topic_sinks() {
        let c = config(&[
            ("RELAY_HMAC_SECRET", "s"),
            (
                "RELAY_SQS_QUEUE_URL",
                "https://sqs.eu-west-1.amazonaws.com/123456789012/dss.fifo",
            ),
            (
                "RELAY_SNS_TOPIC_ARN",
                "arn:aws:sns:us-east-1:123456789012:dss",
            ),
            ("RELAY_PUBSUB_TOPIC", "projects/green/topics/dss-events"),
            ("RELAY_PUBSUB_ORDERING", "true"),
            ("RELAY_SINK_TIMEOUT_MS", "2500"),
        ])
        .unwrap();
        let names: Vec<&str> = c.sinks.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["sqs", "sns", "pubsub"]);
        let Target::Sqs(sqs) = &c.sinks[0].target else {
            panic!()
        };
        assert!(sqs.is_fifo());
        assert_eq!(
            c.sinks[0]
                .options
                .message_group_id
                .as_ref()
                .map(|t| t.source()),
            Some("{subscription_id}")
        );
        let Target::Sns(sns) = &c.sinks[1].target else {
            panic!()
        };
        assert!(!sns.is_fifo() && sns.max_message_bytes == 262_144);
        assert_eq!(c.sinks[1].options.message_group_id, None);
        assert_eq!(
            c.sinks[2].options.ordering_key.as_ref().map(|t| t.source()),
            Some("{match.bundle_uuid}")
        );
        assert_eq!(c.sink_timeout, Duration::from_millis(2500));
        assert!(c.sinks.iter().all(|s| !matches!(s.target, Target::File(_))));
    }

    #[test]
    fn malformed_destinations_are_named() {
        let err = config(&[
            ("RELAY_HMAC_SECRET", "s"),
            ("RELAY_SQS_QUEUE_URL", "dss-events"),
            ("RELAY_SNS_TOPIC_ARN", "arn:aws:sqs:us-east-1:1:q"),
            ("RELAY_PUBSUB_TOPIC", "dss-events"),
            ("RELAY_SINK_TIMEOUT_MS", "0"),
        ])
        .unwrap_err();
        assert_eq!(
            vars_of(err),
            [
                "RELAY_SQS_QUEUE_URL",
                "RELAY_SNS_TOPIC_ARN",
                "RELAY_PUBSUB_TOPIC",
                "RELAY_SINK_TIMEOUT_MS",
                "RELAY_FILE_SINK",
            ]
        );
    }

    /// Writes `text` as a configuration file and loads it with `vars`.
    fn with_file(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigErrors> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("relay.toml");
        std::fs::write(&path, text).unwrap();
        let path = path.display().to_string();
        let mut all = vec![("RELAY_CONFIG", path.as_str())];
        all.extend_from_slice(vars);
        config(&all)
    }

    const FILE: &str = r#"
[relay]
hmac_secret = "from-file"
max_body_bytes = 2048

[sinks.q]
type = "sqs"
queue_url = "https://sqs.eu-west-1.amazonaws.com/123456789012/dss.fifo"
message_group_id = "{match.bundle_uuid}"

[sinks.t]
type = "pubsub"
topic = "projects/p/topics/dss-events"
ordering_key = "{subscription_id}"

[[routes]]
name = "creates"
match = { event_type = ["CREATE"] }
to = ["q", "t"]
"#;

    #[test]
    fn a_file_names_sinks_and_routes_and_variables_override_it() {
        let c = with_file(FILE, &[("RELAY_MAX_BODY_BYTES", "4096")]).unwrap();
        assert_eq!(c.max_body_bytes, 4096, "the variable wins over [relay]");
        assert!(c.keys.has_catch_all(), "hmac_secret came from [relay]");
        let names: Vec<&str> = c.sinks.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["q", "t"]);
        assert_eq!(
            c.sinks[0]
                .options
                .message_group_id
                .as_ref()
                .map(Template::source),
            Some("{match.bundle_uuid}")
        );
        assert_eq!(
            c.sinks[0]
                .options
                .message_deduplication_id
                .as_ref()
                .map(Template::source),
            Some("{$dedup_key}")
        );
        assert_eq!(
            c.sinks[1]
                .options
                .ordering_key
                .as_ref()
                .map(Template::source),
            Some("{subscription_id}")
        );
        assert_eq!(c.router.routes().len(), 1);
    }

    #[test]
    fn file_errors_name_the_file_the_sink_and_the_field() {
        type Case<'a> = (String, &'a [(&'a str, &'a str)], &'a str);
        let cases: [Case<'_>; 9] = [
            (
                FILE.replace("type = \"sqs\"", "type = \"kafka\""),
                &[],
                "unknown variant `kafka`",
            ),
            (
                FILE.replace("queue_url", "queue"),
                &[],
                "unknown field `queue`",
            ),
            (
                FILE.replace("/dss.fifo", "/dss"),
                &[],
                "sink \"q\", message_group_id: only FIFO",
            ),
            (
                FILE.replace(
                    "topic = \"projects/p/topics/dss-events\"",
                    "topic_arn = \"x\"",
                ),
                &[],
                "sink \"t\", topic_arn: not an option of a pubsub sink",
            ),
            (
                FILE.replace("{subscription_id}", "{subscription_id"),
                &[],
                "sink \"t\", ordering_key: template",
            ),
            (
                FILE.replace("max_body_bytes = 2048", "listen_port = 1"),
                &[],
                "[relay] listen_port is not a relay setting",
            ),
            (
                FILE.replace("to = [\"q\", \"t\"]", "to = [\"q\"]"),
                &[],
                "the sink \"t\" is not used by any route",
            ),
            (
                FILE.to_owned(),
                &[(
                    "RELAY_SQS_QUEUE_URL",
                    "https://sqs.us-east-1.amazonaws.com/1/q",
                )],
                "name sinks in one place",
            ),
            (
                "[[routes]]\nname = \"a\"\nto = [\"x\"]\n".to_owned(),
                &[("RELAY_HMAC_SECRET", "s"), ("RELAY_FILE_SINK", "-")],
                "lists [[routes]] but no [sinks.<name>]",
            ),
        ];
        for (text, vars, expected) in cases {
            let err = with_file(&text, vars).unwrap_err();
            let message = err.to_string();
            assert!(
                message.contains(expected),
                "expected {expected:?} in: {message}"
            );
            assert!(err.0.iter().any(|e| e.var == "RELAY_CONFIG"), "{message}");
            if expected.starts_with("sink") || expected.starts_with("[relay]") {
                assert!(
                    message.contains("relay.toml"),
                    "the file is named: {message}"
                );
            }
        }
    }

    #[test]
    fn a_missing_file_is_named() {
        let err = config(&[("RELAY_CONFIG", "/nonexistent/relay.toml")]).unwrap_err();
        assert_eq!(err.0[0].var, "RELAY_CONFIG");
        assert!(
            err.to_string()
                .contains("cannot read /nonexistent/relay.toml")
        );
    }

    #[test]
    fn spots_unknown_relay_variables() {
        let names = ["RELAY_HMAC_SECERT", "RELAY_FILE_SINK", "PATH"].map(String::from);
        assert_eq!(Config::unknown_vars(names), ["RELAY_HMAC_SECERT"]);
    }
}
