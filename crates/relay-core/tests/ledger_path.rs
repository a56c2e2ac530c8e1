//! The relay with a delivery ledger (the embedded store), through `Relay::handle`: a retry
//! publishes only where the last attempt did not land, a duplicate is answered without a sink
//! call, two attempts never publish at once, and the ledger's failure is a 503 before any sink.

#![cfg(feature = "sqlite")]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use relay_core::ledger::{Ledger, Lookup, SqliteLedger, Verdict, epoch_ms};
use relay_core::{Outcome, Relay, Sink};
use relay_testkit::config::config;
use relay_testkit::ledger::ManualClock;
use relay_testkit::metrics::Lines;
use relay_testkit::requests::{Signer, status_and_code};
use relay_testkit::sinks::{SwitchSink, relay};

const SECRET: &str = "ledger-test-secret";
const QUEUE: &str = "https://sqs.us-east-1.amazonaws.com/123456789012/q";
/// The queue's resource: what the ledger records it under.
const QUEUE_ARN: &str = "arn:aws:sqs:us-east-1:123456789012:q";

fn body(outcome: &Outcome) -> serde_json::Value {
    serde_json::from_slice(&outcome.body).expect("a JSON answer")
}

fn notification(subscription: &str, bundle: &str, event: &str) -> String {
    serde_json::json!({
        "transaction_id": relay_core::ledger::attempt_id(),
        "subscription_id": subscription,
        "event_type": event,
        "match": {"bundle_uuid": bundle, "bundle_version": "2026-12-01T000000.000000Z"},
    })
    .to_string()
}

/// A relay routing every notification to two sinks, `file` and `sqs`, recording in the ledger
/// file under `dir`, on `clock`; `extra` settings on top.
struct Setup {
    relay: Relay,
    file: Arc<SwitchSink>,
    sqs: Arc<SwitchSink>,
    ledger: Arc<dyn Ledger>,
    clock: Arc<ManualClock>,
    _dir: tempfile::TempDir,
}

fn setup(extra: &[(&str, &str)]) -> Setup {
    setup_with(extra, true)
}

/// [`setup`], with the two sinks named by variables (`sinks_from_vars`) or by `extra`'s file.
fn setup_with(extra: &[(&str, &str)], sinks_from_vars: bool) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let path_text = path.to_str().unwrap().to_owned();
    let mut vars = vec![
        ("RELAY_HMAC_SECRET", SECRET),
        ("RELAY_LEDGER_URL", path_text.as_str()),
    ];
    if sinks_from_vars {
        vars.extend([("RELAY_FILE_SINK", "-"), ("RELAY_SQS_QUEUE_URL", QUEUE)]);
    }
    vars.extend_from_slice(extra);
    let clock = ManualClock::at(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000));
    let (file, sqs) = (SwitchSink::new("file"), SwitchSink::new("sqs"));
    let ledger: Arc<dyn Ledger> = Arc::new(SqliteLedger::open(&path).unwrap());
    let relay = relay(
        config(&vars),
        &[
            ("file", Arc::clone(&file) as Arc<dyn Sink>),
            ("sqs", Arc::clone(&sqs) as Arc<dyn Sink>),
        ],
        Arc::clone(&clock) as _,
    )
    .with_ledger(Arc::clone(&ledger));
    Setup {
        relay,
        file,
        sqs,
        ledger,
        clock,
        _dir: dir,
    }
}

impl Setup {
    /// The same setup, writing its metric lines to `out`.
    fn with_metrics(mut self, out: Arc<dyn relay_core::metrics::MetricsOut>) -> Self {
        self.relay = self.relay.with_metrics(out);
        self
    }

    /// Sends `payload`, signed at the clock's time.
    async fn send(&self, payload: &str) -> Outcome {
        let signer = Signer {
            key_id: "dss".into(),
            secret: SECRET.into(),
            at: relay_core::verify::Clock::now(self.clock.as_ref()),
        };
        self.relay.accept(signer.json(payload)).await
    }

    fn calls(&self) -> (usize, usize) {
        (self.file.calls(), self.sqs.calls())
    }
}

