//! A loopback Lambda Runtime API: the interface the `lambda_runtime` crate polls. `GET
//! /2018-06-01/runtime/invocation/next` hands out the run's events one at a time, with the
//! request id, deadline, function ARN and trace id headers Lambda sends; `POST
//! .../invocation/{id}/response` and `.../error` and `POST /2018-06-01/runtime/init/error` are
//! recorded with when they arrived. Once the events are handed out, the next poll is held
//! unanswered, as Lambda holds a frozen instance's, and the run is told the process is idle.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use super::cgroup;

/// The function's ARN in every event.
pub(crate) const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:relay-bench";

/// How long each invocation may take, as the deadline header says.
const TIMEOUT: Duration = Duration::from_secs(30);

/// One event to hand out.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    /// Its request id.
    pub(crate) id: String,
    /// The event document (a Function URL event).
    pub(crate) body: Bytes,
}

/// A response's request id, when it had arrived whole, and its body.
pub(crate) type Posted = (String, Instant, Bytes);

/// What the process did against the API, with when.
#[derive(Debug, Default, Clone)]
pub(crate) struct Log {
    /// When the first `/next` arrived.
    pub(crate) first_next: Option<Instant>,
    /// The process's CPU time when it first asked for an event.
    pub(crate) cpu_at_ready: Duration,
    /// The CPU time once both events were answered and it asked for the next.
    pub(crate) cpu_at_idle: Duration,
    /// Each event's id, with when it was handed out.
    pub(crate) handed: Vec<(String, Instant)>,
    /// Each response's id and body, with when it had arrived whole.
    pub(crate) responses: Vec<Posted>,
    /// Errors posted (init or invocation) and requests the API does not know.
    pub(crate) errors: Vec<String>,
}

/// What runs when the process first asks for an event (it gets the pid), before the answer.
pub(crate) type OnReady = Box<dyn FnOnce(u32) -> Result<(), String> + Send>;

struct State {
    events: Mutex<VecDeque<Event>>,
    pid: watch::Receiver<Option<u32>>,
    on_ready: Mutex<Option<OnReady>>,
    log: Mutex<Log>,
    idle: Notify,
}

/// A running Runtime API for one process, stopped when dropped.
pub(crate) struct RuntimeApi {
    /// Where it listens (`AWS_LAMBDA_RUNTIME_API`).
    pub(crate) addr: SocketAddr,
    state: Arc<State>,
    pid: watch::Sender<Option<u32>>,
    server: JoinHandle<()>,
}

impl std::fmt::Debug for RuntimeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeApi")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl RuntimeApi {
    /// Starts the API on a free loopback port with `events` to hand out; `on_ready` runs when
    /// the first `/next` arrives, before it is answered.
    pub(crate) async fn start(events: Vec<Event>, on_ready: Option<OnReady>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("an address");
        let (pid, pid_seen) = watch::channel(None);
        let state = Arc::new(State {
            events: Mutex::new(events.into()),
            pid: pid_seen,
            on_ready: Mutex::new(on_ready),
            log: Mutex::new(Log::default()),
            idle: Notify::new(),
        });
        let serving = Arc::clone(&state);
        let server = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let state = Arc::clone(&serving);
                let service = service_fn(move |request| answer(Arc::clone(&state), request));
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service),
                );
            }
        });
        Self {
            addr,
            state,
            pid,
            server,
        }
    }

    /// Tells the API the process's id (the first `/next` waits for it).
    pub(crate) fn set_pid(&self, pid: u32) {
        let _ = self.pid.send(Some(pid));
    }

    /// Waits until every event was handed out and the process asked for another, or `timeout`
    /// passed; true when it is idle.
    pub(crate) async fn idle(&self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.state.idle.notified())
            .await
            .is_ok()
    }

    /// What happened so far.
    pub(crate) fn log(&self) -> Log {
        self.state.log.lock().expect("not poisoned").clone()
    }
}

impl Drop for RuntimeApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

type Reply = Result<Response<Full<Bytes>>, Infallible>;

async fn answer(state: Arc<State>, request: Request<hyper::body::Incoming>) -> Reply {
    let arrived = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    if method == Method::GET && path == "/2018-06-01/runtime/invocation/next" {
        return Ok(next(&state, arrived).await);
    }
    let body = relay_testkit::loopback::body(request).await;
    let posted = Instant::now();
    let mut log = state.log.lock().expect("not poisoned");
    let invocation = path.strip_prefix("/2018-06-01/runtime/invocation/");
    match (&method, invocation) {
        (&Method::POST, Some(rest)) if rest.ends_with("/response") => {
            let id = rest.trim_end_matches("/response").to_owned();
            log.responses.push((id, posted, body));
        }
        (&Method::POST, Some(rest)) if rest.ends_with("/error") => {
            let text = String::from_utf8_lossy(&body);
            log.errors.push(format!("invocation error {rest}: {text}"));
        }
        (&Method::POST, None) if path == "/2018-06-01/runtime/init/error" => {
            let text = String::from_utf8_lossy(&body);
            log.errors.push(format!("init error: {text}"));
        }
        _ => log
            .errors
            .push(format!("unexpected request {method} {path}")),
    }
    Ok(Response::builder()
        .status(202)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(br#"{"status":"OK"}"#)))
        .expect("a valid response"))
}

/// `/next`: the next event, or no answer once there is none left.
async fn next(state: &State, arrived: Instant) -> Response<Full<Bytes>> {
    let first = {
        let mut log = state.log.lock().expect("not poisoned");
        let first = log.first_next.is_none();
        if first {
            log.first_next = Some(arrived);
        }
        first
    };
    let mut pid = state.pid.clone();
    let pid = pid
        .wait_for(Option::is_some)
        .await
        .map(|p| p.unwrap_or(0))
        .unwrap_or(0);
    if first {
        let cpu = cgroup::process_cpu(pid);
        let hook = state.on_ready.lock().expect("not poisoned").take();
        let moved = hook.map_or(Ok(()), |hook| hook(pid));
        let mut log = state.log.lock().expect("not poisoned");
        log.cpu_at_ready = cpu;
        if let Err(e) = moved {
            log.errors.push(format!("at the first /next: {e}"));
        }
    }
    let event = state.events.lock().expect("not poisoned").pop_front();
    let Some(event) = event else {
        state.log.lock().expect("not poisoned").cpu_at_idle = cgroup::process_cpu(pid);
        state.idle.notify_one();
        return std::future::pending().await;
    };
    let deadline = (SystemTime::now() + TIMEOUT)
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    let trace = format!(
        "Root=1-{:08x}-{:0>24};Parent=53995c3f42cd8ad8;Sampled=0",
        deadline / 1000,
        event.id.replace('-', "").get(..24).unwrap_or("0")
    );
    let response = Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .header("lambda-runtime-aws-request-id", &event.id)
        .header("lambda-runtime-deadline-ms", deadline.to_string())
        .header("lambda-runtime-invoked-function-arn", FUNCTION_ARN)
        .header("lambda-runtime-trace-id", trace)
        .body(Full::new(event.body))
        .expect("a valid response");
    let mut log = state.log.lock().expect("not poisoned");
    log.handed.push((event.id, Instant::now()));
    response
}
