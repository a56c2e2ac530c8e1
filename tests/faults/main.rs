//! The fault matrix: the relay-gcf binary in front of a fault-injecting SQS endpoint, fed by a
//! sender that retries every non-2xx as the DSS does. For each fault: every notification
//! answered 2xx is in the queue; after the retries, every notification is; duplicates are
//! counted. Also SIGTERM in the middle of a burst: nothing acknowledged is lost, and no request
//! that reached the relay is left without an answer.
//!
//! `make faults` sends 10,000 notifications per fault (`FAULT_NOTIFICATIONS`) and prints the
//! table; `make test` runs the same matrix with 1,000. Needs the relay-gcf binary built next to
//! this test (`cargo build --workspace`).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use relay_testkit::fake_sqs::{FakeSqs, Fault};
use relay_testkit::{RelayProcess, Signer, built_binary};
use tokio::sync::Semaphore;

const SECRET: &str = "fault-matrix-secret";
const CONCURRENCY: usize = 32;

fn notifications() -> usize {
    std::env::var("FAULT_NOTIFICATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

/// relay-gcf, the binary built next to this test, publishing to `sqs` on `listen` (a free port
/// when `None`), once it listens.
fn relay_gcf(sqs: &FakeSqs, listen: Option<SocketAddr>) -> RelayProcess {
    let mut command = Command::new(built_binary("relay-gcf"));
    command
        .env_clear()
        .env("RELAY_HMAC_KEYS", format!(r#"{{"dss": "{SECRET}"}}"#))
        .env("RELAY_SQS_QUEUE_URL", sqs.queue_url())
        .env("RELAY_SINK_TIMEOUT_MS", "1000")
        .env("RELAY_LOG_FORMAT", "json")
        .env("RUST_LOG", "error")
        .env("AWS_ENDPOINT_URL_SQS", &sqs.endpoint)
        .env("AWS_ACCESS_KEY_ID", "fault")
        .env("AWS_SECRET_ACCESS_KEY", "fault")
        .env("AWS_REGION", "us-east-1");
    if let Some(addr) = listen {
        command.env("RELAY_LISTEN", addr.to_string());
    }
    // The wait for the port blocks; the fake SQS endpoint keeps running on the other workers.
    tokio::task::block_in_place(|| RelayProcess::spawn(command))
}

fn notification(i: usize) -> String {
    format!(
        r#"{{"subscription_id": "faults", "event_type": "CREATE", "match": {{"bundle_uuid": "b-{i:06}", "bundle_version": "v"}}, "pad": "{}"}}"#,
        "x".repeat(3000)
    )
}

/// What the sender saw.
#[derive(Debug, Default)]
struct Sent {
    acknowledged: HashSet<String>,
    attempts: AtomicU64,
    refused: AtomicU64,
    unanswered: AtomicU64,
}

/// Sends every body until it gets a 2xx, retrying non-2xx answers and refused connections with
/// a short backoff; a request that reached the relay but got no answer is counted.
async fn send_all(url: &str, bodies: &[String]) -> Sent {
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build_http();
    let uri: http::Uri = format!("{url}/dss").parse().unwrap();
    let sent = Arc::new(Sent::default());
    let slots = Arc::new(Semaphore::new(CONCURRENCY));
    let mut tasks = Vec::new();
    for body in bodies.iter().cloned() {
        let (client, uri, sent, slot) = (
            client.clone(),
            uri.clone(),
            Arc::clone(&sent),
            Arc::clone(&slots).acquire_owned().await,
        );
        tasks.push(tokio::spawn(async move {
            let _slot = slot;
            for attempt in 0u64..400 {
                sent.attempts.fetch_add(1, Ordering::Relaxed);
                let signer = Signer {
                    key_id: "dss".into(),
                    secret: SECRET.into(),
                    at: SystemTime::now(),
                };
                let (mut parts, bytes) = signer.json(&body).into_parts();
                parts.uri = uri.clone();
                match client
                    .request(http::Request::from_parts(parts, Full::new(bytes)))
                    .await
                {
                    Ok(response) if response.status().is_success() => return Some(body),
                    Ok(_) => {}
                    Err(e) if e.is_connect() => _ = sent.refused.fetch_add(1, Ordering::Relaxed),
                    Err(_) => _ = sent.unanswered.fetch_add(1, Ordering::Relaxed),
                }
                tokio::time::sleep(Duration::from_millis((10 * attempt).min(200))).await;
            }
            None
        }));
    }
    let mut acknowledged = HashSet::new();
    for task in tasks {
        acknowledged.extend(task.await.unwrap());
    }
    let mut sent = Arc::try_unwrap(sent).expect("every task ended");
    sent.acknowledged = acknowledged;
    sent
}

/// One row of the table.
#[derive(Debug)]
struct Row {
    fault: &'static str,
    sent: usize,
    acknowledged_but_lost: usize,
    missing_after_retries: usize,
    duplicates: u32,
    attempts: u64,
    unanswered: u64,
    calls: u64,
    seconds: f64,
}

impl Row {
    fn print(&self) {
        println!(
            "| {} | {} | {} | {} | {} | {:.2} | {} | {} | {:.1} |",
            self.fault,
            self.sent,
            self.acknowledged_but_lost,
            self.missing_after_retries,
            self.duplicates,
            self.attempts as f64 / self.sent as f64,
            self.unanswered,
            self.calls,
            self.seconds
        );
    }
}

fn row(
    fault: &'static str,
    bodies: &[String],
    sent: &Sent,
    sqs: &FakeSqs,
    started: Instant,
) -> Row {
    let accepted = sqs.accepted();
    Row {
        fault,
        sent: bodies.len(),
        acknowledged_but_lost: sent
            .acknowledged
            .iter()
            .filter(|b| !accepted.contains_key(*b))
            .count(),
        missing_after_retries: bodies.iter().filter(|b| !accepted.contains_key(*b)).count(),
        duplicates: accepted.values().map(|n| n - 1).sum(),
        attempts: sent.attempts.load(Ordering::Relaxed),
        unanswered: sent.unanswered.load(Ordering::Relaxed),
        calls: sqs.calls(),
        seconds: started.elapsed().as_secs_f64(),
    }
}

async fn run(name: &'static str, fault: Fault) -> Row {
    let sqs = FakeSqs::start(fault).await;
    let relay = relay_gcf(&sqs, None);
    let bodies: Vec<String> = (0..notifications()).map(notification).collect();
    let started = Instant::now();
    let sent = send_all(&relay.url(), &bodies).await;
    drop(relay);
    row(name, &bodies, &sent, &sqs, started)
}

/// A burst with SIGTERM in its middle; a second relay on the same port takes the retries.
async fn sigterm_mid_burst() -> Row {
    let sqs = FakeSqs::start(Fault::Latency(Duration::from_millis(20))).await;
    let mut first = relay_gcf(&sqs, None);
    let (addr, url) = (first.addr(), first.url());
    let bodies: Vec<String> = (0..notifications()).map(notification).collect();
    let started = Instant::now();
    let watcher = {
        let sqs = sqs.clone();
        let half = bodies.len() / 2;
        tokio::spawn(async move {
            while sqs.accepted().len() < half {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            first.terminate();
            let exited = tokio::task::spawn_blocking(move || {
                first.exits_within(relay_gcf::DRAIN + Duration::from_secs(10))
            })
            .await
            .unwrap();
            assert!(
                exited.success(),
                "the relay exits cleanly after draining: {exited}"
            );
            relay_gcf(&sqs, Some(addr))
        })
    };
    let sent = send_all(&url, &bodies).await;
    let second = watcher.await.unwrap();
    drop(second);
    row(
        "SIGTERM mid-burst, then a new instance",
        &bodies,
        &sent,
        &sqs,
        started,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_acknowledged_notification_is_lost_under_any_fault() {
    let mut rows = Vec::new();
    for (name, fault) in [
        ("none", Fault::None),
        ("latency 20 ms", Fault::Latency(Duration::from_millis(20))),
        ("10 % of batch entries Failed", Fault::EntryFailures(0.1)),
        (
            "503 storms (300 ms of every 1 s)",
            Fault::Storms {
                on: Duration::from_millis(300),
                off: Duration::from_millis(700),
            },
        ),
        ("5 % of calls reset", Fault::Resets(0.05)),
        ("1 % of calls hang", Fault::Hangs(0.01)),
    ] {
        rows.push(run(name, fault).await);
    }
    rows.push(sigterm_mid_burst().await);
    println!(
        "| fault | notifications | acknowledged but lost | missing after retries | duplicates | attempts per notification | sent, no answer | SQS calls | seconds |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for row in &rows {
        row.print();
    }
    for row in &rows {
        assert_eq!(row.acknowledged_but_lost, 0, "{row:?}");
        assert_eq!(row.missing_after_retries, 0, "{row:?}");
        assert_eq!(row.unanswered, 0, "{row:?}");
    }
}
