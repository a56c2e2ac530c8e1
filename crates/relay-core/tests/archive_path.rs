//! The archive on the relay's path, with a folder: every verified notification is archived as
//! the DSS sent it, filtered ones included and nothing unverified; a 2xx only once the archive
//! acknowledged; a retry after an archive failure completes only the archive; a replayed
//! message is marked and counted apart.

#![cfg(feature = "sqlite")]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use bytes::Bytes;
use relay_core::archive::{Archive, ArchiveError, DirArchive, Record, Written};
use relay_core::ledger::SqliteLedger;
use relay_core::relay::{REPLAYED, ReplayPlan, ReplayRecord, ReplayTo, Replayed};
use relay_core::{Outcome, Relay, Sink};
use relay_testkit::capture::{self, NAMES, SECRET};
use relay_testkit::metrics::Lines;
use relay_testkit::sinks::{RecordingSink, SwitchSink, capture_clock, relay};
use relay_testkit::{config, status_and_code};

fn body(outcome: &Outcome) -> serde_json::Value {
    serde_json::from_slice(&outcome.body).expect("a JSON answer")
}

/// The records in `archive`'s folder for the captures' hour.
async fn records(archive: &dyn Archive) -> Vec<Record> {
    let hour = relay_core::archive::hour_prefix(capture::time());
    let mut keys = archive.list(&hour).await.unwrap();
    keys.sort();
    let mut records = Vec::new();
    for key in keys {
        let bytes = archive
            .get(&key)
            .await
            .unwrap()
            .expect("listed, so present");
        records.push(Record::open(&relay_testkit::archive::key(), &bytes).unwrap());
    }
    records
}

/// A folder that fails while told to: retryably (1), or as a refusal (2).
#[derive(Debug)]
struct SwitchArchive {
    folder: DirArchive,
    failing: AtomicU8,
}

impl SwitchArchive {
    /// A folder under `dir` that fails retryably until told otherwise.
    fn throttled(dir: &Path) -> Arc<Self> {
        Arc::new(Self {
            folder: DirArchive::open(&dir.join("archive")).unwrap(),
            failing: AtomicU8::new(1),
        })
    }
}

#[async_trait::async_trait]
impl Archive for SwitchArchive {
    fn url(&self) -> String {
        self.folder.url()
    }
    async fn put(&self, key: &str, body: Bytes) -> Result<Written, ArchiveError> {
        match self.failing.load(Ordering::SeqCst) {
            1 => Err(ArchiveError::Unavailable("throttled".into())),
            2 => Err(ArchiveError::Refused("access denied".into())),
            _ => self.folder.put(key, body).await,
        }
    }
    async fn list(&self, folder: &str) -> Result<Vec<String>, ArchiveError> {
        self.folder.list(folder).await
    }
    async fn read(&self, key: &str, limit: usize) -> Result<Option<Bytes>, ArchiveError> {
        self.folder.read(key, limit).await
    }
}

/// A relay of the `relay.toml` at `routes`, its sink `file` recorded, writing to `archive`.
fn archived(routes: &Path, archive: &Arc<dyn Archive>) -> (Relay, Arc<RecordingSink>) {
    let sink = RecordingSink::new("memory");
    let vars = [
        ("RELAY_HMAC_SECRET", SECRET),
        ("RELAY_CONFIG", routes.to_str().unwrap()),
    ];
    let sinks = [("file", Arc::clone(&sink) as Arc<dyn Sink>)];
    let relay = relay(config(&vars), &sinks, capture_clock())
        .with_archive(Arc::clone(archive), relay_testkit::archive::key());
    (relay, sink)
}

