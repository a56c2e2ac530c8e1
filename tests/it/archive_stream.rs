//! The archive written through Amazon Data Firehose (`RELAY_ARCHIVE_STREAM=firehose://…`) on
//! moto: the relay as production starts it, a delivery stream delivering to the archive's
//! bucket and prefix, and the objects it delivers read back as `relay replay` reads them.
//!
//! moto delivers each `PutRecord` and `PutRecordBatch` call at once, as one object under
//! `PREFIX/YYYY/MM/DD/HH/<stream>-…`; Firehose buffers for up to its buffering interval and
//! size first, and moto ignores both. moto keeps no delivery role, and its stream never fails a
//! record alone.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_firehose::types::ExtendedS3DestinationConfiguration;
use relay_core::Relay;
use relay_core::archive::{self, ArchiveUrl, Record, SINK_NAME};
use relay_testkit::capture;

use crate::common;

const PREFIX: &str = "notifications/";

/// A bucket on moto, and a delivery stream delivering to it under [`PREFIX`]: their names.
async fn bucket_and_stream(name: &str) -> (String, String) {
    let sdk = common::sdk().await;
    let bucket = common::unique(name).to_lowercase();
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .build(),
    );
    s3.create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("the bucket");
    let stream = common::unique(name);
    let destination = ExtendedS3DestinationConfiguration::builder()
        .bucket_arn(format!("arn:aws:s3:::{bucket}"))
        .role_arn("arn:aws:iam::123456789012:role/archive-delivery")
        .prefix(PREFIX)
        .build()
        .expect("a destination");
    aws_sdk_firehose::Client::new(&sdk)
        .create_delivery_stream()
        .delivery_stream_name(&stream)
        .extended_s3_destination_configuration(destination)
        .send()
        .await
        .expect("the delivery stream");
    (bucket, stream)
}

/// Every record in the archive's objects, by dedup key, as `relay replay` reads them (each
/// object's lines, each opened under the archive's key); the objects' count.
async fn archived(url: &str) -> (BTreeMap<String, Record>, usize) {
    let url: ArchiveUrl = url.parse().unwrap();
    let archive = archive::open(&url, None).await.expect("the archive opens");
    let now = std::time::SystemTime::now();
    let mut keys = Vec::new();
    for hour in archive::hours(now - std::time::Duration::from_secs(3600), now) {
        keys.extend(archive.list(&hour).await.expect("listed"));
    }
    let mut records = BTreeMap::new();
    for key in &keys {
        let object = archive.get(key).await.unwrap().expect("listed, so there");
        for (name, line) in archive::records(key, &object) {
            let record = Record::open(&relay_testkit::archive::key(), &line)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            records.insert(record.dedup_key.clone(), record);
        }
    }
    (records, keys.len())
}

/// The captures, sent at once to a relay writing its archive through Firehose: each answered
/// 202 once Firehose took its record (the archive's delivery names the stream's record id),
/// and each in the bucket under the archive's prefix and hour, byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_reach_the_archive_through_firehose() {
    common::require_emulator_env();
    let (bucket, stream) = bucket_and_stream("archive-firehose").await;
    let url = format!("s3://{bucket}/{PREFIX}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notifications.jsonl").display().to_string();
    let stream_url = format!("firehose://{stream}");
    let vars = [
        ("RELAY_HMAC_SECRET", capture::SECRET),
        ("RELAY_MAX_CLOCK_SKEW_SECS", "0"),
        ("RELAY_FILE_SINK", file.as_str()),
        ("RELAY_ARCHIVE_URL", url.as_str()),
        ("RELAY_ARCHIVE_STREAM", stream_url.as_str()),
        ("RELAY_ARCHIVE_KEY", relay_testkit::archive::KEY),
    ];
    let relay = Relay::from_config(relay_testkit::config(&vars))
        .await
        .expect("the relay starts");
    let relay = Arc::new(relay);
    let answers = futures_util::future::join_all(capture::NAMES.iter().map(|name| {
        let relay = Arc::clone(&relay);
        async move { (name, relay.accept(capture::request(name)).await) }
    }))
    .await;
    let mut sent = BTreeMap::new();
    for (name, outcome) in answers {
        let answer: serde_json::Value = serde_json::from_slice(&outcome.body).unwrap();
        assert_eq!(outcome.status, 202, "{name}: {answer}");
        let archive = answer["deliveries"]
            .as_array()
            .and_then(|d| d.iter().find(|d| d["sink"] == SINK_NAME))
            .unwrap_or_else(|| panic!("{name}: no archive delivery: {answer}"));
        let id = archive["message_id"].as_str().unwrap();
        assert!(id.starts_with(&format!("{stream_url}/")), "{name}: {id}");
        sent.insert(answer["dedup_key"].as_str().unwrap().to_owned(), name);
    }
    let (records, objects) = archived(&url).await;
    let replayed = replay(&vars);
    assert_eq!(
        records.keys().collect::<Vec<_>>(),
        sent.keys().collect::<Vec<_>>(),
        "a record of each notification, and nothing else"
    );
    assert!(objects >= 1 && objects <= sent.len(), "{objects} objects");
    for (dedup_key, name) in &sent {
        assert!(
            records[dedup_key].payload == capture::payload(name),
            "{name}: the archived payload differs from the one the DSS sent"
        );
    }
    // relay replay reads Firehose's objects as it reads the relay's own: each capture's
    // record (the JSON and multipart v2 captures share a dedup key, each has its record).
    let n = capture::NAMES.len();
    assert!(
        replayed.contains(&format!("{n} archived in the window: {n} sent")),
        "{replayed}"
    );
    let lines = std::fs::read_to_string(&file).unwrap().lines().count();
    assert_eq!(lines, 2 * n, "each notification, then its replay");
}

/// `relay replay --since 1h --again` with the relay's variables (and the emulators'), without a
/// ledger: every record is sent. Its standard output.
fn replay(vars: &[(&str, &str)]) -> String {
    let out = std::process::Command::new(relay_testkit::built_binary("relay"))
        .args(["replay", "--since", "1h", "--again", "--yes"])
        .envs(vars.iter().copied())
        .output()
        .expect("relay replay runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A stream that does not exist fails the answer (the archive did not take the record), and
/// the relay names the archive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_delivery_stream_fails_the_answer() {
    common::require_emulator_env();
    let (bucket, _) = bucket_and_stream("archive-firehose-missing").await;
    let url = format!("s3://{bucket}/{PREFIX}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notifications.jsonl").display().to_string();
    let relay = Relay::from_config(relay_testkit::config(&[
        ("RELAY_HMAC_SECRET", capture::SECRET),
        ("RELAY_MAX_CLOCK_SKEW_SECS", "0"),
        ("RELAY_FILE_SINK", file.as_str()),
        ("RELAY_ARCHIVE_URL", url.as_str()),
        ("RELAY_ARCHIVE_STREAM", "firehose://no-such-stream"),
        ("RELAY_ARCHIVE_KEY", relay_testkit::archive::KEY),
    ]))
    .await
    .expect("the relay starts");
    let outcome = relay.accept(capture::request(capture::NAMES[0])).await;
    let answer: serde_json::Value = serde_json::from_slice(&outcome.body).unwrap();
    assert_eq!(
        (outcome.status.as_u16(), answer["error"]["code"].as_str()),
        (502, Some("sink_failed")),
        "{answer}"
    );
    assert!(answer.to_string().contains(SINK_NAME), "{answer}");
    assert_eq!(archived(&url).await.1, 0, "nothing in the bucket");
}
