//! The replay table: the release `relay replay --since 3h` over an archive folder of
//! `BENCH_REPLAY_NOTIFICATIONS` (10,000) notifications of about 1 KB, received over the last 2
//! hours and written as the relay writes them ([`Record::to_bytes`] under [`object_key`]), to
//! the loopback SQS-protocol endpoint. The command runs pinned to core 0 (the endpoint stays
//! on this process's core); its wall time is from spawn to exit and its CPU time (user plus
//! system) is what this process's own `/proc/self/stat` counts for the children it waited for.
//! Every row checks that the endpoint took each notification exactly once, and panics if not.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use relay_core::Notification;
use relay_core::archive::{Record, object_key};
use relay_testkit::fake_sqs::{FakeSqs, Fault};

use crate::process::SECRET;

/// The payloads' size.
const SIZE: usize = 1024;

/// How far back the receipt times go.
const SPREAD: Duration = Duration::from_secs(2 * 3600);

/// `BENCH_REPLAY_NOTIFICATIONS` (10,000): the notifications archived.
fn notifications() -> usize {
    crate::number_from_env("BENCH_REPLAY_NOTIFICATIONS", 10_000)
}

/// A v2 CREATE as the DSS sends it, of about [`SIZE`] bytes, for bundle `i`.
fn payload(i: usize) -> String {
    let head = format!(
        r#"{{"transaction_id": "{:08x}-0000-4000-8000-{i:012x}", "subscription_id": "5f0c4d3e-7a7b-4a34-9a4d-1d2f3e4a5b6c", "event_type": "CREATE", "event_timestamp": "2026-12-01T08:00:00.000000Z", "match": {{"bundle_uuid": "{:08x}-{:04x}-4{:03x}-8000-{i:012x}", "bundle_version": "2026-12-01T080000.000000Z"}}, "attachments": {{"project": "bench", "files": ""#,
        i as u32,
        i as u32 ^ 0x5a5a_5a5a,
        (i >> 16) & 0xffff,
        i & 0xfff,
    );
    format!(
        "{head}{}\"}}}}",
        "x".repeat(SIZE.saturating_sub(head.len() + 3))
    )
}

/// The record the relay archives for `payload`, received at `at`.
fn record(payload: String, at: SystemTime) -> Record {
    let payload = Bytes::from(payload);
    let notification = Notification::parse(payload.clone()).expect("a valid notification");
    let mut attributes = vec![
        ("relay.dedup_key", notification.dedup_key().to_owned()),
        (
            "dss.subscription_id",
            notification
                .subscription_id()
                .unwrap_or_default()
                .to_owned(),
        ),
        (
            "dss.bundle_uuid",
            notification.bundle_uuid().unwrap_or_default().to_owned(),
        ),
        (
            "dss.bundle_version",
            notification.bundle_version().unwrap_or_default().to_owned(),
        ),
    ];
    if let Some(event_type) = notification.event_type() {
        attributes.push(("dss.event_type", event_type.to_owned()));
    }
    attributes.push(("dss.kind", "v2".to_owned()));
    if let Some(id) = notification.transaction_id() {
        attributes.push(("dss.transaction_id", id.to_owned()));
    }
    attributes.push(("relay.key_id", "dss".to_owned()));
    Record {
        received_at: at,
        dedup_key: notification.dedup_key().to_owned(),
        attributes: attributes
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect(),
        request: serde_json::json!({
            "path": "/",
            "query": {},
            "headers": {"content-type": ["application/json"]},
        }),
        dropped_headers: vec!["authorization".to_owned()],
        payload,
        refused: None,
    }
}

/// Writes `count` records into `root`, receipt times spread evenly over the last [`SPREAD`].
fn archive(root: &Path, count: usize) {
    let now = SystemTime::now();
    for i in 0..count {
        let at = now - Duration::from_secs(1) - SPREAD.mul_f64(i as f64 / count as f64);
        let record = record(payload(i), at);
        let path = root.join(object_key(at, &record.dedup_key));
        std::fs::create_dir_all(path.parent().expect("a key has a folder"))
            .expect("an archive folder");
        std::fs::write(&path, relay_testkit::archive::sealed(&record)).expect("a record written");
    }
}

/// What one `relay replay` did.
struct Run {
    wall: Duration,
    cpu_us: u64,
    listed: usize,
    sent: usize,
}

/// User plus system CPU time of the children this process waited for, in microseconds.
fn children_cpu_us() -> u64 {
    crate::process::stat_cpu_us("/proc/self/stat", 13)
}

/// The count before `label` in the summary line, "10000 archived in the window: 10000 sent, …".
fn count_before(summary: &str, label: &str) -> usize {
    let at = summary
        .find(label)
        .unwrap_or_else(|| panic!("no {label:?} in {summary:?}"));
    summary[..at]
        .rsplit([' ', ':'])
        .find(|w| !w.is_empty())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count before {label:?} in {summary:?}"))
}