#[tokio::test]
async fn every_verified_notification_is_archived_as_sent_filtered_ones_included() {
    let dir = tempfile::tempdir().unwrap();
    let archive: Arc<dyn Archive> = Arc::new(DirArchive::open(dir.path()).unwrap());
    // Only TOMBSTONE notifications are routed: the captures (CREATE, v1) are all filtered.
    let routes = dir.path().join("relay.toml");
    std::fs::write(
        &routes,
        "[sinks.file]\ntype = \"file\"\npath = \"-\"\n\n[[routes]]\nname = \"tombstones\"\nto = [\"file\"]\nmatch = { event_type = [\"TOMBSTONE\"] }\n",
    )
    .unwrap();
    for name in NAMES {
        let folder = tempfile::tempdir().unwrap();
        let archive: Arc<dyn Archive> = Arc::new(DirArchive::open(folder.path()).unwrap());
        let (relay, sink) = archived(&routes, &archive);
        let outcome = relay.accept(capture::request(name)).await;
        let answer = body(&outcome);
        assert_eq!(outcome.status, 202, "{name}: {answer}");
        assert_eq!(answer["status"], "filtered", "{name}");
        let key = answer["deliveries"][0]["message_id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(answer["deliveries"][0]["sink"], "archive");
        assert!(sink.messages().is_empty(), "{name}: filtered");

        let records = records(archive.as_ref()).await;
        assert_eq!(records.len(), 1, "{name}");
        let record = &records[0];
        assert_eq!(
            &record.payload[..],
            capture::payload(name),
            "{name}: byte for byte"
        );
        assert_eq!(record.received_at, capture::time());
        assert_eq!(
            key,
            relay_core::archive::object_key(record.received_at, &record.dedup_key)
        );
        assert_eq!(answer["dedup_key"], record.dedup_key.as_str());
        assert!(record.attribute("dss.bundle_uuid").is_some());
        assert!(record.request["headers"]["digest"].is_array(), "{name}");
        assert!(
            record.request["headers"].get("authorization").is_none(),
            "{name}: no signature kept"
        );
    }

    // A request that fails verification is answered before anything is archived.
    let relay = relay(
        config(&[
            ("RELAY_HMAC_SECRET", "another secret"),
            ("RELAY_FILE_SINK", "-"),
        ]),
        &[],
        capture_clock(),
    )
    .with_archive(Arc::clone(&archive), relay_testkit::archive::key());
    let refused = relay.accept(capture::request("v2-json-post")).await;
    assert_eq!(refused.status, 401);
    assert!(records(archive.as_ref()).await.is_empty());
}

#[tokio::test]
async fn an_archive_failure_answers_non_2xx_and_the_retry_completes_only_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let archive = SwitchArchive::throttled(dir.path());
    let file = SwitchSink::new("file");
    let ledger = Arc::new(SqliteLedger::open(&dir.path().join("ledger.db")).unwrap());
    let relay = relay(
        config(&[("RELAY_HMAC_SECRET", SECRET), ("RELAY_FILE_SINK", "-")]),
        &[("file", Arc::clone(&file) as Arc<dyn Sink>)],
        capture_clock(),
    )
    .with_ledger(ledger)
    .with_archive(Arc::clone(&archive) as _, relay_testkit::archive::key());

    let throttled = relay.accept(capture::request("v2-json-post")).await;
    assert_eq!(
        status_and_code(&throttled),
        (503, "sink_unavailable".into())
    );
    let message = body(&throttled)["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("destination archive"), "{message}");
    archive.failing.store(2, Ordering::SeqCst);
    let denied = relay.accept(capture::request("v2-json-post")).await;
    assert_eq!(status_and_code(&denied), (502, "sink_failed".into()));
    // The file took the message on the first attempt; the second one did not call it.
    assert_eq!((file.messages().len(), file.calls()), (1, 1));

    archive.failing.store(0, Ordering::SeqCst);
    let retry = relay.accept(capture::request("v2-json-post")).await;
    let answer = body(&retry);
    assert_eq!(retry.status, 202, "{answer}");
    assert_eq!(
        (file.messages().len(), file.calls()),
        (1, 1),
        "only the archive is retried"
    );
    let deliveries = answer["deliveries"].as_array().unwrap();
    assert!(
        deliveries
            .iter()
            .any(|d| d["sink"] == "file" && d["earlier"] == true),
        "{answer}"
    );
    assert!(
        deliveries
            .iter()
            .any(|d| d["sink"] == "archive" && d.get("earlier").is_none()),
        "{answer}"
    );
    assert_eq!(records(archive.as_ref()).await.len(), 1);

    // Then a duplicate: every destination, the archive included, had acknowledged.
    let again = relay.accept(capture::request("v2-json-post")).await;
    assert_eq!(body(&again)["status"], "duplicate");
}

#[tokio::test]
async fn a_replayed_message_is_marked_first_and_counted_apart() {
    let dir = tempfile::tempdir().unwrap();
    let archive: Arc<dyn Archive> = Arc::new(DirArchive::open(dir.path()).unwrap());
    let sink = RecordingSink::new("memory");
    let lines = Arc::new(Lines::default());
    // An SQS destination keeps at most ten attributes: the mark takes the place of the last.
    let relay = relay(
        config(&[
            ("RELAY_HMAC_SECRET", SECRET),
            (
                "RELAY_SQS_QUEUE_URL",
                "https://sqs.us-east-1.amazonaws.com/123456789012/q",
            ),
        ]),
        &[("sqs", Arc::clone(&sink) as Arc<dyn Sink>)],
        capture_clock(),
    )
    .with_archive(Arc::clone(&archive), relay_testkit::archive::key())
    .with_metrics(Arc::clone(&lines) as _);
    assert_eq!(
        relay
            .accept(capture::request("v1-json-post-custom-keyid"))
            .await
            .status,
        202
    );
    let live = sink.messages().remove(0);
    assert!(live.attributes.get(REPLAYED).is_none());

    let record = records(archive.as_ref()).await.remove(0);
    let plan = ReplayPlan {
        to: ReplayTo::Routes,
        record: ReplayRecord::Unrecorded,
        dry_run: false,
    };
    let replayed = relay.replay(&record, &plan).await.unwrap();
    assert!(
        matches!(&replayed, Replayed::Sent { to, .. } if to.len() == 1),
        "{replayed:?}"
    );
    let again = sink.messages().remove(1);
    assert_eq!(again.payload, live.payload);
    let names: Vec<&str> = again.attributes.iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], REPLAYED);
    assert_eq!(again.attributes.get(REPLAYED), Some("true"));
    assert!(names.len() <= relay_core::sink::AWS_MAX_ATTRIBUTES);
    assert_eq!(
        again.attributes.get("relay.key_id"),
        live.attributes.get("relay.key_id")
    );
    // One live publish, one replay, each counted under the destination's configured name.
    assert_eq!(
        lines.sum("Publishes", &[("Sink", "sqs")]),
        1.0,
        "the live one only"
    );
    assert_eq!(lines.sum("Publishes", &[("Sink", "archive")]), 1.0);
    assert_eq!(lines.sum("Replays", &[("Sink", "sqs")]), 1.0);

    // A dry run sends nothing; a destination that is not in the routes is refused.
    let dry = ReplayPlan {
        dry_run: true,
        ..plan.clone()
    };
    assert!(matches!(
        relay.replay(&record, &dry).await.unwrap(),
        Replayed::WouldSend { .. }
    ));
    assert_eq!(sink.messages().len(), 2);
    let nowhere = ReplayPlan {
        to: ReplayTo::Destination("nowhere".into()),
        ..plan
    };
    assert!(relay.replay(&record, &nowhere).await.is_err());
}

