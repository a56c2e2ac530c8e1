//! An SQS-protocol endpoint on loopback that injects faults: latency, per-entry `Failed[]`,
//! 503 storms, connection resets and hangs. It speaks the JSON protocol the AWS SDK uses
//! (`X-Amz-Target: AmazonSQS.SendMessage` and `AmazonSQS.SendMessageBatch`) and counts every
//! message body it reported as accepted, so a test can hold the relay to its answers.

use crate::loopback::AwsCall;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
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
    /// Answers this share of calls with a retryable 500 `InternalError`, taking nothing.
    Failures(f64),
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
    /// The queue the fault applies to; every queue when `None`.
    faulty_queue: Option<String>,
    started: Instant,
    calls: AtomicU64,
    /// TCP connections accepted.
    connections: AtomicU64,
    /// Each call's `X-Amz-Target`, in order.
    targets: Mutex<Vec<String>>,
    /// While set, every call is refused as for a deleted queue ([`FakeSqs::refuse`]).
    refusing: AtomicBool,
    /// Messages taken by calls that then never answered.
    taken_unanswered: AtomicU64,
    /// Per queue name, every message body accepted and how many times.
    accepted: Mutex<HashMap<String, HashMap<String, u32>>>,
}

/// The queue of [`FakeSqs::queue_url`].
pub const QUEUE: &str = "faults";

impl FakeSqs {
    /// Starts the endpoint on a free loopback port, on the current Tokio runtime; `fault`
    /// applies to every queue.
    pub async fn start(fault: Fault) -> Self {
        Self::start_for(fault, None).await
    }

