//! Every relay setting, once: its variable, its key in the file's `[relay]` table (or none, for
//! what only a variable sets), its default, a one-line doc and its parser, which is the value's
//! type. This table is the list of known variables, `relay check`'s printout and the settings
//! table of docs/configuration.md; a test holds that page to it.

use std::fmt::Write as _;

use serde::de::{Error as _, MapAccess, Visitor};

use super::values::{
    Count, FieldName, Flag, HmacKeys, ListenAddr, LogFormat, MetricsFormat, Millis, Seconds,
    SecretArn, Show, TransformMillis, WaitMillis,
};
use crate::archive::{ArchiveUrl, StreamUrl};
use crate::ledger::{LedgerKey, LedgerUrl};
use crate::live::RoutesUrl;
use crate::sink::ByteLimit;
use crate::sink::file::FileTarget;
use crate::sink::pubsub::PubSubTopic;
use crate::sink::sns::TopicArn;
use crate::sink::sqs::QueueUrl;
use crate::verify::Secret;

/// One row of the settings table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The environment variable.
    pub var: &'static str,
    /// The name without `RELAY_`, lower-cased: the key in `[relay]` where the file takes it.
    pub key: &'static str,
    /// Whether the file's `[relay]` table takes it; destinations go under `[sinks.<name>]`.
    pub in_file: bool,
    /// The default, as text; parsed by the setting's own parser when it is a value.
    pub default: &'static str,
    /// What it does, in one line.
    pub doc: &'static str,
}

macro_rules! in_file {
    (file) => {
        true
    };
    (var) => {
        false
    };
}