#[test]
fn a_sink_named_like_the_archive_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("relay.toml");
    std::fs::write(&file, "[sinks.archive]\ntype = \"file\"\npath = \"-\"\n").unwrap();
    let refused = relay_core::Config::from_vars(|name| match name {
        "RELAY_HMAC_SECRET" => Some("x".into()),
        "RELAY_CONFIG" => Some(file.to_str().unwrap().into()),
        "RELAY_ARCHIVE_URL" => Some(dir.path().to_str().unwrap().into()),
        "RELAY_ARCHIVE_KEY" => Some(relay_testkit::archive::KEY.into()),
        _ => None,
    })
    .unwrap_err()
    .to_string();
    assert!(refused.contains("RELAY_ARCHIVE_URL"), "{refused}");
    assert!(refused.contains("rename the sink"), "{refused}");
}

/// A record keeps the request headers a route names, so that a replay matches as the live
/// request did, and drops the others a sender added.
#[tokio::test]
async fn a_record_keeps_the_headers_routes_name() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("relay.toml");
    std::fs::write(
        &routes,
        "[sinks.file]\ntype = \"file\"\npath = \"-\"\n\n[[routes]]\nname = \"tenant\"\nto = [\"file\"]\nmatch = { \"$request\" = { headers = { x-tenant = [\"a\"] } } }\naccept_unsigned = true\n",
    )
    .unwrap();
    let archive: Arc<dyn Archive> = Arc::new(DirArchive::open(dir.path()).unwrap());
    let (relay, sink) = archived(&routes, &archive);
    let mut request = capture::request(NAMES[0]);
    for (name, value) in [("x-tenant", "a"), ("x-other", "b"), ("x-api-key", "k")] {
        request.headers_mut().insert(name, value.parse().unwrap());
    }
    let outcome = relay.accept(request).await;
    assert_eq!(outcome.status, 202, "{}", body(&outcome));
    assert_eq!(sink.messages().len(), 1, "the route took it");
    let records = records(archive.as_ref()).await;
    let headers = records[0].request["headers"].as_object().unwrap();
    assert_eq!(headers["x-tenant"], serde_json::json!(["a"]));
    for dropped in ["x-other", "x-api-key", "authorization"] {
        assert!(headers.get(dropped).is_none(), "{dropped} kept");
        assert!(
            records[0].dropped_headers.iter().any(|h| h == dropped),
            "{dropped}"
        );
    }
}