#[tokio::test]
async fn a_retry_publishes_only_where_the_last_attempt_failed() {
    let s = setup(&[]);
    let payload = notification("sub-1", "bundle-1", "CREATE");
    s.sqs.fail(true);
    let first = s.send(&payload).await;
    assert_eq!(status_and_code(&first), (503, "sink_unavailable".into()));
    assert_eq!(s.calls(), (1, 1));

    s.sqs.fail(false);
    let second = s.send(&payload).await;
    assert_eq!(second.status, 202, "{}", body(&second));
    assert_eq!(
        s.calls(),
        (1, 2),
        "the file sink had acknowledged: not called again"
    );
    let deliveries = body(&second)["deliveries"].clone();
    assert_eq!(
        deliveries,
        serde_json::json!([
            {"sink": "file", "resource": "file:-", "message_id": "1", "earlier": true},
            {"sink": "sqs", "resource": QUEUE_ARN, "message_id": "1"},
        ])
    );

    let third = s.send(&payload).await;
    assert_eq!(third.status, 202);
    let answer = body(&third);
    assert_eq!(answer["status"], "duplicate");
    assert_eq!(
        answer["deliveries"],
        serde_json::json!([
            {"sink": "file", "resource": "file:-", "message_id": "1", "earlier": true},
            {"sink": "sqs", "resource": QUEUE_ARN, "message_id": "1", "earlier": true},
        ])
    );
    assert_eq!(s.calls(), (1, 2), "a duplicate calls no sink");
    assert_eq!((s.file.messages().len(), s.sqs.messages().len()), (1, 1));
}

#[tokio::test]
async fn the_dss_v2_schedule_reaches_each_destination_once_until_the_retention_ends() {
    let s = setup(&[("RELAY_LEDGER_RETENTION_SECS", "691200")]);
    let payload = notification("sub-1", "bundle-2", "CREATE");
    // v2: inline, then 15 min later, then every 6 h up to about 72 h: 13 attempts.
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut offsets = vec![Duration::ZERO, Duration::from_secs(15 * 60)];
    offsets.extend((1..=11).map(|k| Duration::from_secs(15 * 60 + k * 6 * 3600)));
    assert_eq!(offsets.len(), 13);
    // The queue is down for the first three attempts (about six and a half hours).
    s.sqs.fail(true);
    let mut answers = Vec::new();
    for (i, offset) in offsets.iter().enumerate() {
        if i == 3 {
            s.sqs.fail(false);
        }
        s.clock.set(start + *offset);
        let outcome = s.send(&payload).await;
        let status = body(&outcome)["status"].as_str().map(str::to_owned);
        answers.push((outcome.status.as_u16(), status));
    }
    let expected: Vec<(u16, Option<String>)> = (0..13)
        .map(|i| match i {
            0..=2 => (503, None),
            3 => (202, Some("published".into())),
            _ => (202, Some("duplicate".into())),
        })
        .collect();
    assert_eq!(answers, expected);
    assert_eq!((s.file.messages().len(), s.sqs.messages().len()), (1, 1));
    assert_eq!(s.calls(), (1, 4));

    let entries = s
        .ledger
        .find(&Lookup::Bundle("bundle-2".into()))
        .await
        .unwrap();
    let now = epoch_ms(start + offsets[12]);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].attempts.len(), 13);
    assert_eq!(entries[0].duplicates(now), 9);
    assert_eq!(entries[0].verdict(3, now), Some(Verdict::Published));

    // Eight days after the last attempt, the ledger has forgotten it: it is new again.
    s.clock
        .set(start + offsets[12] + Duration::from_secs(691_200 + 1));
    let late = s.send(&payload).await;
    assert_eq!(body(&late)["status"], "published");
    assert_eq!((s.file.messages().len(), s.sqs.messages().len()), (2, 2));
}

