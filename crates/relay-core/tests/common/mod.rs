//! Helpers shared by relay-core's integration tests: capture parsing and in-memory sinks.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use bytes::Bytes;
use relay_core::verify::FixedClock;
use relay_core::{Config, Message, Receipt, Relay, Sink, SinkError};

/// The Date all DSS captures were signed with.
pub const CAPTURE_DATE: &str = "Fri, 15 Nov 2019 20:24:11 GMT";
/// The DSS test suite's HMAC key, used by the captures.
pub const CAPTURE_SECRET: &str = "ribos0me";

pub fn capture_time() -> SystemTime {
    httpdate::parse_http_date(CAPTURE_DATE).unwrap()
}

/// Parses a raw HTTP/1.1 request capture into the request the relay receives.
pub fn parse_capture(raw: &[u8]) -> http::Request<Bytes> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let httparse::Status::Complete(offset) = req.parse(raw).expect("valid capture") else {
        panic!("incomplete capture");
    };
    let mut builder = http::Request::builder()
        .method(req.method.unwrap())
        .uri(req.path.unwrap());
    for h in req.headers.iter() {
        builder = builder.header(h.name, h.value);
    }
    builder
        .body(Bytes::copy_from_slice(&raw[offset..]))
        .unwrap()
}

/// A configuration from `(variable, value)` pairs, with a file sink that tests replace.
pub fn config(vars: &[(&str, &str)]) -> Config {
    let mut all: BTreeMap<String, String> = [("RELAY_FILE_SINK".to_owned(), "-".to_owned())].into();
    all.extend(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    Config::from_vars(|name| all.get(name).cloned()).expect("valid test configuration")
}

/// Records every message it accepts.
#[derive(Debug, Default)]
pub struct RecordingSink {
    pub messages: Mutex<Vec<Message>>,
}

#[async_trait::async_trait]
impl Sink for RecordingSink {
    fn name(&self) -> &str {
        "memory"
    }

    async fn publish(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
        let mut messages = self.messages.lock().unwrap();
        batch
            .iter()
            .map(|m| {
                messages.push(m.clone());
                Ok(Receipt {
                    message_id: Some(messages.len().to_string()),
                })
            })
            .collect()
    }
}

/// Fails every message, retryably or not.
#[derive(Debug)]
pub struct FailingSink {
    pub name: &'static str,
    pub retryable: bool,
}

#[async_trait::async_trait]
impl Sink for FailingSink {
    fn name(&self) -> &str {
        self.name
    }

    async fn publish(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
        batch
            .iter()
            .map(|_| {
                let cause = "simulated failure".into();
                Err(if self.retryable {
                    SinkError::Retryable(cause)
                } else {
                    SinkError::Permanent(cause)
                })
            })
            .collect()
    }
}

/// A relay with the capture key, the clock pinned to the captures' Date and one recording sink.
pub fn capture_relay(extra: &[(&str, &str)]) -> (Relay, Arc<RecordingSink>) {
    let mut vars = vec![("RELAY_HMAC_SECRET", CAPTURE_SECRET)];
    vars.extend_from_slice(extra);
    let sink = Arc::new(RecordingSink::default());
    let relay = Relay::new(
        config(&vars),
        vec![Arc::clone(&sink) as Arc<dyn Sink>],
        Arc::new(FixedClock(capture_time())),
    );
    (relay, sink)
}

pub fn error_code(outcome: &relay_core::Outcome) -> String {
    let body: serde_json::Value = serde_json::from_slice(&outcome.body).expect("JSON body");
    body["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
