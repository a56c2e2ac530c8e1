//! The archive written through an engine (`RELAY_ARCHIVE_STREAM`): Amazon Data Firehose on
//! moto: the relay as production starts it, a delivery stream delivering to the archive's
//! bucket and prefix, and the objects it delivers read back as `relay replay` reads them.
//!
//! moto delivers each `PutRecord` and `PutRecordBatch` call at once, as one object under
//! `PREFIX/YYYY/MM/DD/HH/<stream>-…`; Firehose buffers for up to its buffering interval and
//! size first, and moto ignores both. moto keeps no delivery role, and its stream never fails a
//! record alone.
//!
//! And a Pub/Sub topic on the emulator, with fake-gcs-server as the archive: the emulator has
//! no Cloud Storage subscriptions, so the test writes the object one would.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_firehose::types::ExtendedS3DestinationConfiguration;
use relay_core::Relay;
use relay_core::archive::{self, ArchiveUrl, Record, SINK_NAME};
use relay_core::cloud::Cloud;
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
    let archive = archive::open(&url, &Cloud::default())
        .await
        .expect("the archive opens");
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
    let vars = relay_vars(&file, &url, &stream_url);
    let relay = Relay::from_config(relay_testkit::config(&vars))
        .await
        .expect("the relay starts");
    let relay = Arc::new(relay);
    let sent = send_captures(&relay, &stream_url).await;
    let (records, objects) = archived(&url).await;
    let replayed = replay(&vars);
    assert_eq!(
        records.keys().collect::<Vec<_>>(),
        sent.keys().collect::<Vec<_>>(),
        "a record of each notification, and nothing else"
    );
    // Each request writes its record (the JSON and multipart v2 captures share a dedup key, and
    // each writes one): at most one object per record, however the calls were batched.
    let written = capture::NAMES.len();
    assert!(
        objects >= 1 && objects <= written,
        "{objects} objects for {written} records"
    );
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

/// The captures, sent at once to `relay`: each answered 202, its archive delivery naming the
/// engine's id under `stream_url`. The captures' names by dedup key.
async fn send_captures(relay: &Arc<Relay>, stream_url: &str) -> BTreeMap<String, &'static str> {
    let answers = futures_util::future::join_all(capture::NAMES.iter().map(|name| {
        let relay = Arc::clone(relay);
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
        sent.insert(answer["dedup_key"].as_str().unwrap().to_owned(), *name);
    }
    sent
}

/// A relay's variables: the captures' secret, a file sink at `file`, the archive at `url`
/// written through `stream`.
fn relay_vars<'a>(file: &'a str, url: &'a str, stream: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("RELAY_HMAC_SECRET", capture::SECRET),
        ("RELAY_MAX_CLOCK_SKEW_SECS", "0"),
        ("RELAY_FILE_SINK", file),
        ("RELAY_ARCHIVE_URL", url),
        ("RELAY_ARCHIVE_STREAM", stream),
        ("RELAY_ARCHIVE_KEY", relay_testkit::archive::KEY),
    ]
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
    assert_the_stream_fails_the_answer(&url, "firehose://no-such-stream", &[]).await;
}

/// A relay archiving to `url` through `stream`, which does not exist: 502 `sink_failed` naming
/// the archive, and nothing in the archive.
async fn assert_the_stream_fails_the_answer(url: &str, stream: &str, more: &[(&str, &str)]) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notifications.jsonl").display().to_string();
    let mut vars = relay_vars(&file, url, stream);
    vars.extend_from_slice(more);
    let relay = Relay::from_config(relay_testkit::config(&vars))
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
    assert_eq!(archived(url).await.1, 0, "nothing in the bucket");
}

/// The captures, sent at once to a relay writing its archive through a Pub/Sub topic
/// (`pubsub://…`) on the emulator: each answered 202 once Pub/Sub took its record (the
/// archive's delivery names the message id), each record one message of the line alone. The
/// emulator has no Cloud Storage subscriptions, so the test plays the subscription's part: it
/// pulls the messages and writes their data as one object to fake-gcs-server, a line each,
/// named as a subscription with `filename_datetime_format = "YYYY/MM/DD/hh/mm_ss"` names its
/// objects; `relay replay` then reads it as it reads the relay's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_reach_the_archive_through_a_pubsub_topic() {
    common::require_emulator_env();
    let (topic, subscription) = crate::pubsub::topic_with_subscription().await;
    let bucket = crate::archive::gcs_bucket("archive-pubsub").await;
    let url = format!("gs://{bucket}/{PREFIX}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notifications.jsonl").display().to_string();
    let stream_url = format!("pubsub://{topic}");
    let emulator = std::env::var("PUBSUB_EMULATOR_HOST").unwrap();
    let mut vars = relay_vars(&file, &url, &stream_url);
    vars.push(("PUBSUB_EMULATOR_HOST", emulator.as_str()));
    let relay = Arc::new(
        Relay::from_config(relay_testkit::config(&vars))
            .await
            .expect("the relay starts"),
    );
    let sent = send_captures(&relay, &stream_url).await;

    // The subscription's part: the messages' data, each followed by a newline, as one object.
    let messages = crate::pubsub::pull(&subscription, capture::NAMES.len()).await;
    let mut object = Vec::new();
    for message in &messages {
        assert!(!message.data.contains(&b'\n'), "a record is one line");
        assert!(message.attributes.is_empty(), "a record is its data alone");
        object.extend_from_slice(&message.data);
        object.push(b'\n');
    }
    let now = std::time::SystemTime::now();
    let minute = now.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() % 3600;
    let name = format!(
        "{}{:02}_{:02}_{}",
        archive::hours(now, now)[0],
        minute / 60,
        minute % 60,
        common::unique("subscription")
    );
    let archive = archive::open(&url.parse().unwrap(), &Cloud::default())
        .await
        .unwrap();
    archive.put(&name, object.into()).await.expect("written");

    let (records, objects) = archived(&url).await;
    assert_eq!(objects, 1);
    assert_eq!(
        records.keys().collect::<Vec<_>>(),
        sent.keys().collect::<Vec<_>>(),
        "a record of each notification, and nothing else"
    );
    for (dedup_key, name) in &sent {
        assert!(
            records[dedup_key].payload == capture::payload(name),
            "{name}: the archived payload differs from the one the DSS sent"
        );
    }
    let replayed = replay(&vars);
    let n = capture::NAMES.len();
    assert!(
        replayed.contains(&format!("{n} archived in the window: {n} sent")),
        "{replayed}"
    );
}

/// A topic that does not exist fails the answer, naming the archive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_topic_fails_the_answer() {
    common::require_emulator_env();
    let bucket = crate::archive::gcs_bucket("archive-pubsub-missing").await;
    let url = format!("gs://{bucket}/{PREFIX}");
    let emulator = std::env::var("PUBSUB_EMULATOR_HOST").unwrap();
    let topic = common::unique("none");
    let stream = format!("pubsub://projects/test-project/topics/{topic}");
    let more = [("PUBSUB_EMULATOR_HOST", emulator.as_str())];
    assert_the_stream_fails_the_answer(&url, &stream, &more).await;
}
