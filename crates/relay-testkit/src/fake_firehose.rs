//! An Amazon Data Firehose endpoint on loopback, in memory, for the benchmark: the archive's
//! delivery stream (`RELAY_ARCHIVE_STREAM=firehose://NAME`, any name), answering the AWS JSON
//! 1.1 protocol the SDK speaks (`X-Amz-Target: Firehose_20150804.PutRecordBatch`, …):
//! `PutRecord` and `PutRecordBatch` take every record and answer its id, anything else is
//! answered 400. It keeps nothing but counts: calls and records. It may answer after a set
//! latency.

use crate::loopback::AwsCall;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{Value, json};

/// The running endpoint. Clones share it.
#[derive(Debug, Clone)]
pub struct FakeFirehose {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    state: Arc<State>,
}

#[derive(Debug, Default)]
struct State {
    calls: AtomicU64,
    records: AtomicU64,
    latency_us: AtomicU64,
}

impl FakeFirehose {
    /// Starts the endpoint on a free loopback port, on the current Tokio runtime.
    pub async fn start() -> Self {
        let state = Arc::new(State::default());
        let endpoint = crate::loopback::serve_with(Arc::clone(&state), answer).await;
        Self { endpoint, state }
    }

    /// Calls received so far.
    pub fn calls(&self) -> u64 {
        self.state.calls.load(Ordering::Relaxed)
    }

    /// Records taken so far.
    pub fn records(&self) -> u64 {
        self.state.records.load(Ordering::Relaxed)
    }

    /// Every call is answered after `latency` (zero: at once).
    pub fn set_latency(&self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.state.latency_us.store(us, Ordering::Relaxed);
    }
}

async fn answer(
    state: Arc<State>,
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, std::convert::Infallible> {
    state.calls.fetch_add(1, Ordering::Relaxed);
    let call = AwsCall::read(request).await;
    let (operation, input) = (call.operation("Firehose_20150804."), &call.input);
    let latency = state.latency_us.load(Ordering::Relaxed);
    if latency > 0 {
        tokio::time::sleep(Duration::from_micros(latency)).await;
    }
    let id = |n: u64| format!("{n:056}");
    let (status, answer) = match operation {
        "PutRecord" => {
            let n = state.records.fetch_add(1, Ordering::Relaxed);
            (200, json!({"RecordId": id(n), "Encrypted": false}))
        }
        "PutRecordBatch" => {
            let count = input["Records"].as_array().map_or(0, Vec::len) as u64;
            let first = state.records.fetch_add(count, Ordering::Relaxed);
            let responses: Vec<Value> = (first..first + count)
                .map(|n| json!({"RecordId": id(n)}))
                .collect();
            let answer =
                json!({"FailedPutCount": 0, "Encrypted": false, "RequestResponses": responses});
            (200, answer)
        }
        other => (
            400,
            json!({"__type": "InvalidArgumentException", "message": format!("the fake answers no {other:?}")}),
        ),
    };
    let response = hyper::Response::builder()
        .status(status)
        .header("content-type", "application/x-amz-json-1.1")
        .body(Full::new(Bytes::from(answer.to_string())))
        .expect("a response");
    Ok(response)
}
