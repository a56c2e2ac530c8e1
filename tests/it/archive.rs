//! The archive (`RELAY_ARCHIVE_URL`) in S3 (moto) and Cloud Storage (fake-gcs-server): the
//! stores against the conformance suite every store passes, then the relay as production starts
//! it (`Relay::from_config`) archiving each DSS capture next to a file sink, and an archive
//! bucket that does not exist failing the answer until it does.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use relay_core::archive::{self, ArchiveUrl, Record, SINK_NAME};
use relay_core::{Outcome, Relay};
use relay_testkit::capture;

use crate::common;

/// The archive's prefix in every bucket here.
const PREFIX: &str = "notifications/";

/// The S3 client the tests read the buckets with, path-style for moto.
async fn s3() -> aws_sdk_s3::Client {
    let sdk = common::sdk().await;
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .build(),
    )
}

/// A bucket name no other test uses (lowercase, at most 63 characters).
fn bucket_name(name: &str) -> String {
    common::unique(name).to_lowercase()
}

/// Creates the bucket `bucket` on moto.
async fn create_s3_bucket(bucket: &str) {
    s3().await
        .create_bucket()
        .bucket(bucket)
        .send()
        .await
        .expect("the bucket is created");
}

/// A new bucket on moto.
async fn s3_bucket(name: &str) -> String {
    let bucket = bucket_name(name);
    create_s3_bucket(&bucket).await;
    bucket
}

/// fake-gcs-server's JSON API (`STORAGE_EMULATOR_HOST`).
fn gcs_endpoint() -> String {
    let host = std::env::var("STORAGE_EMULATOR_HOST").expect("source infra/local/env.sh");
    match host.contains("://") {
        true => host.trim_end_matches('/').to_owned(),
        false => format!("http://{host}"),
    }
}

/// A request to fake-gcs-server: its status and body.
async fn gcs_call(request: http::Request<Full<Bytes>>) -> (u16, Bytes) {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
    let response = client
        .request(request)
        .await
        .expect("fake-gcs-server answers");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, body)
}

