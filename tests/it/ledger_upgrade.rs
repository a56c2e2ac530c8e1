//! Ledgers the previous release wrote, read by this one. That release named each destination by
//! its sink's name (`sqs:<queue>`, `file:-`) rather than by its resource; `data/ledger-b71296e`
//! holds what its own three stores wrote at 1,800,000,000 s (an SQLite file, the DynamoDB items
//! as `aws dynamodb scan` prints them, the Firestore documents as the REST API returns them) for
//! three notifications:
//!
//! - `acked-by-both`: a queue and a file, both acknowledged;
//! - `file-failed`: the queue acknowledged, the file failed (the answer was 503);
//! - `one-name-two-queues`: two queues called `orders` in two accounts, routed `["west",
//!   "east"]`; west failed, east acknowledged, and both were recorded under `sqs:orders`.
//!
//! The DSS's retry, a minute later, meets this release: acknowledged destinations are not
//! published again, a partly failed notification gets only what is missing, and a name two
//! destinations shared is published to each rather than answered `duplicate`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use relay_core::cloud::Cloud;
use relay_core::ledger::{self, Delivery, Ledger, LedgerUrl, Lookup};
use relay_core::{Outcome, Relay, Sink};
use relay_testkit::config::ConfigFile;
use relay_testkit::ledger::ManualClock;
use relay_testkit::metrics::Lines;
use relay_testkit::requests::Signer;
use relay_testkit::sinks::{SwitchSink, relay};

use crate::common::{sdk, unique};
use crate::ledger_firestore::{collection, raw};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/it/data/ledger-b71296e");
/// When the previous release wrote the entries; the retry comes a minute later.
const WRITTEN_AT: u64 = 1_800_000_000;
const SECRET: &str = "upgrade-test-secret";
const EAST: &str = "arn:aws:sqs:us-east-1:111111111111:orders";
const WEST: &str = "arn:aws:sqs:eu-west-1:222222222222:orders";

/// A sink the previous release's relay had: the queue `orders` in two accounts (`east`,
/// `west`), and a file (`log`).
fn sink(name: &str) -> String {
    let table = match name {
        "east" => {
            "type = \"sqs\"\nqueue_url = \"https://sqs.us-east-1.amazonaws.com/111111111111/orders\""
        }
        "west" => {
            "type = \"sqs\"\nqueue_url = \"https://sqs.eu-west-1.amazonaws.com/222222222222/orders\""
        }
        _ => "type = \"file\"\npath = \"-\"",
    };
    format!("[sinks.{name}]\n{table}\n\n")
}

/// The sinks `to`, and every notification routed to them in that order.
fn routed_to(to: &[&str]) -> String {
    let sinks: String = to.iter().map(|name| sink(name)).collect();
    format!("{sinks}[[routes]]\nname = \"both\"\nmatch = {{}}\nto = {to:?}\n")
}

/// The previous release's ledger in one store, opened by this release's `ledger::open`; the
/// guard keeps an SQLite copy's folder.
async fn previous_release(store: &str) -> (Arc<dyn Ledger>, Option<tempfile::TempDir>) {
    let read = |file: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(format!("{DATA}/{file}")).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    let (url, dir): (LedgerUrl, _) = match store {
        "sqlite" => {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("ledger.db");
            std::fs::copy(format!("{DATA}/ledger.db"), &path).unwrap();
            (path.display().to_string().parse().unwrap(), Some(dir))
        }
        "dynamodb" => {
            // That release's table is keyed by ledger_key alone: `relay ledger migrate` copies
            // it into this release's, keyed by bundle.
            let (earlier, table) = (unique("upgrade-earlier"), unique("upgrade"));
            let sdk = sdk().await;
            relay_testkit::dynamodb::create_earlier_ledger_table(&sdk, &earlier).await;
            let items = read("dynamodb-items.json");
            relay_testkit::dynamodb::put_items(&sdk, &earlier, &items).await;
            relay_testkit::dynamodb::create_ledger_table(&sdk, &table).await;
            let at = SystemTime::UNIX_EPOCH + Duration::from_secs(WRITTEN_AT + 60);
            let copy = || ledger::copy_earlier_table(&earlier, &table, at);
            let first = copy().await.expect("the copy");
            assert_eq!((first.copied, first.kept, first.expired), (3, 0, 0));
            // Again: nothing copied twice, nothing the new table holds replaced.
            let again = copy().await.expect("the copy again");
            assert_eq!((again.copied, again.kept), (0, 3));
            // Past their expiry: nothing is copied.
            let late = at + Duration::from_secs(30 * 24 * 3600);
            let expired = ledger::copy_earlier_table(&earlier, &table, late)
                .await
                .unwrap();
            assert_eq!((expired.copied, expired.expired), (0, 3));
            (format!("dynamodb://{table}").parse().unwrap(), None)
        }
        _ => {
            let (name, url) = collection();
            for document in read("firestore-documents.json").as_array().unwrap() {
                let path = format!("/{name}/{}", document["id"].as_str().unwrap());
                let fields = serde_json::json!({"fields": document["fields"]});
                raw("PATCH", &path, &fields).await;
            }
            (url, None)
        }
    };
    let opened = ledger::open(&url, &Cloud::default())
        .await
        .expect("the ledger opens");
    (opened, dir)
}

