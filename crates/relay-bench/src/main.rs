//! `make bench-load`: what a notification costs relay-gcf, against a floor measured in the same
//! run. relay-gcf (release) and a bare HTTP server that reads the body and answers 202 (the
//! floor) each run pinned to core 0; the load and a loopback SQS-protocol endpoint run on the
//! other core. Every figure is printed next to the floor's, as a ratio. The last table is what
//! `relay replay` (release, pinned to core 0 too) costs and how fast it sends.
//!
//! Run with `make bench-load`, which builds the Lambda's bootstrap as `make lambda` does and
//! pins this process (the load and the endpoints) to core 1, or `cargo build --release -p
//! relay-gcf -p relay-cli -p relay-bench --features
//! relay-gcf/dynamodb,relay-gcf/s3,relay-gcf/firehose` and then `BENCH_LAMBDA=…
//! taskset -c 1 target/release/bench-load`. `BENCH_SECONDS` sets
//! each measured run's length (default 5); `BENCH_ONLY=saturation` runs the first table,
//! `BENCH_ONLY=burst` the burst and slow-sender tables, `BENCH_ONLY=memory` the memory table
//! (relay-gcf without memory, with the SQLite ledger, with the ledger and a folder archive,
//! and against a loopback DynamoDB-protocol endpoint; `BENCH_MEMORY_NOTIFICATIONS` distinct
//! notifications per pass, default 20,000, over `BENCH_MEMORY_CONNECTIONS`, default 32;
//! `BENCH_MEMORY_ROWS=SQLite` keeps the no-memory row and those whose name holds that text)
//! and `BENCH_ONLY=replay` the replay table (`relay replay --since 3h` over an archive folder of
//! `BENCH_REPLAY_NOTIFICATIONS` notifications, default 10,000, to the loopback SQS-protocol
//! endpoint: without a ledger, through an SQLite ledger twice, and to an endpoint answering in
//! 10 ms), `BENCH_ONLY=transform` the transform table (transform.rs: a sink's payload byte
//! for byte against a small transform), `BENCH_ONLY=cold` relay-lambda's cold starts under
//! Lambda's CPU quotas (cold.rs, which needs root for its cgroups; `BENCH_COLD_STARTS` starts
//! per row, default 20); `BENCH_RELAY` names another relay-gcf binary to measure, such as
//! `cargo build --profile profiling -p relay-gcf`'s, which keeps its symbols for perf.

mod cold;
mod load;
mod memory;
mod process;
mod replay;
mod transform;

use std::time::Duration;

use load::{Driver, Measured};
use process::Pinned;
use relay_testkit::fake_sqs::{FakeSqs, Fault};

/// The load, the loopback endpoints and the floor allocate as relay-gcf does. With glibc's
/// allocator, the fake DynamoDB endpoint and the load kept core 1 busy while the relay on core 0
/// still idled (about 77 % busy on the memory table's DynamoDB rows); the floor costs the same
/// with either allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    match args.get(1).map(String::as_str) {
        Some("floor") => runtime.block_on(load::floor(args[2].parse().expect("an address"))),
        _ => runtime.block_on(run()),
    }
}

/// True when `BENCH_ONLY` is unset or names this table (one of [`TABLES`]).
fn wanted(table: &str) -> bool {
    std::env::var("BENCH_ONLY").map_or(true, |only| only == table)
}

/// The number the variable `name` holds, or `default` when it is unset or not a number.
pub(crate) fn number_from_env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn seconds() -> Duration {
    let secs = number_from_env("BENCH_SECONDS", 5);
    Duration::from_secs(secs as u64)
}

/// One row of the table: the relay against the floor under the same load.
fn row(scenario: &str, relay: &Measured, floor: &Measured, sqs_calls: u64, peak_rss_kib: u64) {
    let per = |m: &Measured| m.cpu_us_per_request();
    // /proc counts CPU in 10 ms ticks: too coarse for a handful of requests.
    let cpu = match relay.ok >= 1000 && floor.ok >= 1000 {
        true => format!(
            "{:.1} | {:.1} | {:.2}×",
            per(relay),
            per(floor),
            per(relay) / per(floor)
        ),
        false => "– | – | –".to_owned(),
    };
    println!(
        "| {scenario} | {:.0} | {cpu} | {:.3} | {:.2} | {:.2} | {:.1} |",
        relay.per_second(),
        sqs_calls as f64 / relay.ok.max(1) as f64,
        relay
            .percentile(0.50)
            .saturating_sub(floor.percentile(0.50))
            .as_secs_f64()
            * 1e3,
        relay
            .percentile(0.99)
            .saturating_sub(floor.percentile(0.99))
            .as_secs_f64()
            * 1e3,
        peak_rss_kib as f64 / 1024.0,
    );
}

/// The tables, in the order they are printed; `BENCH_ONLY` names one.
const TABLES: [&str; 7] = [
    "saturation",
    "burst",
    "memory",
    "replay",
    "transform",
    "cold",
    "warm",
];

async fn run() {
    for table in TABLES.into_iter().filter(|t| wanted(t)) {
        match table {
            "saturation" => saturation().await,
            "burst" => {
                bursts().await;
                println!();
                slow_senders().await;
            }
            "memory" => memory::table().await,
            "replay" => replay::table().await,
            "transform" => transform::table().await,
            "cold" => cold::table().await,
            _warm => cold::warm::table().await,
        }
        println!();
    }
}

