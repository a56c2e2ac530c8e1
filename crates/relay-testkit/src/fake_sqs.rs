//! An SQS-protocol endpoint on loopback that injects faults: latency, per-entry `Failed[]`,
//! 503 storms, connection resets and hangs. It speaks the JSON protocol the AWS SDK uses
//! (`X-Amz-Target: AmazonSQS.SendMessage` and `AmazonSQS.SendMessageBatch`) and counts every
//! message body it reported as accepted, so a test can hold the relay to its answers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// What the endpoint does to calls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Answers every call at once.
    None,
    /// Answers every call after this long.
    Latency(Duration),
    /// Fails this share of batch entries (retryable `InternalError` in `Failed[]`).
    EntryFailures(f64),
    /// Answers 503 to every call during the first `on` of every `on + off` period.
    Storms {
        /// How long a storm lasts.
        on: Duration,
        /// How long the calm between storms lasts.
        off: Duration,
    },
    /// Drops the connection without an answer on this share of calls.
    Resets(f64),
    /// Takes the messages of this share of calls, then never answers (the caller cannot know
    /// they were taken, so its retries make duplicates).
    Hangs(f64),
}

/// The running endpoint.
#[derive(Debug, Clone)]
pub struct FakeSqs {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    fault: Fault,
    started: Instant,
    calls: AtomicU64,
    accepted: Mutex<HashMap<String, u32>>,
}

impl FakeSqs {
    /// Starts the endpoint on a free loopback port, on the current Tokio runtime.
    pub async fn start(fault: Fault) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let endpoint = format!("http://{}", listener.local_addr().expect("an address"));
        let state = Arc::new(State {
            fault,
            started: Instant::now(),
            calls: AtomicU64::new(0),
            accepted: Mutex::new(HashMap::new()),
        });
        let serving = Arc::clone(&state);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = Arc::clone(&serving);
                let service = service_fn(move |request| answer(Arc::clone(&state), request));
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service),
                );
            }
        });
        Self { endpoint, state }
    }

    /// A queue URL on this endpoint.
    pub fn queue_url(&self) -> String {
        format!("{}/123456789012/faults", self.endpoint)
    }

    /// How many calls it received.
    pub fn calls(&self) -> u64 {
        self.state.calls.load(Ordering::Relaxed)
    }

    /// How many distinct message bodies it accepted.
    pub fn distinct(&self) -> usize {
        self.state.accepted.lock().expect("not poisoned").len()
    }

    /// Every message body it accepted, with how many times.
    pub fn accepted(&self) -> HashMap<String, u32> {
        self.state.accepted.lock().expect("not poisoned").clone()
    }
}

/// A deterministic pseudo-random draw in [0, 1) for the `n`th event.
fn draw(n: u64) -> f64 {
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

type Reply = Result<hyper::Response<Full<Bytes>>, std::io::Error>;

async fn answer(state: Arc<State>, request: hyper::Request<hyper::body::Incoming>) -> Reply {
    let call = state.calls.fetch_add(1, Ordering::Relaxed);
    let target = request
        .headers()
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    match state.fault {
        Fault::Latency(delay) => tokio::time::sleep(delay).await,
        Fault::Storms { on, off } => {
            let period = (on + off).as_millis().max(1);
            if state.started.elapsed().as_millis() % period < on.as_millis() {
                let error =
                    json!({"__type": "com.amazonaws.sqs#ServiceUnavailable", "message": "storm"});
                return Ok(respond(503, &error));
            }
        }
        Fault::Resets(share) if draw(call) < share => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "injected reset",
            ));
        }
        _ => {}
    }
    let input: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let reply = match target.as_str() {
        "AmazonSQS.SendMessage" => {
            let message = input["MessageBody"].as_str().unwrap_or_default();
            json!({"MessageId": accept(&state, message), "MD5OfMessageBody": ""})
        }
        "AmazonSQS.SendMessageBatch" => {
            let (mut successful, mut failed) = (Vec::new(), Vec::new());
            let entries = input["Entries"].as_array().map_or(&[][..], Vec::as_slice);
            for (i, entry) in entries.iter().enumerate() {
                let id = entry["Id"].clone();
                if matches!(state.fault, Fault::EntryFailures(share) if draw(call * 16 + i as u64) < share)
                {
                    failed.push(json!({"Id": id, "SenderFault": false, "Code": "InternalError", "Message": "injected"}));
                    continue;
                }
                let message = entry["MessageBody"].as_str().unwrap_or_default();
                successful.push(
                    json!({"Id": id, "MessageId": accept(&state, message), "MD5OfMessageBody": ""}),
                );
            }
            json!({"Successful": successful, "Failed": failed})
        }
        other => {
            let error = json!({"__type": "com.amazonaws.sqs#InvalidAction", "message": other});
            return Ok(respond(400, &error));
        }
    };
    if matches!(state.fault, Fault::Hangs(share) if draw(call) < share) {
        std::future::pending::<()>().await;
    }
    Ok(respond(200, &reply))
}

fn accept(state: &State, message: &str) -> String {
    let mut accepted = state.accepted.lock().expect("not poisoned");
    *accepted.entry(message.to_owned()).or_default() += 1;
    format!("m-{}", accepted.len())
}

fn respond(status: u16, body: &Value) -> hyper::Response<Full<Bytes>> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/x-amz-json-1.0")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("a valid response")
}
