//! Ledger entries an earlier release wrote, which named each destination by its sink's name
//! (`sqs:<queue>`) rather than by its resource: where the name stands for one destination of the
//! running configuration, its acknowledgement counts and is carried over to the resource; where
//! it stands for several, each is published to, and the relay says so. Never a 202 `duplicate`
//! for a destination that did not acknowledge.

#![cfg(feature = "sqlite")]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use relay_core::ledger::{Delivery, Identity, Ledger, Lookup, SqliteLedger, Verdict, epoch_ms};
use relay_core::{Config, Outcome, Relay, Sink};
use relay_testkit::config::ConfigFile;
use relay_testkit::ledger::{ManualClock, attempt, claim, settle};
use relay_testkit::metrics::Lines;
use relay_testkit::requests::Signer;
use relay_testkit::sinks::{SwitchSink, relay};

const SECRET: &str = "upgrade-test-secret";
const EAST: &str = "arn:aws:sqs:us-east-1:111111111111:orders";
const WEST: &str = "arn:aws:sqs:eu-west-1:222222222222:orders";

const TWO_QUEUES: &str = r#"
[sinks.east]
type = "sqs"
queue_url = "https://sqs.us-east-1.amazonaws.com/111111111111/orders"

[sinks.west]
type = "sqs"
queue_url = "https://sqs.eu-west-1.amazonaws.com/222222222222/orders"

[[routes]]
name = "both"
match = {}
to = ["east", "west"]
"#;

const ONE_QUEUE_ONE_FILE: &str = r#"
[sinks.east]
type = "sqs"
queue_url = "https://sqs.us-east-1.amazonaws.com/111111111111/orders"

[sinks.log]
type = "file"
path = "-"

[[routes]]
name = "both"
match = {}
to = ["east", "log"]
"#;

struct Setup {
    relay: Relay,
    ledger: Arc<dyn Ledger>,
    clock: Arc<ManualClock>,
    lines: Arc<Lines>,
    _dir: tempfile::TempDir,
    _file: ConfigFile,
}

/// A relay with `document`'s sinks, each injected as the sink `names` gives it (the name an
/// earlier release recorded it under), over an SQLite ledger.
fn setup(document: &str, names: &[(&str, Arc<SwitchSink>)]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let file = ConfigFile::new(document);
    let config: Config = file.load(&[("RELAY_HMAC_SECRET", SECRET)]).unwrap();
    let ledger: Arc<dyn Ledger> = Arc::new(SqliteLedger::open(&path).unwrap());
    let clock = ManualClock::at(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000));
    let sinks: Vec<(&str, Arc<dyn Sink>)> = names
        .iter()
        .map(|(n, s)| (*n, Arc::clone(s) as Arc<dyn Sink>))
        .collect();
    let lines = Arc::new(Lines::default());
    let relay = relay(config, &sinks, Arc::clone(&clock) as _)
        .with_ledger(Arc::clone(&ledger))
        .with_metrics(Arc::clone(&lines) as _);
    Setup {
        relay,
        ledger,
        clock,
        lines,
        _dir: dir,
        _file: file,
    }
}

impl Setup {
    async fn send(&self, payload: &str) -> Outcome {
        let signer = Signer {
            key_id: "dss".into(),
            secret: SECRET.into(),
            at: relay_core::verify::Clock::now(self.clock.as_ref()),
        };
        self.relay.accept(signer.json(payload)).await
    }

    /// What an earlier release wrote for `payload`'s notification: one attempt, routed to
    /// `legacy` names, each acknowledged or failed as `results` says.
    async fn earlier_release(&self, payload: &str, results: &[(&str, bool)]) -> Identity {
        let document: serde_json::Value = serde_json::from_str(payload).unwrap();
        let text = |v: &serde_json::Value| v.as_str().unwrap().to_owned();
        let (sub, bundle, version) = (
            text(&document["subscription_id"]),
            text(&document["match"]["bundle_uuid"]),
            text(&document["match"]["bundle_version"]),
        );
        let identity = Identity {
            dedup_key: relay_core::notification::dedup_key(&sub, &bundle, &version, Some("CREATE")),
            subscription_id: sub,
            bundle_uuid: bundle,
            bundle_version: version,
            event_type: Some("CREATE".into()),
        };
        // Ten seconds before: within the 100 s retention the helpers write.
        let at = epoch_ms(relay_core::verify::Clock::now(self.clock.as_ref())) - 10_000;
        let routed: Vec<&str> = results.iter().map(|(d, _)| *d).collect();
        let first = attempt(at, &routed);
        claim(self.ledger.as_ref(), &identity, &first).await;
        settle(self.ledger.as_ref(), &identity, &first, 0, results).await;
        identity
    }
}

fn body(outcome: &Outcome) -> serde_json::Value {
    serde_json::from_slice(&outcome.body).expect("a JSON answer")
}