/// Closed-loop saturation, half load and a lone notification, each against the floor.
async fn saturation() {
    let floor = Pinned::floor();
    println!(
        "| scenario | notifications/s | CPU-µs per notification | floor CPU-µs | ratio to floor | SQS calls per notification | p50 added (ms) | p99 added (ms) | peak RSS (MiB) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    // A slow endpoint needs more notifications in flight to keep the relay busy. The last row
    // is the 4 KB one with metric lines on (RELAY_METRICS=emf, standard output to /dev/null).
    for (size, latency, connections, metrics) in [
        (1024, 0, 32, false),
        (4096, 0, 32, false),
        (65536, 0, 32, false),
        (4096, 10, 384, false),
        (4096, 0, 32, true),
    ] {
        let sqs = FakeSqs::start(fault(latency)).await;
        let relay = match metrics {
            true => Pinned::relay_with_metrics(&sqs),
            false => Pinned::relay(&sqs),
        };
        let driver = Driver::new(size);
        let floor_run = driver.closed_loop(&floor, connections, seconds()).await;
        relay.reset_peak_rss();
        let calls = sqs.calls();
        let relay_run = driver.closed_loop(&relay, connections, seconds()).await;
        let scenario = format!(
            "saturation, {} KB, endpoint {latency} ms, {connections} connections{}",
            size / 1024,
            if metrics { ", metric lines on" } else { "" }
        );
        row(
            &scenario,
            &relay_run,
            &floor_run,
            sqs.calls() - calls,
            relay.peak_rss_kib(),
        );
        if size == 4096 && latency == 0 && !metrics {
            let rate = relay_run.per_second() / 2.0;
            let floor_half = driver.open_loop(&floor, rate, seconds()).await;
            let calls = sqs.calls();
            let relay_half = driver.open_loop(&relay, rate, seconds()).await;
            let scenario = format!("half load ({rate:.0}/s), 4 KB, endpoint 0 ms");
            row(
                &scenario,
                &relay_half,
                &floor_half,
                sqs.calls() - calls,
                relay.peak_rss_kib(),
            );
            let floor_lone = driver.lone(&floor, 20).await;
            let calls = sqs.calls();
            let relay_lone = driver.lone(&relay, 20).await;
            row(
                "a lone notification (20, one at a time)",
                &relay_lone,
                &floor_lone,
                sqs.calls() - calls,
                relay.peak_rss_kib(),
            );
        }
    }
}

/// Notifications sent all at once, each on its own connection, against the relay's defaults:
/// how many were acknowledged, how long until all were, and until all were in the queue.
async fn bursts() {
    println!(
        "| burst | endpoint | acknowledged | all acknowledged (ms) | all in the queue (ms) | SQS calls per notification | peak RSS (MiB) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let memory = memory::Memory::SqliteLedgerAndFolder;
    let mut folders = Vec::new();
    for (count, latency, remembered) in [
        (1000, 0, false),
        (1000, 20, false),
        (5000, 0, false),
        (5000, 0, true),
    ] {
        let sqs = FakeSqs::start(fault(latency)).await;
        let folder = memory::folder();
        let relay = match remembered {
            true => Pinned::relay_with(&sqs, &memory.env(&folder, None, None)),
            false => Pinned::relay(&sqs),
        };
        relay.reset_peak_rss();
        let burst = Driver::new(4096).burst(&relay, &sqs, count).await;
        let with = match remembered {
            true => format!(", {}", memory.name()),
            false => String::new(),
        };
        println!(
            "| {count} × 4 KB at once{with} | {latency} ms | {} of {count} | {:.0} | {:.0} | {:.3} | {:.1} |",
            burst.ok,
            burst.acknowledged.as_secs_f64() * 1e3,
            burst.queued.as_secs_f64() * 1e3,
            sqs.calls() as f64 / count as f64,
            relay.peak_rss_kib() as f64 / 1024.0
        );
        drop(relay);
        folders.push(folder);
    }
    memory::remove(folders);
}

/// Legitimate notifications at a steady rate while slow senders hold bodies against the relay
/// (with its defaults), each declaring 4 KB and sending 100 bytes, reconnecting when cut.
async fn slow_senders() {
    const RATE: f64 = 200.0;
    println!(
        "| slow bodies held | notifications sent ({RATE:.0}/s) | answered 202 | p50 (ms) | p99 (ms) | slow requests ended per second | peak RSS (MiB) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for slow in [0, 256, 1000] {
        let sqs = FakeSqs::start(Fault::None).await;
        let relay = Pinned::relay(&sqs);
        relay.reset_peak_rss();
        let driver = Driver::new(4096);
        let (measured, ended) = driver.held_against(&relay, slow, RATE, seconds()).await;
        let sent = (RATE * seconds().as_secs_f64()) as usize;
        println!(
            "| {slow} | {sent} | {} | {:.1} | {:.1} | {ended:.0} | {:.1} |",
            measured.ok,
            measured.percentile(0.5).as_secs_f64() * 1e3,
            measured.percentile(0.99).as_secs_f64() * 1e3,
            relay.peak_rss_kib() as f64 / 1024.0
        );
    }
}

fn fault(latency_ms: u64) -> Fault {
    match latency_ms {
        0 => Fault::None,
        ms => Fault::Latency(Duration::from_millis(ms)),
    }
}