/// A request that verifies and is then refused (here 400 `invalid_json`) is kept as refused
/// before the answer: while the archive cannot take it the answer is 503, so the sender retries;
/// then the refusal, with one record whatever the retries. An unverified request is never kept,
/// and without an archive the refusal is answered as before. Each is counted.
#[tokio::test]
async fn a_verified_request_refused_is_kept_before_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let archive = SwitchArchive::throttled(dir.path());
    let vars = [("RELAY_HMAC_SECRET", SECRET), ("RELAY_FILE_SINK", "-")];
    let lines = Arc::new(Lines::default());
    let kept_by = relay(config(&vars), &[], capture_clock())
        .with_archive(Arc::clone(&archive) as _, relay_testkit::archive::key())
        .with_metrics(Arc::clone(&lines) as _);
    let body = r#"{"transaction_id": "t-1", "subscription_id": "#;
    let signed = || relay_testkit::requests::Signer::capture("dss").json(body);

    let unavailable = kept_by.accept(signed()).await;
    assert_eq!(
        status_and_code(&unavailable),
        (503, "sink_unavailable".into())
    );
    archive.failing.store(0, Ordering::SeqCst);
    for _retry in 0..2 {
        let refused = kept_by.accept(signed()).await;
        assert_eq!(status_and_code(&refused), (400, "invalid_json".into()));
    }
    let mut forged = signed();
    *forged.body_mut() = Bytes::from_static(b"{\"transaction_id\": ");
    assert_eq!(status_and_code(&kept_by.accept(forged).await).0, 401);

    let kept = records(archive.as_ref()).await;
    assert_eq!(
        kept.len(),
        1,
        "one record, and none of the unverified request"
    );
    let refused = kept[0].refused.as_ref().expect("kept as refused");
    assert_eq!(
        (refused.status, refused.code.as_str()),
        (400, "invalid_json")
    );
    assert_eq!(kept[0].payload, body.as_bytes(), "the body as it came");
    assert_eq!(kept[0].attribute("relay.key_id"), Some("dss"));
    assert_eq!(lines.sum("VerifiedRefused", &[("Kept", "false")]), 1.0);
    assert_eq!(lines.sum("VerifiedRefused", &[("Kept", "true")]), 2.0);
    let codes = lines.sum("VerifiedRefused", &[("Code", "invalid_json")]);
    assert_eq!(codes, 3.0);

    let without = relay(config(&vars), &[], capture_clock()).with_metrics(Arc::clone(&lines) as _);
    let refused = without.accept(signed()).await;
    assert_eq!(status_and_code(&refused), (400, "invalid_json".into()));
    assert_eq!(lines.sum("VerifiedRefused", &[("Kept", "false")]), 2.0);
}
