//! The memory table: relay-gcf without memory, with the embedded stores (an SQLite ledger,
//! then the ledger and a folder archive, both in a fresh temporary folder), and with a DynamoDB
//! ledger on relay-testkit's loopback DynamoDB-protocol endpoint (answering at once, then after
//! 5 ms; then with the archive through a loopback Firehose endpoint, which needs a relay-gcf
//! built with `dynamodb`, `s3` and `firehose`), each sent the same distinct notifications
//! twice: once new, then again (with the ledger, duplicates answered without a sink call). Each
//! notification is sent once per pass, over 32 connections kept busy
//! (`BENCH_MEMORY_CONNECTIONS`), then 20 more one at a time for the latency of a lone
//! notification. The ledger's calls per notification come from the endpoint's own counters;
//! "vs no memory" compares a pass's CPU-µs with the no-memory row's *new* pass, so the again
//! rows say what a duplicate costs against a notification without memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use relay_testkit::fake_dynamodb::{Calls, FakeDynamoDb};
use relay_testkit::fake_firehose::FakeFirehose;
use relay_testkit::fake_sqs::{FakeSqs, Fault};

use crate::load::{Measured, signed};
use crate::process::Pinned;

/// Connections kept busy in the saturated passes, by default.
const CONNECTIONS: usize = 32;
/// Notifications sent one at a time, 20 ms apart, in the lone passes.
const LONE: usize = 20;
/// The notifications' size.
const SIZE: usize = 4096;

type Requests = Arc<Vec<(http::request::Parts, Bytes)>>;

/// What one pass saw: the run, and how many answers said `"status":"duplicate"`.
struct Pass {
    measured: Measured,
    duplicates: usize,
}

/// `BENCH_MEMORY_NOTIFICATIONS` (20,000): distinct notifications per saturated pass.
fn notifications() -> usize {
    crate::number_from_env("BENCH_MEMORY_NOTIFICATIONS", 20_000)
}

/// `BENCH_MEMORY_CONNECTIONS` ([`CONNECTIONS`]): connections kept busy in the saturated passes.
fn connections() -> usize {
    crate::number_from_env("BENCH_MEMORY_CONNECTIONS", CONNECTIONS).max(1)
}

/// What a row remembers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Memory {
    /// Neither a ledger nor an archive.
    None,
    /// `RELAY_LEDGER_URL` an SQLite file.
    SqliteLedger,
    /// The SQLite ledger and `RELAY_ARCHIVE_URL` a folder.
    SqliteLedgerAndFolder,
    /// `RELAY_LEDGER_URL=dynamodb://…` on the loopback endpoint, answering after this many ms.
    DynamoDb(u64),
    /// That ledger, answering at once, and the archive through a delivery stream
    /// (`RELAY_ARCHIVE_STREAM=firehose://…`) on a loopback Firehose endpoint.
    DynamoDbAndFirehose,
}

impl Memory {
    /// The row's name.
    pub(crate) fn name(self) -> String {
        match self {
            Self::None => "no memory".into(),
            Self::SqliteLedger => "SQLite ledger".into(),
            Self::SqliteLedgerAndFolder => "SQLite ledger + folder archive".into(),
            Self::DynamoDb(ms) => format!("DynamoDB ledger, endpoint {ms} ms"),
            Self::DynamoDbAndFirehose => "DynamoDB ledger + archive through Firehose".into(),
        }
    }

    /// The relay's settings for it, with its files under `folder`.
    pub(crate) fn env(
        self,
        folder: &std::path::Path,
        dynamodb: Option<&FakeDynamoDb>,
        firehose: Option<&FakeFirehose>,
    ) -> Vec<(&'static str, String)> {
        let ledger = (
            "RELAY_LEDGER_URL",
            folder.join("ledger.db").display().to_string(),
        );
        let archive = (
            "RELAY_ARCHIVE_URL",
            folder.join("archive").display().to_string(),
        );
        let seal = (
            "RELAY_ARCHIVE_KEY",
            "bench-archive-key-0123456789".to_owned(),
        );
        let table = |endpoint: &FakeDynamoDb| {
            [
                ("RELAY_LEDGER_URL", "dynamodb://relay-ledger".into()),
                ("AWS_ENDPOINT_URL_DYNAMODB", endpoint.endpoint.clone()),
            ]
        };
        match (self, dynamodb, firehose) {
            (Self::None, ..) => vec![],
            (Self::SqliteLedger, ..) => vec![ledger],
            (Self::SqliteLedgerAndFolder, ..) => vec![ledger, archive, seal],
            (Self::DynamoDb(_), Some(endpoint), _) => table(endpoint).to_vec(),
            (Self::DynamoDbAndFirehose, Some(endpoint), Some(stream)) => {
                let mut env = table(endpoint).to_vec();
                env.extend([
                    (
                        "RELAY_ARCHIVE_URL",
                        "s3://relay-archive/notifications/".into(),
                    ),
                    ("RELAY_ARCHIVE_STREAM", "firehose://relay-archive".into()),
                    ("AWS_ENDPOINT_URL_FIREHOSE", stream.endpoint.clone()),
                    // Only a record too large for the stream would reach S3: none here.
                    ("AWS_ENDPOINT_URL_S3", stream.endpoint.clone()),
                    seal,
                ]);
                env
            }
            _ => panic!("a DynamoDB row needs its endpoints"),
        }
    }
}

/// The rows, in order.
const ROWS: [Memory; 6] = [
    Memory::None,
    Memory::SqliteLedger,
    Memory::SqliteLedgerAndFolder,
    Memory::DynamoDb(0),
    Memory::DynamoDb(5),
    Memory::DynamoDbAndFirehose,
];

