//! The ledger table: relay-gcf without a ledger, and with `RELAY_LEDGER_URL=dynamodb://…` on
//! relay-testkit's loopback DynamoDB-protocol endpoint, each sent the same distinct
//! notifications twice: once new, then again (with the ledger, duplicates answered without a
//! sink call). Each notification is sent once per pass, over 32 connections kept busy, then 20
//! more one at a time for the latency of a lone notification. The ledger's calls per
//! notification come from the endpoint's own counters.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use relay_testkit::fake_dynamodb::{Calls, FakeDynamoDb};
use relay_testkit::fake_sqs::{FakeSqs, Fault};

use crate::load::{Measured, signed};
use crate::process::Pinned;

/// Connections kept busy in the saturated passes.
const CONNECTIONS: usize = 32;
/// Notifications sent one at a time, 20 ms apart, in the lone passes.
const LONE: usize = 20;
/// The notifications' size.
const SIZE: usize = 1024;

type Requests = Arc<Vec<(http::request::Parts, Bytes)>>;

/// What one pass saw: the run, and how many answers said `"status":"duplicate"`.
struct Pass {
    measured: Measured,
    duplicates: usize,
}

/// `BENCH_LEDGER_NOTIFICATIONS` (20,000): distinct notifications per saturated pass.
fn notifications() -> usize {
    std::env::var("BENCH_LEDGER_NOTIFICATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000)
}

/// The table: ledger off, ledger on (endpoint at once), ledger on (endpoint 5 ms).
pub(crate) async fn table() {
    let count = notifications();
    println!(
        "| relay-gcf, {count} × 1 KB | pass | answered 2xx | of which duplicate | notifications/s | CPU-µs per notification | vs ledger off | p50 (ms) | p99 (ms) | ledger calls per notification | UpdateItem / PutItem / other | SQS calls per notification |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let saturated: Requests = Arc::new((0..count).map(|i| signed(SIZE, 3_000_000 + i)).collect());
    let lone: Requests = Arc::new((0..LONE).map(|i| signed(SIZE, 4_000_000 + i)).collect());
    let warm: Requests = Arc::new((0..512).map(|i| signed(SIZE, 5_000_000 + i)).collect());
    let client = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(usize::MAX)
        .build_http();
    // The CPU-µs of the ledger-off passes, which the others are compared with.
    let mut off_cpu: Vec<f64> = Vec::new();
    for (name, latency) in [
        ("ledger off", None),
        ("ledger on, endpoint 0 ms", Some(0)),
        ("ledger on, endpoint 5 ms", Some(5)),
    ] {
        let sqs = FakeSqs::start(Fault::None).await;
        let dynamodb = match latency {
            Some(ms) => {
                let fake = FakeDynamoDb::start().await;
                fake.set_latency(Duration::from_millis(ms));
                Some(fake)
            }
            None => None,
        };
        let relay = Pinned::relay_with_ledger(&sqs, dynamodb.as_ref());
        // Connections opened and the relay's first calls made before anything is measured.
        saturate(&client, &relay, &warm).await;
        for (row, (pass, requests, saturated_pass)) in [
            ("new", &saturated, true),
            ("again", &saturated, true),
            ("new, one at a time", &lone, false),
            ("again, one at a time", &lone, false),
        ]
        .into_iter()
        .enumerate()
        {
            let (ledger_before, sqs_before) =
                (dynamodb.as_ref().map(FakeDynamoDb::calls), sqs.calls());
            let result = match saturated_pass {
                true => saturate(&client, &relay, requests).await,
                false => one_at_a_time(&client, &relay, requests).await,
            };
            let sent = requests.len();
            let ledger = match (&dynamodb, ledger_before) {
                (Some(fake), Some(before)) => Some(fake.calls().since(&before)),
                _ => None,
            };
            let cpu = result.measured.cpu_us_per_request();
            if latency.is_none() {
                off_cpu.push(cpu);
            }
            print_row(
                name,
                pass,
                &result,
                sent,
                saturated_pass.then_some(cpu),
                off_cpu.get(row).copied(),
                ledger.as_ref(),
                sqs.calls() - sqs_before,
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn print_row(
    name: &str,
    pass: &str,
    result: &Pass,
    sent: usize,
    cpu: Option<f64>,
    off_cpu: Option<f64>,
    ledger: Option<&Calls>,
    sqs_calls: u64,
) {
    let m = &result.measured;
    // /proc counts CPU in 10 ms ticks: too coarse for a handful of requests.
    let (cpu, ratio) = match (cpu, off_cpu) {
        (Some(cpu), Some(off)) => (format!("{cpu:.1}"), format!("{:.2}×", cpu / off)),
        (Some(cpu), None) => (format!("{cpu:.1}"), "–".to_owned()),
        _ => ("–".to_owned(), "–".to_owned()),
    };
    let per = |n: u64| n as f64 / sent.max(1) as f64;
    let (calls, split) = match ledger {
        Some(c) => (
            format!("{:.3}", per(c.total())),
            format!(
                "{:.3} / {:.3} / {:.3}",
                per(c.of("UpdateItem")),
                per(c.of("PutItem")),
                per(c.total() - c.of("UpdateItem") - c.of("PutItem"))
            ),
        ),
        None => ("–".to_owned(), "–".to_owned()),
    };
    let rate = match cpu == "–" {
        true => "–".to_owned(),
        false => format!("{:.0}", m.per_second()),
    };
    println!(
        "| {name} | {pass} | {} of {sent} | {} | {rate} | {cpu} | {ratio} | {:.2} | {:.2} | {calls} | {split} | {:.3} |",
        m.ok,
        result.duplicates,
        m.percentile(0.50).as_secs_f64() * 1e3,
        m.percentile(0.99).as_secs_f64() * 1e3,
        per(sqs_calls),
    );
}

/// Sends `request`; whether it was answered 2xx, and whether the answer was a duplicate's.
async fn send(
    client: &Client<HttpConnector, Full<Bytes>>,
    port: u16,
    (parts, body): &(http::request::Parts, Bytes),
) -> Option<bool> {
    let mut request = http::Request::new(Full::new(body.clone()));
    *request.method_mut() = parts.method.clone();
    *request.headers_mut() = parts.headers.clone();
    *request.uri_mut() = format!("http://127.0.0.1:{port}/dss")
        .parse()
        .expect("a URI");
    let response = client.request(request).await.ok()?;
    let ok = response.status().is_success();
    let body = response.into_body().collect().await.ok()?.to_bytes();
    let duplicate = is_duplicate(&body);
    ok.then_some(duplicate)
}

fn is_duplicate(body: &[u8]) -> bool {
    let needle = br#""status":"duplicate""#;
    body.windows(needle.len()).any(|w| w == needle)
}

/// Every request once, over [`CONNECTIONS`] connections kept busy.
async fn saturate(
    client: &Client<HttpConnector, Full<Bytes>>,
    server: &Pinned,
    requests: &Requests,
) -> Pass {
    let next = Arc::new(AtomicUsize::new(0));
    let (start, cpu) = (Instant::now(), server.cpu_us());
    let tasks: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let (client, requests, next, port) = (
                client.clone(),
                Arc::clone(requests),
                Arc::clone(&next),
                server.port,
            );
            tokio::spawn(async move {
                let (mut latencies, mut duplicates) = (Vec::new(), 0);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(request) = requests.get(i) else {
                        break;
                    };
                    let sent = Instant::now();
                    if let Some(duplicate) = send(&client, port, request).await {
                        latencies.push(sent.elapsed());
                        duplicates += usize::from(duplicate);
                    }
                }
                (latencies, duplicates)
            })
        })
        .collect();
    let (mut latencies, mut duplicates) = (Vec::new(), 0);
    for task in tasks {
        let (l, d) = task.await.expect("a load task");
        latencies.extend(l);
        duplicates += d;
    }
    let (elapsed, cpu) = (start.elapsed(), server.cpu_us() - cpu);
    Pass {
        measured: Measured::new(latencies, elapsed, cpu),
        duplicates,
    }
}

/// Every request in turn, 20 ms apart: what a lone notification waits.
async fn one_at_a_time(
    client: &Client<HttpConnector, Full<Bytes>>,
    server: &Pinned,
    requests: &Requests,
) -> Pass {
    let (start, cpu) = (Instant::now(), server.cpu_us());
    let (mut latencies, mut duplicates) = (Vec::new(), 0);
    for request in requests.iter() {
        let sent = Instant::now();
        if let Some(duplicate) = send(client, server.port, request).await {
            latencies.push(sent.elapsed());
            duplicates += usize::from(duplicate);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (elapsed, cpu) = (start.elapsed(), server.cpu_us() - cpu);
    Pass {
        measured: Measured::new(latencies, elapsed, cpu),
        duplicates,
    }
}
