//! What the relay's tests share, so that each is written once: the DSS captures by name,
//! configurations from `(variable, value)` pairs or a file, sinks that record, fail or never
//! answer, a [`Relay`] with those sinks and the configured routes, and requests signed and
//! encoded as the DSS sent them.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

pub mod fake_sqs;
pub mod stores;

use bytes::Bytes;
use relay_core::config::ConfigErrors;
use relay_core::verify::{Clock, FixedClock, Secret, sign};
use relay_core::{Config, Message, Outcome, Receipt, Relay, Sink, SinkError};

/// The captured DSS requests, byte for byte, and what they were signed with.
pub mod capture {
    use super::*;

    /// The `Date` every capture was signed with.
    pub const DATE: &str = "Fri, 15 Nov 2019 20:24:11 GMT";
    /// The DSS test suite's HMAC secret, which signed the captures.
    pub const SECRET: &str = "ribos0me";
    /// Every capture, by name.
    pub const NAMES: [&str; 3] = [
        "v2-json-post",
        "v1-json-post-custom-keyid",
        "v2-multipart-put",
    ];

    /// The captures' `Date` as a time, for a clock pinned to it.
    pub fn time() -> SystemTime {
        httpdate::parse_http_date(DATE).expect("a valid date")
    }

    /// The raw request, as it crossed the wire.
    pub fn raw(name: &str) -> &'static [u8] {
        match name {
            "v2-json-post" => include_bytes!("../../relay-core/tests/data/dss/v2-json-post.http"),
            "v1-json-post-custom-keyid" => {
                include_bytes!("../../relay-core/tests/data/dss/v1-json-post-custom-keyid.http")
            }
            "v2-multipart-put" => {
                include_bytes!("../../relay-core/tests/data/dss/v2-multipart-put.http")
            }
            other => panic!("no capture {other:?}; captures are {NAMES:?}"),
        }
    }

    /// The body of the capture.
    pub fn body(name: &str) -> &'static [u8] {
        let raw = raw(name);
        &raw[raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a header end")
            + 4..]
    }

    /// The capture as the request the relay receives.
    pub fn request(name: &str) -> http::Request<Bytes> {
        let raw = raw(name);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut parsed = httparse::Request::new(&mut headers);
        let httparse::Status::Complete(offset) = parsed.parse(raw).expect("a valid capture") else {
            panic!("incomplete capture {name}");
        };
        let mut builder = http::Request::builder()
            .method(parsed.method.expect("a method"))
            .uri(parsed.path.expect("a target"));
        for h in parsed.headers.iter() {
            builder = builder.header(h.name, h.value);
        }
        builder
            .body(Bytes::copy_from_slice(&raw[offset..]))
            .expect("a valid request")
    }

    /// The payload the capture carries: the body, or the `payload` field of a multipart body.
    pub fn payload(name: &str) -> &'static [u8] {
        match name {
            // The multipart capture carries the v2 JSON capture's body in its payload field.
            "v2-multipart-put" => body("v2-json-post"),
            other => body(other),
        }
    }
}

/// A loopback port nothing listens on (yet).
/// A binary of the workspace built next to the running test (`target/<profile>/<name>`): the
/// relay-gcf server, the `relay` command. `cargo build --workspace` builds them.
pub fn built_binary(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let path = exe
        .parent()
        .and_then(std::path::Path::parent)
        .expect("target/<profile>/deps")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: cargo build --workspace",
        path.display()
    );
    path
}

pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener.local_addr().expect("an address").port()
}

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

/// Records every message it accepts.
#[derive(Debug)]
pub struct RecordingSink {
    name: String,
    messages: Mutex<Vec<Message>>,
}

impl RecordingSink {
    /// An empty recorder called `name` in logs and receipts.
    pub fn new(name: &str) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            messages: Mutex::new(Vec::new()),
        })
    }

    /// What it has accepted so far, in order.
    pub fn messages(&self) -> Vec<Message> {
        self.messages.lock().expect("not poisoned").clone()
    }
}

#[async_trait::async_trait]
impl Sink for RecordingSink {
    fn name(&self) -> &str {
        &self.name
    }

    async fn publish(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
        let mut messages = self.messages.lock().expect("not poisoned");
        batch
            .iter()
            .map(|m| {
                messages.push(m.clone());
                Ok(Receipt::new(Some(messages.len().to_string())))
            })
            .collect()
    }
}