#[tokio::test]
async fn an_attempt_while_another_publishes_is_told_to_retry() {
    let s = setup(&[]);
    let payload = notification("sub-1", "bundle-3", "CREATE");
    // The first attempt's claim holds the leases; a stuck attempt is simulated by claiming
    // through the same ledger with a long deadline and never settling.
    let held = relay_testkit::ledger::attempt(
        epoch_ms(relay_core::verify::Clock::now(s.clock.as_ref())),
        &["file:-", QUEUE_ARN],
    );
    let identity = relay_core::ledger::Identity {
        dedup_key: relay_core::notification::dedup_key(
            "sub-1",
            "bundle-3",
            "2026-12-01T000000.000000Z",
            Some("CREATE"),
        ),
        subscription_id: "sub-1".into(),
        bundle_uuid: "bundle-3".into(),
        bundle_version: "2026-12-01T000000.000000Z".into(),
        event_type: Some("CREATE".into()),
    };
    relay_testkit::ledger::claim(s.ledger.as_ref(), &identity, &held).await;
    let busy = s.send(&payload).await;
    assert_eq!(status_and_code(&busy), (503, "in_progress".into()));
    assert_eq!(busy.headers["retry-after"], "7");
    assert_eq!(
        s.calls(),
        (0, 0),
        "nothing published while another attempt holds the leases"
    );
    // Past the lease, the holder counts as gone and the next attempt delivers.
    s.clock
        .set(relay_core::verify::Clock::now(s.clock.as_ref()) + Duration::from_millis(7_001));
    let after = s.send(&payload).await;
    assert_eq!(body(&after)["status"], "published");
    assert_eq!(s.calls(), (1, 1));
}

#[tokio::test]
async fn filtered_notifications_are_recorded_unless_turned_off() {
    for (record, expected) in [("true", 1), ("false", 0)] {
        let routes = format!(
            "[sinks.file]\ntype = \"file\"\npath = \"-\"\n\n[sinks.sqs]\ntype = \"sqs\"\nqueue_url = \"{QUEUE}\"\n\n\
             [[routes]]\nname = \"creates\"\nmatch = {{ event_type = [\"CREATE\"] }}\nto = [\"file\", \"sqs\"]\n"
        );
        let file = relay_testkit::config::ConfigFile::new(&routes);
        let s = setup_with(
            &[
                ("RELAY_CONFIG", file.path.as_str()),
                ("RELAY_LEDGER_RECORD_FILTERED", record),
            ],
            false,
        );
        let tombstone = s
            .send(&notification("sub-1", "bundle-4", "TOMBSTONE"))
            .await;
        assert_eq!(body(&tombstone)["status"], "filtered");
        let entries = s
            .ledger
            .find(&Lookup::Bundle("bundle-4".into()))
            .await
            .unwrap();
        assert_eq!(
            entries.len(),
            expected,
            "RELAY_LEDGER_RECORD_FILTERED={record}"
        );
        if let Some(entry) = entries.first() {
            assert_eq!(entry.verdict(0, 0), Some(Verdict::Filtered));
        }
    }
}

#[tokio::test]
async fn the_bundle_event_key_delivers_once_across_both_replicas_subscriptions() {
    let s = setup(&[("RELAY_LEDGER_KEY", "bundle_event")]);
    let aws = s.send(&notification("sub-aws", "bundle-5", "CREATE")).await;
    let gcp = s.send(&notification("sub-gcp", "bundle-5", "CREATE")).await;
    assert_eq!(body(&aws)["status"], "published");
    assert_eq!(body(&gcp)["status"], "duplicate");
    assert_eq!(s.calls(), (1, 1));
    // Without it, each subscription is its own notification.
    let s = setup(&[]);
    s.send(&notification("sub-aws", "bundle-5", "CREATE")).await;
    let gcp = s.send(&notification("sub-gcp", "bundle-5", "CREATE")).await;
    assert_eq!(body(&gcp)["status"], "published");
    assert_eq!(s.calls(), (2, 2));
}