/// The DSS's retry of `bundle`'s notification, to a relay routing every notification to
/// `sinks` in their order (each configured as [`sink`] says, and published to through the
/// test's sink, which names itself as the previous release did) over `ledger`.
async fn retry(
    sinks: &[(&str, &Arc<SwitchSink>)],
    ledger: &Arc<dyn Ledger>,
    lines: &Arc<Lines>,
    bundle: &str,
) -> serde_json::Value {
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(WRITTEN_AT + 60);
    let names: Vec<&str> = sinks.iter().map(|(name, _)| *name).collect();
    let file = ConfigFile::new(&routed_to(&names));
    let config = file.load(&[("RELAY_HMAC_SECRET", SECRET)]).unwrap();
    let sinks: Vec<(&str, Arc<dyn Sink>)> = sinks
        .iter()
        .map(|(n, s)| (*n, Arc::clone(s) as Arc<dyn Sink>))
        .collect();
    let relay: Relay = relay(config, &sinks, ManualClock::at(at) as _)
        .with_ledger(Arc::clone(ledger))
        .with_metrics(Arc::clone(lines) as _);
    let payload = serde_json::json!({
        "transaction_id": "t-1",
        "subscription_id": "sub-1",
        "event_type": "CREATE",
        "match": {"bundle_uuid": bundle, "bundle_version": "2026-12-01T000000.000000Z"},
    });
    let signer = Signer {
        key_id: "dss".into(),
        secret: SECRET.into(),
        at,
    };
    let outcome: Outcome = relay.accept(signer.json(&payload.to_string())).await;
    serde_json::from_slice(&outcome.body).expect("a JSON answer")
}

async fn upgrade_keeps_its_word(store: &str) {
    let (ledger, _dir) = previous_release(store).await;
    let lines = Arc::new(Lines::default());
    let carried =
        |lines: &Lines, result| lines.sum("LegacyAcknowledgements", &[("Result", result)]);

    // Both acknowledged: a duplicate, nothing published.
    let (east, log) = (SwitchSink::new("sqs:orders"), SwitchSink::new("file:-"));
    let sinks = [("east", &east), ("log", &log)];
    let answer = retry(&sinks, &ledger, &lines, "acked-by-both").await;
    assert_eq!(answer["status"], "duplicate", "{store}: {answer}");
    assert_eq!((east.calls(), log.calls()), (0, 0), "{store}");
    // The file's resource is the name it had (`file:-`): only the queue's is carried.
    assert_eq!(carried(&lines, "carried"), 1.0, "{store}");

    // The file failed: only the file is published to, the queue's acknowledgement carried over.
    let answer = retry(&sinks, &ledger, &lines, "file-failed").await;
    assert_eq!(answer["status"], "published", "{store}: {answer}");
    assert_eq!(
        (east.calls(), log.calls()),
        (0, 1),
        "{store}: only what is missing"
    );
    let deliveries = &answer["deliveries"];
    assert_eq!(deliveries[0]["resource"], EAST, "{store}: {answer}");
    assert_eq!(deliveries[0]["earlier"], true, "{store}: {answer}");
    assert_eq!(deliveries[1]["resource"], "file:-", "{store}: {answer}");
    assert_eq!(carried(&lines, "carried"), 2.0, "{store}");
    let key = answer["dedup_key"].as_str().unwrap().to_owned();
    let lookup = Lookup::Key {
        key,
        bundle: Some("file-failed".into()),
    };
    let entry = ledger.find(&lookup).await.unwrap().remove(0);
    let outcome = entry.attempts.last().unwrap().outcome.as_ref().unwrap();
    assert!(
        matches!(&outcome[EAST], Delivery::Acknowledged { carried_from: Some(old), .. } if old == "sqs:orders"),
        "{store}: {outcome:?}"
    );

    // One name two queues shared: each is published to, never a duplicate.
    let (east, west) = (SwitchSink::new("sqs:orders"), SwitchSink::new("sqs:orders"));
    let sinks = [("west", &west), ("east", &east)];
    let answer = retry(&sinks, &ledger, &lines, "one-name-two-queues").await;
    assert_eq!(
        answer["status"], "published",
        "{store}: never a duplicate: {answer}"
    );
    assert_eq!((east.calls(), west.calls()), (1, 1), "{store}");
    let resources: Vec<&str> = answer["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["resource"].as_str().unwrap())
        .collect();
    assert_eq!(resources, [WEST, EAST], "{store}");
    assert_eq!(carried(&lines, "ambiguous"), 2.0, "{store}");
    let again = retry(&sinks, &ledger, &lines, "one-name-two-queues").await;
    assert_eq!(again["status"], "duplicate", "{store}: {again}");
    assert_eq!((east.calls(), west.calls()), (1, 1), "{store}");
}

#[tokio::test]
async fn an_sqlite_ledger_the_previous_release_wrote_keeps_its_word() {
    upgrade_keeps_its_word("sqlite").await;
}

#[tokio::test]
async fn a_dynamodb_ledger_the_previous_release_wrote_keeps_its_word() {
    upgrade_keeps_its_word("dynamodb").await;
}

#[tokio::test]
async fn a_firestore_ledger_the_previous_release_wrote_keeps_its_word() {
    upgrade_keeps_its_word("firestore").await;
}