/// A new bucket on fake-gcs-server, made through its JSON API.
pub(crate) async fn gcs_bucket(name: &str) -> String {
    let bucket = bucket_name(name);
    let request = http::Request::post(format!("{}/storage/v1/b?project=test", gcs_endpoint()))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(format!(r#"{{"name": "{bucket}"}}"#))))
        .unwrap();
    let (status, body) = gcs_call(request).await;
    assert!((200..300).contains(&status), "{status}: {body:?}");
    bucket
}

/// Where a test's buckets live, read without the archive's code.
#[derive(Clone, Copy, Debug)]
enum Cloud {
    S3,
    Gcs,
}

impl Cloud {
    async fn bucket(self, name: &str) -> String {
        match self {
            Self::S3 => s3_bucket(name).await,
            Self::Gcs => gcs_bucket(name).await,
        }
    }

    fn url(self, bucket: &str) -> String {
        match self {
            Self::S3 => format!("s3://{bucket}/{PREFIX}"),
            Self::Gcs => format!("gs://{bucket}/{PREFIX}"),
        }
    }

    /// Every object name in `bucket`, sorted.
    async fn names(self, bucket: &str) -> Vec<String> {
        let mut names = match self {
            Self::S3 => {
                let listed = s3()
                    .await
                    .list_objects_v2()
                    .bucket(bucket)
                    .send()
                    .await
                    .expect("the bucket lists");
                assert!(!listed.is_truncated().unwrap_or(false));
                listed
                    .contents()
                    .iter()
                    .filter_map(|o| o.key().map(str::to_owned))
                    .collect::<Vec<_>>()
            }
            Self::Gcs => {
                let request =
                    http::Request::get(format!("{}/storage/v1/b/{bucket}/o", gcs_endpoint()))
                        .body(Full::new(Bytes::new()))
                        .unwrap();
                let (status, body) = gcs_call(request).await;
                assert_eq!(status, 200, "{body:?}");
                let listed: serde_json::Value = serde_json::from_slice(&body).unwrap();
                assert!(listed["nextPageToken"].is_null(), "{listed}");
                listed["items"]
                    .as_array()
                    .map(|items| {
                        items
                            .iter()
                            .map(|i| i["name"].as_str().unwrap().to_owned())
                            .collect()
                    })
                    .unwrap_or_default()
            }
        };
        names.sort();
        names
    }

    /// The object `name` in `bucket`.
    async fn object(self, bucket: &str, name: &str) -> Bytes {
        match self {
            Self::S3 => {
                let object = s3()
                    .await
                    .get_object()
                    .bucket(bucket)
                    .key(name)
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("s3://{bucket}/{name}: {e:?}"));
                object.body.collect().await.unwrap().into_bytes()
            }
            Self::Gcs => {
                let encoded = name.replace('/', "%2F");
                let request = http::Request::get(format!(
                    "{}/storage/v1/b/{bucket}/o/{encoded}?alt=media",
                    gcs_endpoint()
                ))
                .body(Full::new(Bytes::new()))
                .unwrap();
                let (status, body) = gcs_call(request).await;
                assert_eq!(status, 200, "gs://{bucket}/{name}: {body:?}");
                body
            }
        }
    }
}

/// The archive at `url`, opened as the relay opens it.
async fn open(url: &str) -> std::sync::Arc<dyn archive::Archive> {
    common::require_emulator_env();
    let url: ArchiveUrl = url.parse().expect("an archive URL");
    archive::open(&url, &relay_core::cloud::Cloud::default())
        .await
        .expect("the archive opens")
}

/// Each check named here, which takes a [`Cloud`], as two tests: `<check>::s3` on moto and
/// `<check>::gcs` on fake-gcs-server.
macro_rules! in_both_clouds {
    ($($check:ident),* $(,)?) => {$(
        mod $check {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn s3() {
                super::$check(super::Cloud::S3).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn gcs() {
                super::$check(super::Cloud::Gcs).await;
            }
        }
    )*};
}

in_both_clouds!(
    passes_the_archive_conformance_suite,
    never_counts_a_planted_object_as_a_record,
    lists_more_than_a_page_of_keys,
    prefixes_keep_their_records_apart,
    every_capture_is_archived,
    a_missing_archive_bucket_fails_the_answer,
);

/// The archive in a new bucket at `cloud`, under [`PREFIX`].
async fn fresh(cloud: Cloud, name: &str) -> std::sync::Arc<dyn archive::Archive> {
    open(&cloud.url(&cloud.bucket(name).await)).await
}

async fn passes_the_archive_conformance_suite(cloud: Cloud) {
    relay_testkit::archive::conformance(fresh(cloud, "archive").await.as_ref()).await;
}

/// Another record, an unsealed or forged copy, or bytes that are no record at a notification's
/// key: the relay writes its own record beside it, and a retry finds that one.
async fn never_counts_a_planted_object_as_a_record(cloud: Cloud) {
    relay_testkit::archive::planted_objects_never_count(&fresh(cloud, "archive-planted").await)
        .await;
}

async fn lists_more_than_a_page_of_keys(cloud: Cloud) {
    let archive = fresh(cloud, "archive-pages").await;
    relay_testkit::archive::lists_past_one_page(archive.as_ref(), 1050).await;
}

async fn prefixes_keep_their_records_apart(cloud: Cloud) {
    let bucket = cloud.bucket("archive-prefixes").await;
    let prefixed = open(&cloud.url(&bucket)).await;
    let root = open(cloud.url(&bucket).trim_end_matches(PREFIX)).await;
    relay_testkit::archive::prefixes_are_apart(prefixed.as_ref(), root.as_ref()).await;
}

/// A relay started as production starts it: the captures' key, their `Date` accepted at any
/// time (the relay's own clock), a file sink on `file`, the archive at `archive_url`, and the
/// extra `pairs`.
async fn relay(file: &Path, archive_url: &str, pairs: &[(&str, &str)]) -> Relay {
    common::require_emulator_env();
    let file = file.display().to_string();
    let mut all = vec![
        ("RELAY_HMAC_SECRET", capture::SECRET),
        ("RELAY_MAX_CLOCK_SKEW_SECS", "0"),
        ("RELAY_FILE_SINK", file.as_str()),
        ("RELAY_ARCHIVE_URL", archive_url),
        ("RELAY_ARCHIVE_KEY", relay_testkit::archive::KEY),
    ];
    all.extend_from_slice(pairs);
    Relay::from_config(relay_testkit::config(&all))
        .await
        .expect("the relay starts")
}

/// The answer's JSON body.
fn body(outcome: &Outcome) -> serde_json::Value {
    serde_json::from_slice(&outcome.body).expect("a JSON body")
}

/// The lines of the file sink's file.
fn lines(file: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The delivery of the sink named `sink`, or whose resource starts with it, in an answer.
fn delivery<'a>(answer: &'a serde_json::Value, sink: &str) -> &'a serde_json::Value {
    answer["deliveries"]
        .as_array()
        .and_then(|all| {
            all.iter().find(|d| {
                d["sink"] == sink || d["resource"].as_str().is_some_and(|r| r.starts_with(sink))
            })
        })
        .unwrap_or_else(|| panic!("no delivery to {sink}: {answer}"))
}

/// Every capture through the relay into the archive at `cloud`: the answer names the object,
/// the object is the record of what the DSS sent, and a second send leaves one object.
async fn every_capture_is_archived(cloud: Cloud) {
    for name in capture::NAMES {
        // A bucket each: the JSON and multipart v2 captures carry one payload, one dedup key.
        let bucket = cloud.bucket("archive-relay").await;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("notifications.jsonl");
        let relay = relay(&file, &cloud.url(&bucket), &[]).await;
        let request = capture::request(name);
        let (path, content_type) = (
            request.uri().path().to_owned(),
            request.headers()["content-type"]
                .to_str()
                .unwrap()
                .to_owned(),
        );

        let before = SystemTime::now();
        let outcome = relay.accept(request).await;
        let after = SystemTime::now();
        let answer = body(&outcome);
        assert_eq!(outcome.status, 202, "{name}: {answer}");
        let dedup_key = answer["dedup_key"]
            .as_str()
            .expect("a dedup key")
            .to_owned();
        let key = delivery(&answer, SINK_NAME)["message_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no object key: {answer}"))
            .to_owned();
        let hours = [archive::hour_prefix(before), archive::hour_prefix(after)];
        assert!(
            hours.iter().any(|h| key == format!("{h}{dedup_key}")),
            "{name}: {key} is not YYYY/MM/DD/HH/<dedup key> at the receipt time"
        );
        assert_eq!(lines(&file).len(), 1, "{name}: the file sink's line");

        let object_name = format!("{PREFIX}{key}");
        assert_eq!(
            cloud.names(&bucket).await,
            std::slice::from_ref(&object_name),
            "{name}"
        );
        let record = Record::open(
            &relay_testkit::archive::key(),
            &cloud.object(&bucket, &object_name).await,
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            record.payload == capture::payload(name),
            "{name}: the archived payload differs from the one the DSS sent"
        );
        assert_eq!(record.dedup_key, dedup_key, "{name}");
        assert!(
            record
                .attribute("dss.bundle_uuid")
                .is_some_and(|b| !b.is_empty()),
            "{name}: {:?}",
            record.attributes
        );
        assert_eq!(record.request["path"], path.as_str(), "{name}");
        assert_eq!(
            record.request["headers"]["content-type"],
            serde_json::json!([content_type]),
            "{name}: {}",
            record.request
        );

        let again = relay.accept(capture::request(name)).await;
        assert_eq!(again.status, 202, "{name}: {}", body(&again));
        let again = body(&again);
        assert_eq!(
            delivery(&again, SINK_NAME)["message_id"],
            key.as_str(),
            "{name}"
        );
        assert_eq!(
            cloud.names(&bucket).await,
            [object_name],
            "{name}: one object"
        );
        let record_again = Record::open(
            &relay_testkit::archive::key(),
            &cloud.object(&bucket, &format!("{PREFIX}{key}")).await,
        )
        .unwrap();
        assert_eq!(record_again, record, "{name}: the first record is kept");
    }
}