#[tokio::test]
async fn a_locked_ledger_is_a_503_and_no_sink_is_called() {
    let s = setup(&[]);
    let path = s._dir.path().join("ledger.db");
    // Another process holds the file's write lock for longer than a writer waits.
    let blocker = rusqlite::Connection::open(&path).unwrap();
    blocker.execute_batch("BEGIN EXCLUSIVE;").unwrap();
    let outcome = s.send(&notification("sub-1", "bundle-6", "CREATE")).await;
    assert_eq!(
        status_and_code(&outcome),
        (503, "ledger_unavailable".into())
    );
    assert!(outcome.headers.contains_key("retry-after"));
    assert_eq!(s.calls(), (0, 0));
    blocker.execute_batch("ROLLBACK;").unwrap();
    let outcome = s.send(&notification("sub-1", "bundle-6", "CREATE")).await;
    assert_eq!(body(&outcome)["status"], "published");
}

#[tokio::test]
async fn duplicates_and_ledger_calls_are_counted_in_the_metric_lines() {
    let lines = Arc::new(Lines::default());
    let s = setup(&[]).with_metrics(Arc::clone(&lines) as _);
    let payload = notification("sub-1", "bundle-7", "CREATE");
    for _ in 0..3 {
        assert_eq!(s.send(&payload).await.status, 202);
    }
    // One new notification (a claim and a settlement), then two duplicates (a claim each).
    assert_eq!(lines.sum("Duplicates", &[]), 2.0);
    assert_eq!(
        lines.sum("LedgerCalls", &[("Call", "claim"), ("Result", "ok")]),
        3.0
    );
    assert_eq!(
        lines.sum("LedgerCalls", &[("Call", "settle"), ("Result", "ok")]),
        1.0
    );
    assert!(lines.sum("LedgerLatency", &[("Call", "claim")]) > 0.0);
    assert_eq!(lines.sum("Answers", &[("Code", "duplicate")]), 2.0);
    assert_eq!(lines.sum("Answers", &[("Code", "published")]), 1.0);
}

#[tokio::test]
async fn an_archived_notification_stands_delivered_in_progress_or_undelivered_per_destination() {
    use relay_core::archive::{Archive, DirArchive, Record, hours};
    use relay_core::relay::Standing::{Delivered, InProgress, Undelivered};
    let mut s = setup(&[]);
    let archive: Arc<dyn Archive> =
        Arc::new(DirArchive::open(&s._dir.path().join("archive")).unwrap());
    s.relay = s
        .relay
        .with_archive(Arc::clone(&archive), relay_testkit::archive::key());
    let payload = notification("sub-1", "bundle-5", "CREATE");
    s.sqs.fail(true);
    assert_eq!(status_and_code(&s.send(&payload).await).0, 503);
    let now = relay_core::verify::Clock::now(s.clock.as_ref());
    let hour = hours(now, now).pop().unwrap();
    let key = archive.list(&hour).await.unwrap().pop().expect("archived");
    let bytes = archive.read(&key, 1 << 20).await.unwrap().unwrap();
    let record = Record::open(&relay_testkit::archive::key(), &bytes).unwrap();
    let named = |file, sqs| vec![("file".to_owned(), file), ("sqs".to_owned(), sqs)];
    assert_eq!(
        s.relay.standing(&record).await.unwrap(),
        named(Delivered, Undelivered)
    );

    // Another attempt holds the queue: in progress, until its lease ends.
    let held = relay_testkit::ledger::attempt(epoch_ms(now), &[QUEUE_ARN]);
    let identity = relay_core::ledger::Identity {
        dedup_key: record.dedup_key.clone(),
        subscription_id: "sub-1".into(),
        bundle_uuid: "bundle-5".into(),
        bundle_version: "2026-12-01T000000.000000Z".into(),
        event_type: Some("CREATE".into()),
    };
    relay_testkit::ledger::claim(s.ledger.as_ref(), &identity, &held).await;
    assert_eq!(
        s.relay.standing(&record).await.unwrap(),
        named(Delivered, InProgress)
    );
    s.clock.set(now + Duration::from_millis(7_001));
    assert_eq!(
        s.relay.standing(&record).await.unwrap(),
        named(Delivered, Undelivered)
    );

    // The queue takes the retry: delivered everywhere.
    s.sqs.fail(false);
    assert_eq!(body(&s.send(&payload).await)["status"], "published");
    assert_eq!(
        s.relay.standing(&record).await.unwrap(),
        named(Delivered, Delivered)
    );
}