/// Fails every message, retryably or not, and counts the calls.
#[derive(Debug)]
pub struct FailingSink {
    name: String,
    retryable: bool,
    calls: Mutex<usize>,
}

impl FailingSink {
    /// A sink whose every publish fails.
    pub fn new(name: &str, retryable: bool) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            retryable,
            calls: Mutex::new(0),
        })
    }

    /// How many publish calls it received.
    pub fn calls(&self) -> usize {
        *self.calls.lock().expect("not poisoned")
    }
}

#[async_trait::async_trait]
impl Sink for FailingSink {
    fn name(&self) -> &str {
        &self.name
    }

    async fn publish(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
        *self.calls.lock().expect("not poisoned") += 1;
        let fail = || -> SinkError {
            let cause = "simulated failure".into();
            match self.retryable {
                true => SinkError::Retryable(cause),
                false => SinkError::Permanent(cause),
            }
        };
        batch.iter().map(|_| Err(fail())).collect()
    }
}

/// Never answers.
#[derive(Debug)]
pub struct StuckSink;

#[async_trait::async_trait]
impl Sink for StuckSink {
    fn name(&self) -> &str {
        "stuck"
    }

    async fn publish(&self, _: &[Message]) -> Vec<Result<Receipt, SinkError>> {
        std::future::pending().await
    }
}

/// A relay with the configuration's routes and shaping, whose sinks are `sinks`, by configured
/// name; a configured sink without one here gets a recorder nobody reads.
pub fn relay(config: Config, sinks: &[(&str, Arc<dyn Sink>)], clock: Arc<dyn Clock>) -> Relay {
    Relay::with_sinks(
        config,
        |c| match sinks.iter().find(|(name, _)| *name == c.name) {
            Some((_, sink)) => Arc::clone(sink),
            None => RecordingSink::new(&c.name),
        },
        clock,
    )
}

/// A relay with the capture secret, the clock at the captures' `Date`, `pairs` on top, and one
/// recording sink in place of the configured `file` sink.
pub fn capture_relay(pairs: &[(&str, &str)]) -> (Relay, Arc<RecordingSink>) {
    let mut all = vec![
        ("RELAY_HMAC_SECRET", capture::SECRET),
        ("RELAY_FILE_SINK", "-"),
    ];
    all.extend_from_slice(pairs);
    let sink = RecordingSink::new("memory");
    let relay = relay(
        config(&all),
        &[("file", Arc::clone(&sink) as Arc<dyn Sink>)],
        capture_clock(),
    );
    (relay, sink)
}

/// A clock at the captures' `Date`.
pub fn capture_clock() -> Arc<dyn Clock> {
    Arc::new(FixedClock(capture::time()))
}

/// Signs requests as the DSS did: `Date`, `Digest` and `Authorization` over `date digest`.
#[derive(Debug, Clone)]
pub struct Signer {
    /// The keyId.
    pub key_id: String,
    /// The secret.
    pub secret: String,
    /// The time the `Date` header gives.
    pub at: SystemTime,
}

/// The multipart boundary of the DSS captures.
pub const BOUNDARY: &str = "2769baffc4f24cbc83ced26aa0c2f712";

impl Signer {
    /// Signs with the capture secret at the captures' `Date`.
    pub fn capture(key_id: &str) -> Self {
        Self {
            key_id: key_id.to_owned(),
            secret: capture::SECRET.to_owned(),
            at: capture::time(),
        }
    }

    /// A signed `POST /` with `body` as `application/json`.
    pub fn json(&self, body: &str) -> http::Request<Bytes> {
        self.request("application/json", body.as_bytes().to_vec())
    }

    /// A signed `PUT /` with `payload` in the `payload` field after `foo=bar`, as the DSS's
    /// multipart subscriptions sent it.
    pub fn multipart(&self, payload: &str) -> http::Request<Bytes> {
        let fields = [("foo".to_owned(), "bar".to_owned())];
        let body = relay_core::intake::dss_multipart_body(
            BOUNDARY,
            &fields,
            "payload",
            payload.as_bytes(),
        );
        let mut request = self.request(&format!("multipart/form-data; boundary={BOUNDARY}"), body);
        *request.method_mut() = http::Method::PUT;
        request
    }

