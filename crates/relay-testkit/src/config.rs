//! Configurations as the tests write them: from `(variable, value)` pairs, from a `relay.toml`
//! in a folder of its own, and files that must fail without repeating their secret.

use relay_core::Config;
use relay_core::config::ConfigErrors;
use relay_core::schemes::Window;
use relay_core::schemes::hmac::{Encoding, HmacConfig};

/// A variable lookup over `pairs` only (the last pair of a name wins), as `Config::from_vars`
/// takes it.
pub fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| {
        pairs
            .iter()
            .rfind(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

/// The configuration `pairs` give; panics with the problems when it is invalid.
pub fn config(pairs: &[(&str, &str)]) -> Config {
    Config::from_vars(vars(pairs)).unwrap_or_else(|e| panic!("a valid test configuration: {e}"))
}

/// The problems of an invalid configuration; panics when it is valid.
pub fn config_errors(pairs: &[(&str, &str)]) -> ConfigErrors {
    Config::from_vars(vars(pairs)).expect_err("an invalid configuration")
}

/// A `relay.toml` table of sources, one per scheme, each on `/<name>`: `dss`; `github`,
/// `shopify`, `stripe` and `slack` with their secret in `{prefix}SOURCE_SECRET`; `sw`
/// (Standard Webhooks) with `{prefix}SW_SECRET`; `http` (RFC 9421, on `/rfc9421`) with its
/// keys in `{prefix}RFC9421_KEYS`; `generic`, the generic HMAC as [`generic_hmac`] signs, on
/// `/hmac` with `{prefix}SOURCE_SECRET`.
pub fn every_scheme(prefix: &str) -> String {
    let mut toml = String::from("[sources.dss]\nscheme = \"dss\"\npaths = [\"/dss\"]\n");
    for (name, scheme, path, secret) in [
        ("github", "github", "/github", "SOURCE_SECRET"),
        ("shopify", "shopify", "/shopify", "SOURCE_SECRET"),
        ("stripe", "stripe", "/stripe", "SOURCE_SECRET"),
        ("slack", "slack", "/slack", "SOURCE_SECRET"),
        ("sw", "standard-webhooks", "/sw", "SW_SECRET"),
        ("http", "rfc9421", "/rfc9421", "RFC9421_KEYS"),
    ] {
        toml += &format!(
            "\n[sources.{name}]\nscheme = \"{scheme}\"\npaths = [\"{path}\"]\nsecret_env = \"{prefix}{secret}\"\n"
        );
    }
    toml + &format!(
        r#"
[sources.generic]
scheme = "hmac"
paths = ["/hmac"]
secret_env = "{prefix}SOURCE_SECRET"
header = "x-acme-signature"
prefix = "v1="
encoding = "base64"
template = "{{timestamp}}:{{id}}:{{body}}"
timestamp_header = "x-acme-timestamp"
id_header = "x-acme-delivery"
"#
    )
}

/// The generic HMAC source of [`every_scheme`]: `v1=` and the base64 HMAC of
/// `{timestamp}:{id}:{body}` in `x-acme-signature`, the timestamp in `x-acme-timestamp` and
/// the delivery id in `x-acme-delivery`.
pub fn generic_hmac() -> HmacConfig {
    HmacConfig {
        header: "x-acme-signature".into(),
        prefix: Some("v1=".into()),
        encoding: Encoding::Base64,
        template: "{timestamp}:{id}:{body}".into(),
        timestamp_header: Some("x-acme-timestamp".into()),
        id_header: Some("x-acme-delivery".into()),
        window: Window::default(),
    }
}

/// A `RELAY_CONFIG` file in a temporary folder that lives as long as this value.
#[derive(Debug)]
pub struct ConfigFile {
    _dir: tempfile::TempDir,
    /// The file's path.
    pub path: String,
}

impl ConfigFile {
    /// Writes `text` as `relay.toml`.
    pub fn new(text: &str) -> Self {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("relay.toml");
        std::fs::write(&path, text).expect("a writable folder");
        Self {
            _dir: dir,
            path: path.display().to_string(),
        }
    }

    /// The configuration this file and `pairs` give.
    pub fn load(&self, pairs: &[(&str, &str)]) -> Result<Config, ConfigErrors> {
        let mut all = vec![("RELAY_CONFIG", self.path.as_str())];
        all.extend_from_slice(pairs);
        Config::from_vars(vars(&all))
    }
}

/// A routes document (or the `[sinks]` and `[[routes]]` of a `relay.toml`) with one file sink
/// `sink` writing to `path` and one route `route` to it, taking what `pattern` (a TOML inline
/// table) matches, or everything without one.
pub fn file_route(sink: &str, path: &str, route: &str, pattern: Option<&str>) -> String {
    let mut text = format!(
        "[sinks.{sink}]\ntype = \"file\"\npath = \"{path}\"\n\n[[routes]]\nname = \"{route}\"\n"
    );
    if let Some(pattern) = pattern {
        text.push_str(&format!("match = {pattern}\n"));
    }
    text.push_str(&format!("to = [\"{sink}\"]\n"));
    text
}

/// A routes document (or the `[sinks]` and `[[routes]]` of a `relay.toml`) with every sink
/// type, each with its options, and routes with and without a pattern, `stop` and `fallback`.
pub const EVERY_SINK_TYPE: &str = r#"
[sinks.audit]
type = "file"
path = "/tmp/audit.jsonl"

[sinks.fifo]
type = "sqs"
queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/dss.fifo"
max_message_bytes = 4096
message_group_id = "{match.bundle_uuid}"
message_deduplication_id = "{$dedup_key}"
attributes = ["dss.event_type", "dss.subscription_id"]
extra_attributes = { team = "data", env = "prod" }

[sinks.topic]
type = "sns"
topic_arn = "arn:aws:sns:us-east-1:123456789012:dss-events"
max_message_bytes = 1000

[sinks.gcp]
type = "pubsub"
topic = "projects/p/topics/dss-events"
ordering_key = "{match.bundle_uuid}"

[[routes]]
name = "deletions"
match = { event_type = ["DELETE", "TOMBSTONE"], match = { bundle_version = [{ prefix = "2" }] } }
to = ["audit", "fifo"]
stop = true

[[routes]]
name = "rest"
to = ["topic", "gcp"]
fallback = true
"#;

/// Configuration files with an error on a line that holds the secret `s3cret-…`: whatever
/// reports the error must give its place and must not repeat the line.
pub const FILES_WITH_A_BROKEN_SECRET_LINE: [&str; 5] = [
    "[relay]\nhmac_secret = \"s3cret-unterminated\n",
    "[relay]\nhmac_secret = s3cret-bare\n",
    "[relay]\nhmac_keys = { k = \"s3cret-in-table\" x }\n",
    "[relay]\nhmac_keys = \"s3cret-not-json\"\n",
    "[relay]\nhmac_secret = \"s3cret-first\"\nhmac_secret = \"s3cret-again\"\n",
];