fn payload(bundle: &str) -> String {
    serde_json::json!({
        "transaction_id": "t-1",
        "subscription_id": "sub-1",
        "event_type": "CREATE",
        "match": {"bundle_uuid": bundle, "bundle_version": "2026-12-01T000000.000000Z"},
    })
    .to_string()
}

#[tokio::test]
async fn an_acknowledgement_under_an_unambiguous_old_name_counts_and_is_carried_over() {
    let (east, log) = (SwitchSink::new("sqs:orders"), SwitchSink::new("file:-"));
    let s = setup(
        ONE_QUEUE_ONE_FILE,
        &[("east", Arc::clone(&east)), ("log", Arc::clone(&log))],
    );
    let payload = payload("bundle-1");
    // The earlier release: the queue acknowledged, the file failed.
    let identity = s
        .earlier_release(&payload, &[("sqs:orders", true), ("file:-", false)])
        .await;

    let retry = s.send(&payload).await;
    let answer = body(&retry);
    assert_eq!(answer["status"], "published", "{answer}");
    assert_eq!((east.calls(), log.calls()), (0, 1), "only what is missing");
    assert_eq!(
        answer["deliveries"],
        serde_json::json!([
            {"sink": "east", "resource": EAST, "message_id": "sqs:orders-0", "earlier": true},
            {"sink": "log", "resource": "file:-", "message_id": "1"},
        ])
    );
    assert_eq!(
        s.lines
            .sum("LegacyAcknowledgements", &[("Result", "carried")]),
        1.0
    );

    // Carried over: the entry now names the queue by its resource, and says where from.
    let key = identity.dedup_key.clone();
    let entry = s.ledger.find(&Lookup::Key(key)).await.unwrap().remove(0);
    assert!(entry.acks.contains_key(EAST), "{:?}", entry.acks.keys());
    let outcome = entry.attempts[1].outcome.as_ref().unwrap();
    assert_eq!(
        outcome[EAST],
        Delivery::Acknowledged {
            message_id: Some("sqs:orders-0".into()),
            carried_from: Some("sqs:orders".into()),
        }
    );

    // The next retry is a duplicate without reading the old name again.
    let again = s.send(&payload).await;
    assert_eq!(body(&again)["status"], "duplicate");
    assert_eq!((east.calls(), log.calls()), (0, 1));
    assert_eq!(
        s.lines
            .sum("LegacyAcknowledgements", &[("Result", "carried")]),
        1.0
    );
}

#[tokio::test]
async fn every_old_name_acknowledged_is_a_duplicate_that_carries_them_over() {
    let (east, log) = (SwitchSink::new("sqs:orders"), SwitchSink::new("file:-"));
    let s = setup(
        ONE_QUEUE_ONE_FILE,
        &[("east", Arc::clone(&east)), ("log", Arc::clone(&log))],
    );
    let payload = payload("bundle-2");
    let identity = s
        .earlier_release(&payload, &[("sqs:orders", true), ("file:-", true)])
        .await;
    let retry = s.send(&payload).await;
    assert_eq!(body(&retry)["status"], "duplicate", "{}", body(&retry));
    assert_eq!((east.calls(), log.calls()), (0, 0));
    let key = identity.dedup_key.clone();
    let entry = s.ledger.find(&Lookup::Key(key)).await.unwrap().remove(0);
    let now = epoch_ms(relay_core::verify::Clock::now(s.clock.as_ref()));
    assert_eq!(entry.verdict(1, now), Some(Verdict::Duplicate));
    assert!(entry.leases.is_empty(), "no lease left behind");
}

#[tokio::test]
async fn an_old_name_two_destinations_share_publishes_to_both() {
    // The earlier release named both queues `sqs:orders`: one acknowledgement stood for both.
    let (east, west) = (SwitchSink::new("sqs:orders"), SwitchSink::new("sqs:orders"));
    let s = setup(
        TWO_QUEUES,
        &[("east", Arc::clone(&east)), ("west", Arc::clone(&west))],
    );
    let payload = payload("bundle-3");
    s.earlier_release(&payload, &[("sqs:orders", true)]).await;

    let retry = s.send(&payload).await;
    let answer = body(&retry);
    assert_eq!(answer["status"], "published", "never a duplicate: {answer}");
    assert_eq!((east.calls(), west.calls()), (1, 1));
    let resources: Vec<&str> = answer["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["resource"].as_str().unwrap())
        .collect();
    assert_eq!(resources, [EAST, WEST]);
    assert_eq!(
        s.lines
            .sum("LegacyAcknowledgements", &[("Result", "ambiguous")]),
        2.0
    );
    let again = s.send(&payload).await;
    assert_eq!(body(&again)["status"], "duplicate");
    assert_eq!((east.calls(), west.calls()), (1, 1));
}
