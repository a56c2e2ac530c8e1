//! The load: DSS-signed notifications, closed-loop at saturation, open-loop at a set rate, one
//! at a time, or all at once; and the floor server it is compared with.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use relay_testkit::Signer;
use relay_testkit::fake_sqs::FakeSqs;

use crate::process::{Pinned, SECRET};

/// How long an open-loop run goes on, unmeasured, before it is measured.
const WARM_UP: Duration = Duration::from_secs(1);

/// What one measured run saw.
#[derive(Debug)]
pub(crate) struct Measured {
    /// Requests answered 2xx.
    pub(crate) ok: usize,

    latencies: Vec<Duration>,
    elapsed: Duration,
    cpu_us: u64,
}

impl Measured {
    /// A run that got `latencies` (one per 2xx answer) in `elapsed`, the server using `cpu_us`.
    pub(crate) fn new(latencies: Vec<Duration>, elapsed: Duration, cpu_us: u64) -> Self {
        Self {
            ok: latencies.len(),
            latencies,
            elapsed,
            cpu_us,
        }
    }

    /// 2xx answers per second.
    pub(crate) fn per_second(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64()
    }

    /// The server's CPU time per 2xx answer, in microseconds.
    pub(crate) fn cpu_us_per_request(&self) -> f64 {
        self.cpu_us as f64 / self.ok.max(1) as f64
    }

    /// The latency at quantile `q` (0.5, 0.99).
    pub(crate) fn percentile(&self, q: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let index = ((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1));
        sorted.get(index).copied().unwrap_or_default()
    }
}

/// How long a burst took.
#[derive(Debug)]
pub(crate) struct Burst {
    /// Notifications answered 2xx.
    pub(crate) ok: usize,
    /// Until every notification was answered.
    pub(crate) acknowledged: Duration,
    /// Until every notification was in the queue.
    pub(crate) queued: Duration,
}

/// Signed notifications of one size, and a client to send them.
#[derive(Debug)]
pub(crate) struct Driver {
    size: usize,
    requests: Arc<Vec<(http::request::Parts, Bytes)>>,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// A v2 CREATE of about `size` bytes for bundle `i`, signed as the DSS signs.
pub(crate) fn signed(size: usize, i: usize) -> (http::request::Parts, Bytes) {
    let head = format!(
        r#"{{"subscription_id": "bench", "event_type": "CREATE", "match": {{"bundle_uuid": "b-{i:08}", "bundle_version": "v"}}, "pad": ""#
    );
    let body = format!(
        "{head}{}\"}}",
        "x".repeat(size.saturating_sub(head.len() + 2))
    );
    let signer = Signer {
        key_id: "dss".into(),
        secret: SECRET.into(),
        at: SystemTime::now(),
    };
    signer.json(&body).into_parts()
}

impl Driver {
    /// 512 distinct signed notifications of about `size` bytes.
    pub(crate) fn new(size: usize) -> Self {
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(usize::MAX)
            .build_http();
        let requests = (0..512).map(|i| signed(size, i)).collect();
        Self {
            size,
            requests: Arc::new(requests),
            client,
        }
    }

    /// Sends request `i` to `port`; its latency when the answer was 2xx.
    async fn send(
        client: &Client<HttpConnector, Full<Bytes>>,
        requests: &[(http::request::Parts, Bytes)],
        port: u16,
        i: usize,
    ) -> bool {
        let (parts, body) = &requests[i % requests.len()];
        let mut request = http::Request::new(Full::new(body.clone()));
        *request.method_mut() = parts.method.clone();
        *request.headers_mut() = parts.headers.clone();
        *request.uri_mut() = format!("http://127.0.0.1:{port}/dss")
            .parse()
            .expect("a URI");
        match client.request(request).await {
            Ok(response) => {
                let ok = response.status().is_success();
                let _ = response.into_body().collect().await;
                ok
            }
            Err(_) => false,
        }
    }

    /// As many requests as `connections` connections can carry, for `duration`.
    pub(crate) async fn closed_loop(
        &self,
        server: &Pinned,
        connections: usize,
        duration: Duration,
    ) -> Measured {
        let (start, cpu) = (Instant::now(), server.cpu_us());
        let tasks: Vec<_> = (0..connections)
            .map(|c| {
                let (client, requests, port) =
                    (self.client.clone(), Arc::clone(&self.requests), server.port);
                tokio::spawn(async move {
                    let (mut ok, mut latencies, mut i) = (0, Vec::new(), c);
                    while start.elapsed() < duration {
                        let sent = Instant::now();
                        if Self::send(&client, &requests, port, i).await {
                            ok += 1;
                            latencies.push(sent.elapsed());
                        }
                        i += connections;
                    }
                    (ok, latencies)
                })
            })
            .collect();
        let mut measured = Measured {
            ok: 0,
            latencies: Vec::new(),
            elapsed: Duration::ZERO,
            cpu_us: 0,
        };
        for task in tasks {
            let (ok, latencies) = task.await.expect("a load task");
            measured.ok += ok;
            measured.latencies.extend(latencies);
        }
        measured.elapsed = start.elapsed();
        measured.cpu_us = server.cpu_us() - cpu;
        measured
    }