    /// Starts the endpoint with `fault` applied to the calls for the queue `faulty_queue` only
    /// (every queue when `None`); the others answer as with [`Fault::None`].
    pub async fn start_for(fault: Fault, faulty_queue: Option<&str>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let endpoint = format!("http://{}", listener.local_addr().expect("an address"));
        let state = Arc::new(State {
            fault,
            faulty_queue: faulty_queue.map(str::to_owned),
            started: Instant::now(),
            calls: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            targets: Mutex::new(Vec::new()),
            refusing: AtomicBool::new(false),
            taken_unanswered: AtomicU64::new(0),
            accepted: Mutex::new(HashMap::new()),
        });
        let serving = Arc::clone(&state);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                serving.connections.fetch_add(1, Ordering::Relaxed);
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

    /// The URL of the queue [`QUEUE`] on this endpoint.
    pub fn queue_url(&self) -> String {
        self.queue_url_of(QUEUE)
    }

    /// The URL of the queue `name` on this endpoint (every name exists).
    pub fn queue_url_of(&self, name: &str) -> String {
        format!("{}/123456789012/{name}", self.endpoint)
    }

    /// While `on`, answers every call 400 `QueueDoesNotExist`, taking nothing: a queue deleted
    /// (an error the relay answers 502, which the sender retries until it gives up).
    pub fn refuse(&self, on: bool) {
        self.state.refusing.store(on, Ordering::Relaxed);
    }

    /// How many calls it received.
    pub fn calls(&self) -> u64 {
        self.state.calls.load(Ordering::Relaxed)
    }

    /// How many TCP connections it accepted.
    pub fn connections(&self) -> u64 {
        self.state.connections.load(Ordering::Relaxed)
    }

    /// Each call's operation (`AmazonSQS.SendMessage`, …), in the order they came.
    pub fn targets(&self) -> Vec<String> {
        self.state.targets.lock().expect("not poisoned").clone()
    }

    /// How many messages it took in calls it then never answered ([`Fault::Hangs`]): each
    /// one a message the caller cannot know was taken.
    pub fn taken_unanswered(&self) -> u64 {
        self.state.taken_unanswered.load(Ordering::Relaxed)
    }

    /// How many distinct message bodies the queue [`QUEUE`] accepted.
    pub fn distinct(&self) -> usize {
        self.accepted().len()
    }

    /// Every message body the queue [`QUEUE`] accepted, with how many times.
    pub fn accepted(&self) -> HashMap<String, u32> {
        self.accepted_in(QUEUE)
    }

    /// Every message body the queue `name` accepted, with how many times.
    pub fn accepted_in(&self, name: &str) -> HashMap<String, u32> {
        let accepted = self.state.accepted.lock().expect("not poisoned");
        accepted.get(name).cloned().unwrap_or_default()
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
    let AwsCall { target, input } = AwsCall::read(request).await;
    state
        .targets
        .lock()
        .expect("not poisoned")
        .push(target.clone());
    let queue = input["QueueUrl"]
        .as_str()
        .and_then(|url| url.rsplit('/').next())
        .unwrap_or_default()
        .to_owned();
    if state.refusing.load(Ordering::Relaxed) {
        let error = json!({"__type": "com.amazonaws.sqs#QueueDoesNotExist", "message": "The specified queue does not exist."});
        return Ok(respond(400, &error));
    }
    let fault = match &state.faulty_queue {
        Some(faulty) if *faulty != queue => Fault::None,
        _ => state.fault,
    };
    if let Some(reply) = injected(&state, fault, call).await {
        return reply;
    }
    let reply = match target.as_str() {
        "AmazonSQS.SendMessage" => {
            let message = input["MessageBody"].as_str().unwrap_or_default();
            json!({"MessageId": accept(&state, &queue, message), "MD5OfMessageBody": ""})
        }
        "AmazonSQS.SendMessageBatch" => batch_reply(&state, fault, call, &queue, &input),
        other => {
            let error = json!({"__type": "com.amazonaws.sqs#InvalidAction", "message": other});
            return Ok(respond(400, &error));
        }
    };
    if matches!(fault, Fault::Hangs(share) if draw(call) < share) {
        let taken = match reply["Successful"].as_array() {
            Some(entries) => entries.len() as u64,
            None => 1,
        };
        state.taken_unanswered.fetch_add(taken, Ordering::Relaxed);
        std::future::pending::<()>().await;
    }
    Ok(respond(200, &reply))
}

/// The fault's answer for call number `call` before it is served, if it has one.
async fn injected(state: &State, fault: Fault, call: u64) -> Option<Reply> {
    match fault {
        Fault::Latency(delay) => tokio::time::sleep(delay).await,
        Fault::Storms { on, off } => {
            let period = (on + off).as_millis().max(1);
            if state.started.elapsed().as_millis() % period < on.as_millis() {
                let error =
                    json!({"__type": "com.amazonaws.sqs#ServiceUnavailable", "message": "storm"});
                return Some(Ok(respond(503, &error)));
            }
        }
        Fault::Resets(share) if draw(call) < share => {
            return Some(Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "injected reset",
            )));
        }
        Fault::Failures(share) if draw(call) < share => {
            let error = json!({"__type": "com.amazonaws.sqs#InternalError", "message": "injected"});
            return Some(Ok(respond(500, &error)));
        }
        _ => {}
    }
    None
}

/// A SendMessageBatch's answer: each entry taken, or failed as the fault says.
fn batch_reply(state: &State, fault: Fault, call: u64, queue: &str, input: &Value) -> Value {
    let (mut successful, mut failed) = (Vec::new(), Vec::new());
    let entries = input["Entries"].as_array().map_or(&[][..], Vec::as_slice);
    for (i, entry) in entries.iter().enumerate() {
        let id = entry["Id"].clone();
        if matches!(fault, Fault::EntryFailures(share) if draw(call * 16 + i as u64) < share) {
            failed.push(json!({"Id": id, "SenderFault": false, "Code": "InternalError", "Message": "injected"}));
            continue;
        }
        let message = entry["MessageBody"].as_str().unwrap_or_default();
        successful.push(
            json!({"Id": id, "MessageId": accept(state, queue, message), "MD5OfMessageBody": ""}),
        );
    }
    json!({"Successful": successful, "Failed": failed})
}

fn accept(state: &State, queue: &str, message: &str) -> String {
    let mut accepted = state.accepted.lock().expect("not poisoned");
    let queue = accepted.entry(queue.to_owned()).or_default();
    *queue.entry(message.to_owned()).or_default() += 1;
    format!("m-{}", queue.len())
}

fn respond(status: u16, body: &Value) -> hyper::Response<Full<Bytes>> {
    crate::loopback::aws_reply(status, body)
}