    /// A signed `POST /` with this content type and body.
    pub fn request(&self, content_type: &str, body: Vec<u8>) -> http::Request<Bytes> {
        let signature = sign(
            &self.key_id,
            &Secret::new(self.secret.as_str()),
            self.at,
            &body,
        )
        .expect("a valid keyId");
        http::Request::post("/")
            .header("content-type", content_type)
            .header("date", signature.date)
            .header("digest", signature.digest)
            .header("authorization", signature.authorization)
            .body(Bytes::from(body))
            .expect("a valid request")
    }
}

/// Panics, showing the body, unless the answer is 202.
pub fn assert_accepted(outcome: &Outcome) {
    let body = String::from_utf8_lossy(&outcome.body);
    assert_eq!(outcome.status, http::StatusCode::ACCEPTED, "{body}");
}

/// Runs `command` (a relay binary with no HMAC key configured) and checks that it refuses to
/// start: exit code `code`, and the reason on standard error.
pub fn assert_refuses_without_a_key(command: &mut std::process::Command, code: i32) {
    let output = command
        .env_remove("RELAY_HMAC_SECRET")
        .env_remove("RELAY_HMAC_KEYS")
        .env_remove("RELAY_ALLOW_UNSIGNED")
        .env("RELAY_FILE_SINK", "-")
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    assert!(
        stderr.contains("RELAY_HMAC_KEYS: no HMAC key is configured"),
        "{stderr}"
    );
}

/// Configuration files with an error on a line that holds the secret `s3cret-…`: whatever
/// reports the error must give its place and must not repeat the line.
pub const FILES_WITH_A_BROKEN_SECRET_LINE: [&str; 5] = [
    "[relay]\nhmac_secret = \"s3cret-unterminated\n",
    "[relay]\nhmac_secret = s3cret-bare\n",
    "[relay]\nhmac_keys = { k = \"s3cret-in-table\" x }\n",
    "[relay]\nhmac_keys = \"s3cret-not-json\"\n",
    "[relay]\nhmac_secret = \"s3cret-first\"\nhmac_secret = \"s3cret-again\"\n",
];