    /// Requests at `rate` per second for `duration`, each timed from when it was due, after
    /// [`WARM_UP`] at the same rate that is not measured. Without it, the run would start by
    /// opening a connection per request until the first answers came back: hundreds of
    /// connections at once, a burst rather than the steady load this run is about.
    pub(crate) async fn open_loop(
        &self,
        server: &Pinned,
        rate: f64,
        duration: Duration,
    ) -> Measured {
        self.paced(server, rate, WARM_UP).await;
        self.paced(server, rate, duration).await
    }

    async fn paced(&self, server: &Pinned, rate: f64, duration: Duration) -> Measured {
        let (start, cpu) = (Instant::now(), server.cpu_us());
        let count = (rate * duration.as_secs_f64()) as usize;
        let mut tasks = Vec::with_capacity(count);
        for i in 0..count {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
            let (client, requests, port) =
                (self.client.clone(), Arc::clone(&self.requests), server.port);
            tasks.push(tokio::spawn(async move {
                Self::send(&client, &requests, port, i)
                    .await
                    .then(|| due.elapsed())
            }));
        }
        let latencies: Vec<Duration> = futures_join(tasks).await.into_iter().flatten().collect();
        Measured {
            ok: latencies.len(),
            latencies,
            elapsed: start.elapsed(),
            cpu_us: server.cpu_us() - cpu,
        }
    }

    /// `count` requests one at a time, 50 ms apart: what a lone notification waits.
    pub(crate) async fn lone(&self, server: &Pinned, count: usize) -> Measured {
        let (start, cpu) = (Instant::now(), server.cpu_us());
        let mut latencies = Vec::new();
        for i in 0..count {
            let sent = Instant::now();
            if Self::send(&self.client, &self.requests, server.port, i).await {
                latencies.push(sent.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Measured {
            ok: latencies.len(),
            latencies,
            elapsed: start.elapsed(),
            cpu_us: server.cpu_us() - cpu,
        }
    }

    /// `count` distinct notifications sent at once, each on a connection of its own, as a
    /// sender with that many workers would.
    pub(crate) async fn burst(&self, relay: &Pinned, sqs: &FakeSqs, count: usize) -> Burst {
        let requests: Arc<Vec<_>> = Arc::new(
            (0..count)
                .map(|i| signed(self.size, 1_000_000 + i))
                .collect(),
        );
        let start = Instant::now();
        let tasks: Vec<_> = (0..count)
            .map(|i| {
                let (client, requests, port) =
                    (self.client.clone(), Arc::clone(&requests), relay.port);
                tokio::spawn(async move { Self::send(&client, &requests, port, i).await })
            })
            .collect();
        let ok = futures_join(tasks)
            .await
            .into_iter()
            .filter(|ok| *ok)
            .count();
        let acknowledged = start.elapsed();
        while sqs.distinct() < ok && start.elapsed() < Duration::from_secs(60) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Burst {
            ok,
            acknowledged,
            queued: start.elapsed(),
        }
    }

    /// Notifications at `rate` per second for `duration` while `slow` connections each send a
    /// head declaring 4 KB and 100 bytes of body, then nothing, and reconnect as soon as the
    /// relay ends them; also how many slow requests the relay ended per second.
    pub(crate) async fn held_against(
        &self,
        server: &Pinned,
        slow: usize,
        rate: f64,
        duration: Duration,
    ) -> (Measured, f64) {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ended = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let holders: Vec<_> = (0..slow)
            .map(|_| {
                let (stop, ended, port) = (Arc::clone(&stop), Arc::clone(&ended), server.port);
                tokio::spawn(hold_slow_body(port, stop, ended))
            })
            .collect();
        // Every slow connection is in place before the measured notifications start.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = ended.load(std::sync::atomic::Ordering::Relaxed);
        let measured = self.paced(server, rate, duration).await;
        let per_second = (ended.load(std::sync::atomic::Ordering::Relaxed) - before) as f64
            / measured.elapsed.as_secs_f64();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for holder in holders {
            holder.abort();
        }
        (measured, per_second)
    }
}

/// One slow sender: a head declaring 4,096 bytes and 100 of them, then silence until the relay
/// answers or closes; again until `stop`.
async fn hold_slow_body(
    port: u16,
    stop: Arc<std::sync::atomic::AtomicBool>,
    ended: Arc<std::sync::atomic::AtomicU64>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let head = "POST /dss HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n";
    let mut sent = head.as_bytes().to_vec();
    sent.extend_from_slice(&[b' '; 100]);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if stream.write_all(&sent).await.is_err() {
            continue;
        }
        let mut answer = [0u8; 512];
        // Whatever comes back (a 408, a close) ends this request.
        let _ = stream.read(&mut answer).await;
        ended.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

async fn futures_join<T: Send + 'static>(tasks: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(task.await.expect("a load task"));
    }
    out
}

/// The floor: a bare HTTP/1.1 server that reads each body and answers 202.
pub(crate) async fn floor(addr: std::net::SocketAddr) {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("the floor's port");
    while let Ok((stream, _)) = listener.accept().await {
        let service = hyper::service::service_fn(
            |request: hyper::Request<hyper::body::Incoming>| async move {
                let _ = request.into_body().collect().await;
                let body = Full::new(Bytes::from_static(br#"{"status":"published"}"#));
                Ok::<_, std::convert::Infallible>(
                    hyper::Response::builder()
                        .status(202)
                        .body(body)
                        .expect("a response"),
                )
            },
        );
        tokio::spawn(
            hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service),
        );
    }
}