/// The table's header: the notifications per pass, and the connections when not the default.
fn print_header(count: usize) {
    let over = match connections() {
        CONNECTIONS => String::new(),
        other => format!(", {other} connections"),
    };
    println!(
        "| relay-gcf, {count} × 4 KB{over} | pass | answered 2xx | of which duplicate | notifications/s | CPU-µs per notification | vs no memory, new | p50 (ms) | p99 (ms) | peak RSS (MiB) | ledger calls per notification | SQS calls per notification |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
}

/// The table: every row of [`ROWS`], each through four passes.
pub(crate) async fn table() {
    let count = notifications();
    print_header(count);
    let saturated: Requests = Arc::new((0..count).map(|i| signed(SIZE, 3_000_000 + i)).collect());
    let lone: Requests = Arc::new((0..LONE).map(|i| signed(SIZE, 4_000_000 + i)).collect());
    let warm: Requests = Arc::new((0..512).map(|i| signed(SIZE, 5_000_000 + i)).collect());
    let client = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(usize::MAX)
        .build_http();
    // The no-memory row's new pass, which every other is compared with.
    let mut baseline: Option<f64> = None;
    // BENCH_MEMORY_ROWS=SQLite keeps the rows whose name holds that text.
    let only = std::env::var("BENCH_MEMORY_ROWS").unwrap_or_default();
    let mut folders = Vec::new();
    for memory in ROWS {
        if memory != Memory::None && !memory.name().contains(only.as_str()) {
            continue;
        }
        let folder = folder();
        let sqs = FakeSqs::start(Fault::None).await;
        let dynamodb = match memory {
            Memory::DynamoDb(ms) => {
                let fake = FakeDynamoDb::start().await;
                fake.set_latency(Duration::from_millis(ms));
                Some(fake)
            }
            Memory::DynamoDbAndFirehose => Some(FakeDynamoDb::start().await),
            _ => None,
        };
        let firehose = match memory {
            Memory::DynamoDbAndFirehose => Some(FakeFirehose::start().await),
            _ => None,
        };
        let env = memory.env(&folder, dynamodb.as_ref(), firehose.as_ref());
        let relay = Pinned::relay_with(&sqs, &env);
        // Connections opened and the relay's first calls made before anything is measured.
        saturate(&client, &relay, &warm).await;
        relay.reset_peak_rss();
        for (pass, requests, saturated_pass) in [
            ("new", &saturated, true),
            ("again", &saturated, true),
            ("new, one at a time", &lone, false),
            ("again, one at a time", &lone, false),
        ] {
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
            if memory == Memory::None && pass == "new" {
                baseline = Some(cpu);
            }
            print_row(
                &memory.name(),
                pass,
                &result,
                sent,
                saturated_pass.then_some(cpu),
                baseline,
                relay.peak_rss_kib(),
                ledger.as_ref(),
                sqs.calls() - sqs_before,
            );
        }
        drop(relay);
        folders.push(folder);
    }
    remove(folders);
}

/// Removes the rows' folders once every row has run: on a file system without a journal, ext4
/// scans past inodes deleted in the last half minute or so for every new one, so deleting one
/// row's archive would make the next row's records cost several times their own.
pub(crate) fn remove(folders: Vec<std::path::PathBuf>) {
    for folder in folders {
        let _ = std::fs::remove_dir_all(folder);
    }
}

/// A new empty folder for one row's ledger and archive.
pub(crate) fn folder() -> std::path::PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let folder = std::env::temp_dir().join(format!(
        "relay-bench-memory-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).expect("a temporary folder");
    folder
}

#[allow(clippy::too_many_arguments)]
fn print_row(
    name: &str,
    pass: &str,
    result: &Pass,
    sent: usize,
    cpu: Option<f64>,
    baseline: Option<f64>,
    peak_rss_kib: u64,
    ledger: Option<&Calls>,
    sqs_calls: u64,
) {
    let m = &result.measured;
    // /proc counts CPU in 10 ms ticks: too coarse for a handful of requests.
    let (cpu, ratio) = match (cpu, baseline) {
        (Some(cpu), Some(base)) => (format!("{cpu:.1}"), format!("{:.2}×", cpu / base)),
        (Some(cpu), None) => (format!("{cpu:.1}"), "–".to_owned()),
        _ => ("–".to_owned(), "–".to_owned()),
    };
    let per = |n: u64| n as f64 / sent.max(1) as f64;
    let calls = ledger.map_or("–".to_owned(), |c| format!("{:.3}", per(c.total())));
    let rate = match cpu == "–" {
        true => "–".to_owned(),
        false => format!("{:.0}", m.per_second()),
    };
    println!(
        "| {name} | {pass} | {} of {sent} | {} | {rate} | {cpu} | {ratio} | {:.2} | {:.2} | {:.1} | {calls} | {:.3} |",
        m.ok,
        result.duplicates,
        m.percentile(0.50).as_secs_f64() * 1e3,
        m.percentile(0.99).as_secs_f64() * 1e3,
        peak_rss_kib as f64 / 1024.0,
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

/// Every request once, over [`connections`] connections kept busy.
async fn saturate(
    client: &Client<HttpConnector, Full<Bytes>>,
    server: &Pinned,
    requests: &Requests,
) -> Pass {
    let next = Arc::new(AtomicUsize::new(0));
    let (start, cpu) = (Instant::now(), server.cpu_us());
    let tasks: Vec<_> = (0..connections())
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