/// Runs `relay replay --since 3h` (and `extra`) pinned to core 0 against `sqs`, with the
/// ledger in `ledger` when given.
fn replay(archive: &Path, ledger: Option<&Path>, sqs: &FakeSqs, extra: &[&str]) -> Run {
    let binary = std::env::current_exe()
        .expect("this binary")
        .with_file_name("relay");
    assert!(
        binary.exists(),
        "{} is missing: cargo build --release -p relay-cli",
        binary.display()
    );
    let mut env = vec![
        ("RELAY_HMAC_SECRET", SECRET.to_owned()),
        ("RELAY_ARCHIVE_URL", archive.display().to_string()),
        ("RELAY_ARCHIVE_KEY", relay_testkit::archive::KEY.to_owned()),
        ("RELAY_SQS_QUEUE_URL", sqs.queue_url()),
        ("RUST_LOG", "warn".to_owned()),
        ("AWS_ENDPOINT_URL_SQS", sqs.endpoint.clone()),
        ("AWS_ACCESS_KEY_ID", "bench".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "bench".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
    ];
    if let Some(ledger) = ledger {
        env.push(("RELAY_LEDGER_URL", ledger.display().to_string()));
    }
    let mut command = Command::new("taskset");
    command
        .arg("-c")
        .arg("0")
        .arg(&binary)
        .args(["replay", "--since", "3h"])
        .args(extra)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let cpu_before = children_cpu_us();
    let started = Instant::now();
    let output = command.output().expect("taskset runs");
    let wall = started.elapsed();
    let cpu_us = children_cpu_us() - cpu_before;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "relay replay {extra:?} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let summary = stdout
        .lines()
        .find(|l| l.contains(" archived in the window: "))
        .unwrap_or_else(|| panic!("no summary line in {stdout:?}"));
    Run {
        wall,
        cpu_us,
        listed: count_before(summary, " archived in the window"),
        sent: count_before(summary, " sent,"),
    }
}

/// Panics unless `sqs` took `count` distinct bodies, each exactly once.
fn assert_once_each(sqs: &FakeSqs, count: usize, row: &str) {
    let accepted: HashMap<String, u32> = sqs.accepted();
    let twice = accepted.values().filter(|&&n| n != 1).count();
    assert!(
        accepted.len() == count && twice == 0,
        "{row}: the endpoint took {} distinct bodies ({twice} more than once), expected {count} once each",
        accepted.len()
    );
}

/// A folder removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The table: without a ledger, through one (new, then again), and through one to a 10 ms
/// endpoint.
pub(crate) async fn table() {
    let count = notifications();
    let root = std::env::temp_dir().join(format!("relay-bench-replay-{}", std::process::id()));
    let _scratch = Scratch(root.clone());
    let folder = root.join("archive");
    archive(&folder, count);
    println!(
        "| relay replay, {count} × 1 KB archived (folder) | notifications | sent | wall (s) | notifications/s | CPU-µs per notification | vs no ledger |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let print = |name: &str, run: &Run, baseline: f64| {
        let per = run.cpu_us as f64 / run.listed.max(1) as f64;
        println!(
            "| {name} | {} | {} | {:.2} | {:.0} | {per:.1} | {:.2}× |",
            run.listed,
            run.sent,
            run.wall.as_secs_f64(),
            run.listed as f64 / run.wall.as_secs_f64(),
            per / baseline
        );
    };
    let check = |run: &Run, sent: usize, row: &str| {
        assert!(
            run.listed == count && run.sent == sent,
            "{row}: listed {}, sent {}; expected {count} listed, {sent} sent",
            run.listed,
            run.sent
        );
    };

    let sqs = FakeSqs::start(Fault::None).await;
    let name = "(a) --again, no ledger, endpoint 0 ms";
    let a = replay(&folder, None, &sqs, &["--again"]);
    check(&a, count, name);
    assert_once_each(&sqs, count, name);
    let baseline = a.cpu_us as f64 / count as f64;
    print(name, &a, baseline);

    let ledger = root.join("ledger.db");
    std::fs::File::create(&ledger).expect("an empty ledger file");
    let sqs = FakeSqs::start(Fault::None).await;
    let name = "(b) through the ledger, first run, endpoint 0 ms";
    let b = replay(&folder, Some(&ledger), &sqs, &[]);
    check(&b, count, name);
    assert_once_each(&sqs, count, name);
    print(name, &b, baseline);

    let name = "(c) the same command again (all delivered before)";
    let c = replay(&folder, Some(&ledger), &sqs, &[]);
    check(&c, 0, name);
    assert_once_each(&sqs, count, name);
    print(name, &c, baseline);

    let ledger = root.join("ledger-slow.db");
    std::fs::File::create(&ledger).expect("an empty ledger file");
    let sqs = FakeSqs::start(Fault::Latency(Duration::from_millis(10))).await;
    let name = "(d) through the ledger, first run, endpoint 10 ms";
    let d = replay(&folder, Some(&ledger), &sqs, &[]);
    check(&d, count, name);
    assert_once_each(&sqs, count, name);
    print(name, &d, baseline);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_replay_records_are_what_a_replay_reads_back() {
        let at = SystemTime::now();
        let (one, two) = (record(payload(1), at), record(payload(2), at));
        assert!((SIZE - 8..=SIZE + 8).contains(&one.payload.len()));
        assert_ne!(one.dedup_key, two.dedup_key);
        assert_ne!(
            one.attribute("dss.bundle_uuid"),
            two.attribute("dss.bundle_uuid")
        );
        let read = Record::from_bytes(&one.to_bytes()).expect("a record");
        assert_eq!(read.payload, one.payload);
        assert_eq!(
            read.attribute("relay.dedup_key"),
            Some(one.dedup_key.as_str())
        );
    }

    #[test]
    fn bench_replay_summary_counts_are_read() {
        let line = "10000 archived in the window: 0 sent, 10000 delivered before, 0 filtered by the routes in effect, 0 not selected, 0 failed";
        assert_eq!(count_before(line, " archived in the window"), 10000);
        assert_eq!(count_before(line, " sent,"), 0);
    }
}