/// The status and `error.code` (empty for a success) of an answer.
pub fn status_and_code(outcome: &Outcome) -> (u16, String) {
    let body: serde_json::Value = serde_json::from_slice(&outcome.body).expect("a JSON body");
    let code = body["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (outcome.status.as_u16(), code)
}

/// A short v2 notification with the given event type.
pub fn v2(event_type: &str) -> String {
    format!(
        r#"{{"subscription_id": "s", "event_type": "{event_type}", "match": {{"bundle_uuid": "u", "bundle_version": "v"}}}}"#
    )
}

/// The fuzz targets' bodies, shared with the regression test that replays the committed corpora
/// on the stable toolchain. Each takes arbitrary bytes, must never panic on them, and asserts an
/// invariant that would show a real fault.
pub mod fuzz {
    use std::sync::OnceLock;

    use bytes::Bytes;
    use relay_core::config::FileConfig;
    use relay_core::route::{Input, Pattern};
    use relay_core::verify::{self, FixedClock, KeyRing, Policy, Secret, SignedRequest};

    use super::capture;

    /// The `Authorization` parser: an accepted header names a non-empty keyId it contains.
    pub fn signature_header(data: &[u8]) {
        let Ok(text) = std::str::from_utf8(data) else {
            return;
        };
        if let Ok(key_id) = verify::parse_authorization(text) {
            assert!(!key_id.is_empty() && text.contains(key_id), "{text:?}");
        }
    }

    /// Verification end to end over `Authorization`, `Date` and `Digest` lines and a body: a
    /// request is accepted only when it carries exactly the signature and digest the key gives.
    pub fn verification(data: &[u8]) {
        let mut parts = data.splitn(4, |&b| b == b'\n');
        let (authorization, date, digest) = (parts.next(), parts.next(), parts.next());
        let body = parts.next().unwrap_or_default();
        let mut headers = http::HeaderMap::new();
        for (name, value) in [
            ("authorization", authorization),
            ("date", date),
            ("digest", digest),
        ] {
            if let Some(value) = value.and_then(|v| http::HeaderValue::from_bytes(v).ok()) {
                headers.insert(name, value);
            }
        }
        let uri = http::Uri::from_static("/");
        let request = SignedRequest {
            method: &http::Method::POST,
            uri: &uri,
            headers: &headers,
            body,
        };
        let keys = KeyRing::new(
            [("k".to_owned(), Secret::new(capture::SECRET))].into(),
            None,
        );
        let policy = Policy {
            max_clock_skew: None,
            allow_unsigned: false,
        };
        if verify::verify(request, &keys, &policy, &FixedClock(capture::time())).is_ok() {
            let date = headers["date"].to_str().expect("verified headers are text");
            let at = httpdate::parse_http_date(date).unwrap_or(capture::time());
            let expected =
                verify::sign("k", &Secret::new(capture::SECRET), at, body).expect("a valid keyId");
            assert_eq!(
                headers["digest"], expected.digest,
                "accepted with a digest that is not the body's"
            );
            let given = headers["authorization"].to_str().unwrap_or_default();
            let signature = |v: &str| {
                v.split("signature=\"")
                    .nth(1)
                    .map(|s| s.split('"').next().unwrap_or_default().to_owned())
            };
            assert_eq!(
                signature(given),
                signature(expected.authorization.to_str().unwrap_or_default()),
                "accepted a signature the key did not make"
            );
        }
    }

    fn runtime() -> &'static tokio::runtime::Runtime {
        static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
        RUNTIME.get_or_init(|| {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a runtime")
        })
    }

    /// Multipart and JSON intake over a `Content-Type` line and a body: the payload is always
    /// bytes of the body itself, never a rewritten copy.
    pub fn intake(data: &[u8]) {
        let (content_type, body) = match data.iter().position(|&b| b == b'\n') {
            Some(i) => (&data[..i], &data[i + 1..]),
            None => (data, &[][..]),
        };
        let mut headers = http::HeaderMap::new();
        if let Ok(value) = http::HeaderValue::from_bytes(content_type) {
            headers.insert("content-type", value);
        }
        let body = Bytes::copy_from_slice(body);
        let result = runtime().block_on(relay_core::intake::extract_payload(
            &headers,
            body.clone(),
            "payload",
        ));
        if let Ok(payload) = result {
            let inside = payload.is_empty() || body.windows(payload.len()).any(|w| w == payload);
            assert!(inside, "the payload is not a slice of the body");
        }
    }

    /// Notification parsing: an accepted payload has the required fields and a hex dedup key.
    pub fn notification(data: &[u8]) {
        if let Ok(n) = relay_core::Notification::parse(Bytes::copy_from_slice(data)) {
            assert!(!n.subscription_id().is_empty() && !n.bundle_uuid().is_empty());
            assert!(
                n.dedup_key().len() == 64 && n.dedup_key().bytes().all(|b| b.is_ascii_hexdigit())
            );
            assert_eq!(
                n.payload().as_ref(),
                data,
                "the payload is kept byte for byte"
            );
        }
    }

    /// Pattern compilation and matching over a pattern and a document separated by a NUL byte:
    /// `matches` and `first_failure` always agree.
    pub fn pattern(data: &[u8]) {
        let (pattern, document) = match data.iter().position(|&b| b == 0) {
            Some(i) => (&data[..i], &data[i + 1..]),
            None => (data, &b"{}"[..]),
        };
        let (Ok(pattern), Ok(document)) = (
            serde_json::from_slice::<serde_json::Value>(pattern),
            serde_json::from_slice::<serde_json::Value>(document),
        ) else {
            return;
        };
        if let Ok(compiled) = Pattern::compile(&pattern) {
            let request = serde_json::json!({"path": "/", "query": {}, "headers": {}});
            let input = Input::new(&document, &request);
            assert_eq!(
                compiled.matches(&input),
                compiled.first_failure(&input).is_none(),
                "{pattern}"
            );
        }
    }

    /// The configuration document: an error gives a place and never the text of a line. The
    /// lines checked are assignments (`key = value`): a line of free text could be the parser's
    /// own wording, which the message rightly contains.
    pub fn config_file(data: &[u8]) {
        let Ok(text) = std::str::from_utf8(data) else {
            return;
        };
        if let Err(message) = FileConfig::parse(text) {
            assert!(
                message.starts_with(|c: char| c.is_ascii_digit()),
                "no place: {message}"
            );
            let assignments = text
                .lines()
                .map(str::trim)
                .filter(|l| l.len() >= 24 && l.contains(" = "));
            for line in assignments {
                assert!(
                    !message.contains(line),
                    "the line {line:?} is echoed in {message}"
                );
            }
        }
    }
}