macro_rules! settings {
    ($( #[doc = $doc:literal] $key:ident: $ty:ty = $var:literal, $scope:ident, default $default:literal; )*) => {
        /// The settings as one source gives them (the variables or `[relay]`); unset is `None`.
        #[derive(Debug, Clone, Default)]
        pub struct Settings {
            $( #[doc = $doc] pub $key: Option<$ty>, )*
        }

        /// The settings table.
        pub const SETTINGS: &[Setting] = &[
            $( Setting { var: $var, key: stringify!($key), in_file: in_file!($scope), default: $default, doc: $doc.trim_ascii() }, )*
        ];

        impl Settings {
            /// Sets the setting `key` from a variable's text.
            fn set_text(&mut self, key: &str, text: &str) -> Result<(), String> {
                match key {
                    $( stringify!($key) => self.$key = Some(parse_text(text)?), )*
                    _ => return Err(format!("{key} is not a setting")),
                }
                Ok(())
            }

            /// These settings, with what they leave unset taken from `lower`.
            pub fn or(self, lower: Self) -> Self {
                Self { $( $key: self.$key.or(lower.$key), )* }
            }

            /// The setting `key` as `relay check` shows it (secrets masked); `None` when unset.
            pub fn shown(&self, key: &str) -> Option<String> {
                match key {
                    $( stringify!($key) => self.$key.as_ref().map(Show::show), )*
                    _ => None,
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for Settings {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Table;
                impl<'de> Visitor<'de> for Table {
                    type Value = Settings;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a table of relay settings")
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Settings, A::Error> {
                        let mut settings = Settings::default();
                        while let Some(key) = map.next_key::<String>()? {
                            match key.as_str() {
                                $( stringify!($key) if in_file!($scope) => settings.$key = Some(map.next_value()?), )*
                                // Refused while reading the value, so the error carries its place.
                                other => map.next_value_seed(Refuse(refusal(other)))?,
                            }
                        }
                        Ok(settings)
                    }
                }
                deserializer.deserialize_map(Table)
            }
        }
    };
}

settings! {
    /// The configuration file: `[relay]` settings, `[sources.<name>]`, `[sinks.<name>]` and `[[routes]]`; or an AWS Secrets Manager secret's ARN holding it, read once at start (the aws-relay module's `relay_config`).
    config: String = "RELAY_CONFIG", var, default "";
    /// JSON object `{"<keyId>": "<secret>"}` (a table in the file); several keys allow rotation. Secrets are used as their UTF-8 bytes, never base64-decoded.
    hmac_keys: HmacKeys = "RELAY_HMAC_KEYS", file, default "";
    /// One secret accepted for any keyId; a keyId listed in `hmac_keys` uses its own secret.
    hmac_secret: Secret = "RELAY_HMAC_SECRET", file, default "";
    /// An AWS Secrets Manager secret read once at start, whose `SecretString` is a keys object or one plain secret; its keys join the ones above.
    hmac_keys_secret_arn: SecretArn = "RELAY_HMAC_KEYS_SECRET_ARN", file, default "";
    /// Accept requests without `Authorization`; without any key this turns verification off, and the relay says so at start.
    allow_unsigned: Flag = "RELAY_ALLOW_UNSIGNED", file, default "false";
    /// Largest distance, either way, between the request's `Date` and the relay's clock; `0` turns the check off.
    max_clock_skew_secs: Seconds = "RELAY_MAX_CLOCK_SKEW_SECS", file, default "300";
    /// Larger request bodies get 413; the server never reads past the limit.
    max_body_bytes: ByteLimit = "RELAY_MAX_BODY_BYTES", file, default "1048576";
    /// The multipart form field holding the notification (the subscription's `payload_form_field`).
    payload_field: FieldName = "RELAY_PAYLOAD_FIELD", file, default "payload";
    /// Deadline for every routed sink to acknowledge, retries included; past it the answer is 503.
    sink_timeout_ms: Millis = "RELAY_SINK_TIMEOUT_MS", file, default "5000";
    /// How long, at most, a notification for SQS or SNS waits for others to share its call, unless it comes after a quiet spell as long with no call in flight (it then leaves at once); `0`: never. On Lambda an instance handles one notification at a time, so none could join it.
    batch_wait_ms: WaitMillis = "RELAY_BATCH_WAIT_MS", file, default "1, 0 on Lambda";
    /// The longest a destination's `transform` may run over one notification (at most 1000); one still running then is stopped, and that destination fails with 502 `transform_failed`.
    transform_timeout_ms: TransformMillis = "RELAY_TRANSFORM_TIMEOUT_MS", file, default "100";
    /// `json` or `text` log lines, to standard error; `RUST_LOG` filters them (a level, `target=level` directives, or both).
    log_format: LogFormat = "RELAY_LOG_FORMAT", file, default "json on Lambda and Cloud Run, else text";
    /// `emf`: one CloudWatch Embedded Metric Format line per answer and per sink publish, on standard output; `off`: none.
    metrics: MetricsFormat = "RELAY_METRICS", file, default "emf on Lambda, else off";
    /// The stored routes document: a path, `s3://<bucket>/<key>` or `gs://<bucket>/<object>`, holding `[sinks.<name>]`, `[[routes]]` and `[[splits]]` added to the deployed ones; read at start and again while the relay runs.
    routes_url: RoutesUrl = "RELAY_ROUTES_URL", file, default "";
    /// How often, at most, each instance reads the stored routes again (a conditional read); on Lambda, at the start of an invocation once this much time has passed.
    routes_refresh_secs: Seconds = "RELAY_ROUTES_REFRESH_SECS", file, default "10";
    /// A stored routes document larger than this is refused (the routes in effect stay); reads never hold more than this in memory.
    routes_max_bytes: ByteLimit = "RELAY_ROUTES_MAX_BYTES", file, default "4194304";
    /// The longest a split may last, from its registration to its expiry: `relay split start` and `renew` refuse a longer `--ttl`, and the relay refuses a stored split that lasts longer.
    split_max_ttl_secs: Seconds = "RELAY_SPLIT_MAX_TTL_SECS", file, default "604800";
    /// The delivery ledger: a path (an SQLite file), `dynamodb://<table>` or `firestore://<project>/<database>/<collection>`. With it, a retry publishes only to the destinations that have not acknowledged, a notification every destination acknowledged gets 202 `duplicate`, and `relay trace` tells what happened; off when unset.
    ledger_url: LedgerUrl = "RELAY_LEDGER_URL", file, default "";
    /// How long the ledger keeps a notification after its last attempt; a DSS retry after that publishes again. Must be longer than an attempt's lease (`RELAY_SINK_TIMEOUT_MS` plus 2 s).
    ledger_retention_secs: Seconds = "RELAY_LEDGER_RETENTION_SECS", file, default "691200";
    /// What the ledger counts as one notification: `dedup_key` (per subscription), or `bundle_event` (the bundle, its version and the event, so a subscriber on both DSS replicas gets each bundle once).
    ledger_key: LedgerKey = "RELAY_LEDGER_KEY", file, default "dedup_key";
    /// Record notifications no route takes too (one write each), so `relay trace` can say they were filtered.
    ledger_record_filtered: Flag = "RELAY_LEDGER_RECORD_FILTERED", file, default "true";
    /// The archive: a folder, `s3://<bucket>/<prefix>` or `gs://<bucket>/<prefix>`. Every verified notification, filtered ones included, is written there before the relay answers 2xx, for `relay replay`: alone as the object `YYYY/MM/DD/HH/<dedup key>`, or with the records queued beside it as the lines of one object `YYYY/MM/DD/HH/batch-<id>`; off when unset.
    archive_url: ArchiveUrl = "RELAY_ARCHIVE_URL", file, default "";
    /// An engine the archive's records are written through, which batches them into the archive's objects: `firehose://<delivery stream>` (Amazon Data Firehose, delivering to the `s3://` archive under its prefix and hour) or `pubsub://projects/<project>/topics/<topic>` (a Pub/Sub topic whose Cloud Storage subscription writes the `gs://` archive). The relay still answers only once the engine holds each record; `relay replay` reads the objects as it reads the relay's own. Unset, the relay writes the objects itself.
    archive_stream: StreamUrl = "RELAY_ARCHIVE_STREAM", file, default "";
    /// The key the archive's records are sealed with (an HMAC-SHA256 over each record), at least 16 bytes, used as its UTF-8 bytes: `relay replay` sends only records it opens, and an object at a notification's key counts as written only if it is that notification's sealed record. Required with the archive; keep it as long as the archive.
    archive_key: Secret = "RELAY_ARCHIVE_KEY", file, default "";
    /// An AWS Secrets Manager secret read once at start whose `SecretString` is the archive's key, instead of `RELAY_ARCHIVE_KEY`.
    archive_key_secret_arn: SecretArn = "RELAY_ARCHIVE_KEY_SECRET_ARN", file, default "";
    /// How long the archive keeps a record (its bucket's lifecycle; both modules set it from `archive_retention_days`): `relay replay` refuses a window that reaches further back, rather than list hours that hold nothing.
    archive_retention_days: Count = "RELAY_ARCHIVE_RETENTION_DAYS", file, default "30";
    /// Open the connections at start, with one call that publishes and writes nothing, so the first notification does not pay for the TLS handshake or the first token; any answer, a refusal included, leaves the connection open. Opened: SQS and SNS (the queue's or topic's attributes), the DynamoDB ledger (the table's description), the Firestore ledger and the Cloud Storage archive (a read of a document or object no notification has, which also fetches the Google token every Google client shares), the S3 archive (the bucket's head), the Firehose stream (its description). Pub/Sub: the token only, since its client has no call that publishes nothing on its own connection; the first publish opens it. Not opened: the file sink, the SQLite ledger and the folder archive (local), and the stored routes store (read at start anyway).
    warm_connections: Flag = "RELAY_WARM_CONNECTIONS", file, default "true";
    /// relay-gcf: the address to listen on.
    listen: ListenAddr = "RELAY_LISTEN", file, default "0.0.0.0:$PORT (PORT defaults to 8080)";
    /// relay-gcf: a request's headers must arrive within this, and a kept-alive connection waits no longer idle; else it is closed.
    header_timeout_ms: Millis = "RELAY_HEADER_TIMEOUT_MS", file, default "10000";
    /// relay-gcf: a request's body must arrive within this after its headers, at the latest; else 408 `request_timeout`.
    body_timeout_ms: Millis = "RELAY_BODY_TIMEOUT_MS", file, default "20000";
    /// relay-gcf: a body's bytes must keep arriving at this rate after a grace of one second (the next bytes within 1 s plus what has arrived at this rate, the whole body within 1 s plus its declared size at this rate); else 408 `request_timeout`.
    body_min_bytes_per_sec: Count = "RELAY_BODY_MIN_BYTES_PER_SEC", file, default "16384";
    /// relay-gcf: requests in flight at once, a last bound on tasks (body bytes and their rate bound what slow senders hold); beyond it 503 `overloaded`.
    max_concurrent_requests: Count = "RELAY_MAX_CONCURRENT_REQUESTS", file, default "8192";
    /// relay-gcf: body bytes buffered at once, counted as they arrive; bodies still arriving may hold half of it, so complete ones always find room; beyond it 503 `overloaded`.
    max_buffered_bytes: ByteLimit = "RELAY_MAX_BUFFERED_BYTES", file, default "67108864";
    /// Without `[sinks]`: append one JSON line per notification to this path, or `-` for standard output.
    file_sink: FileTarget = "RELAY_FILE_SINK", var, default "";
    /// Without `[sinks]`: publish to this SQS queue; a name ending in `.fifo` makes it FIFO.
    sqs_queue_url: QueueUrl = "RELAY_SQS_QUEUE_URL", var, default "";
    /// Body plus attributes above this get 413 before any call to the queue; set it lower for a queue with a smaller `MaximumMessageSize`.
    sqs_max_message_bytes: ByteLimit = "RELAY_SQS_MAX_MESSAGE_BYTES", var, default "1048576";
    /// Without `[sinks]`: publish to this SNS topic; a name ending in `.fifo` makes it FIFO.
    sns_topic_arn: TopicArn = "RELAY_SNS_TOPIC_ARN", var, default "";
    /// Body plus attributes above this get 413 before any call to the topic.
    sns_max_message_bytes: ByteLimit = "RELAY_SNS_MAX_MESSAGE_BYTES", var, default "262144";
    /// Without `[sinks]`: publish to this Pub/Sub topic, `projects/<project>/topics/<topic>`.
    pubsub_topic: PubSubTopic = "RELAY_PUBSUB_TOPIC", var, default "";
    /// Use `match.bundle_uuid` as the Pub/Sub ordering key.
    pubsub_ordering: Flag = "RELAY_PUBSUB_ORDERING", var, default "false";
    /// Data plus attributes above this get 413 before any call to the topic.
    pubsub_max_message_bytes: ByteLimit = "RELAY_PUBSUB_MAX_MESSAGE_BYTES", var, default "10000000";
    /// `relay send`: the HMAC secret to sign with.
    send_secret: Secret = "RELAY_SEND_SECRET", var, default "";
}

/// Parses a variable's text with the setting's own parser, the one the file uses too.
fn parse_text<'de, T: serde::Deserialize<'de>>(text: &'de str) -> Result<T, String> {
    use serde::de::IntoDeserializer;
    let text: serde::de::value::StrDeserializer<'de, serde::de::value::Error> =
        text.into_deserializer();
    T::deserialize(text).map_err(|e| e.to_string())
}

/// Fails the value of a key `[relay]` does not take, with the reason.
struct Refuse(String);

impl<'de> serde::de::DeserializeSeed<'de> for Refuse {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, _: D) -> Result<(), D::Error> {
        Err(D::Error::custom(self.0))
    }
}

/// Why `[relay]` refuses a key.
fn refusal(key: &str) -> String {
    match SETTINGS.iter().find(|s| s.key == key) {
        Some(s)
            if s.var.contains("_SINK") || s.var.contains("_QUEUE") || s.var.contains("TOPIC") =>
        {
            format!("{key}: destinations go under [sinks.<name>], not [relay]")
        }
        Some(s) => format!("{key}: set by the variable {} only, not in the file", s.var),
        None => {
            let keys: Vec<&str> = SETTINGS
                .iter()
                .filter(|s| s.in_file)
                .map(|s| s.key)
                .collect();
            format!("unknown key {key:?}; [relay] takes {}", keys.join(", "))
        }
    }
}

impl Settings {
    /// Reads every setting's variable through `var`; the error names the variable.
    pub fn from_vars(var: &impl Fn(&str) -> Option<String>) -> (Self, Vec<(&'static str, String)>) {
        let mut settings = Self::default();
        let mut errors = Vec::new();
        for setting in SETTINGS {
            if let Some(text) = var(setting.var)
                && let Err(message) = settings.set_text(setting.key, &text)
            {
                errors.push((setting.var, message));
            }
        }
        (settings, errors)
    }

    /// These settings, with each one left unset taken from its default, where the default is
    /// a value (descriptive defaults such as the log format's are resolved by the caller).
    pub(crate) fn or_defaults(mut self) -> Self {
        for setting in SETTINGS.iter().filter(|s| !s.default.is_empty()) {
            if self.shown(setting.key).is_none() {
                // A descriptive default does not parse; it stays unset.
                let _ = self.set_text(setting.key, setting.default);
            }
        }
        self
    }
}

/// The settings table of docs/configuration.md, as the settings table says it should read.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| variable | `[relay]` key | default | meaning |\n| --- | --- | --- | --- |\n",
    );
    for s in SETTINGS {
        let key = if s.in_file {
            format!("`{}`", s.key)
        } else {
            String::new()
        };
        let default = if s.default.is_empty() || s.default.contains(' ') {
            s.default.to_owned()
        } else {
            format!("`{}`", s.default)
        };
        let _ = writeln!(out, "| `{}` | {key} | {default} | {} |", s.var, s.doc);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_defaults_parse_and_the_descriptive_ones_are_known() {
        let defaults = Settings::default().or_defaults();
        let descriptive: Vec<&str> = SETTINGS
            .iter()
            .filter(|s| !s.default.is_empty() && defaults.shown(s.key).is_none())
            .map(|s| s.key)
            .collect();
        assert_eq!(
            descriptive,
            ["batch_wait_ms", "log_format", "metrics", "listen"]
        );
    }

    #[test]
    fn byte_defaults_agree_with_the_destinations() {
        use crate::sink::{PubSubConfig, SnsConfig, SqsConfig};
        let d = Settings::default().or_defaults();
        let sqs = SqsConfig::new("https://sqs.us-east-1.amazonaws.com/1/q".parse().unwrap());
        let sns = SnsConfig::new("arn:aws:sns:us-east-1:1:t".parse().unwrap());
        let pubsub = PubSubConfig::new("projects/p/topics/dss".parse().unwrap());
        assert_eq!(d.sqs_max_message_bytes, Some(sqs.max_message_bytes.0));
        assert_eq!(d.sns_max_message_bytes, Some(sns.max_message_bytes.0));
        assert_eq!(d.pubsub_max_message_bytes, Some(pubsub.max_message_bytes.0));
    }

    #[test]
    fn keys_and_variables_correspond() {
        for s in SETTINGS {
            assert_eq!(s.var, format!("RELAY_{}", s.key.to_ascii_uppercase()));
            assert!(!s.doc.is_empty() && !s.doc.contains('\n'), "{}", s.var);
        }
    }
}