/// A temporary folder with the file sink's path and the ledger's.
struct Files {
    file: PathBuf,
    ledger: String,
    _dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self {
            file: dir.path().join("notifications.jsonl"),
            ledger: dir.path().join("ledger.sqlite").display().to_string(),
            _dir: dir,
        }
    }
}

/// Panics unless the answer is 502 `sink_failed` naming the archive.
fn assert_archive_failed(outcome: &Outcome) {
    let answer = body(outcome);
    assert_eq!(
        relay_testkit::status_and_code(outcome),
        (502, "sink_failed".to_owned()),
        "{answer}"
    );
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(SINK_NAME), "{answer}");
}

/// A relay archiving to a bucket that does not exist at `cloud`: 502 `sink_failed` naming the
/// archive.
async fn a_missing_archive_bucket_fails_the_answer(cloud: Cloud) {
    let name = "v2-json-post";
    let files = Files::new();
    let missing = bucket_name("archive-missing");
    let relay = relay(&files.file, &cloud.url(&missing), &[]).await;
    let outcome = relay.accept(capture::request(name)).await;
    assert_archive_failed(&outcome);
    // Without a ledger the file sink is published to at the same time as the archive: it has
    // the line, and the sender, told to retry, will send it again.
    let lines = lines(&files.file);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(
        lines[0]["payload"].as_str().unwrap().as_bytes(),
        capture::payload(name)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_ledger_the_retry_after_a_missing_bucket_writes_only_the_archive() {
    let name = "v2-json-post";
    let files = Files::new();
    let bucket = bucket_name("archive-later");
    let ledger = [("RELAY_LEDGER_URL", files.ledger.as_str())];
    let relay = relay(&files.file, &Cloud::S3.url(&bucket), &ledger).await;

    let first = relay.accept(capture::request(name)).await;
    assert!(!first.status.is_success(), "{}", body(&first));
    assert_archive_failed(&first);
    assert_eq!(lines(&files.file).len(), 1, "the file sink acknowledged");

    create_s3_bucket(&bucket).await;
    let retry = relay.accept(capture::request(name)).await;
    let answer = body(&retry);
    assert_eq!(retry.status, 202, "{answer}");
    assert_eq!(
        lines(&files.file).len(),
        1,
        "the retry published to the archive only"
    );
    let file = delivery(&answer, "file:");
    assert_eq!(file["earlier"], true, "{answer}");
    let key = delivery(&answer, SINK_NAME)["message_id"].as_str().unwrap();
    assert!(
        delivery(&answer, SINK_NAME).get("earlier").is_none(),
        "{answer}"
    );
    assert_eq!(
        Cloud::S3.names(&bucket).await,
        [format!("{PREFIX}{key}")],
        "{answer}"
    );
}
