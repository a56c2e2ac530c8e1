//! The ledger's entry rules, store aside: claims, leases, settlements and verdicts.

use std::collections::BTreeMap;

use relay_core::ledger::{
    Attempt, Claim, Claimed, Delivery, Entry, Grant, HeldAttempt, Identity, Settlement, Verdict,
};
use relay_testkit::ledger::{deliveries, granted};

fn identity() -> Identity {
    Identity {
        dedup_key: "k".into(),
        subscription_id: "s".into(),
        bundle_uuid: "b".into(),
        bundle_version: "v".into(),
        event_type: Some("CREATE".into()),
    }
}

fn attempt(id: &str, at_ms: i64, routed: &[&str]) -> Attempt {
    Attempt {
        id: id.into(),
        at_ms,
        routes_version: None,
        split: None,
        routed: routed.iter().map(|d| (*d).to_owned()).collect(),
        outcome: None,
    }
}

fn claim(entry: &mut Entry, attempt: &Attempt, now_ms: i64) -> Claimed {
    let identity = identity();
    let claim = Claim {
        key: "k",
        identity: &identity,
        attempt,
        lease_until_ms: now_ms + 7_000,
        expires_at: now_ms / 1000 + 100,
    };
    entry.claim(&claim, now_ms)
}

/// The entry `k` about bundle `b`, held by `holder`'s attempt at `index`, none folded.
fn held(holder: &str, index: usize) -> HeldAttempt {
    HeldAttempt {
        key: "k".into(),
        bundle: "b".into(),
        holder: holder.into(),
        attempt: index,
        folded: 0,
    }
}

fn settle(entry: &mut Entry, attempt: &Attempt, index: usize, results: &[(&str, bool)]) {
    let results = deliveries(index, results);
    entry.settle(&Settlement {
        held: &held(&attempt.id, index),
        results: &results,
        now_ms: attempt.at_ms + 10,
        expires_at: attempt.at_ms / 1000 + 100,
    });
}

/// An entry whose first attempt, at 1 s, published to `destination` and was acknowledged.
fn acknowledged_once(destination: &str) -> Entry {
    let mut entry = Entry::new("k", &identity());
    let first = attempt("a1", 1_000, &[destination]);
    claim(&mut entry, &first, 1_000);
    settle(&mut entry, &first, 0, &[(destination, true)]);
    entry
}

#[test]
fn carrying_an_earlier_release_acknowledgement_over_publishes_nothing() {
    let mut entry = acknowledged_once("sqs:orders");
    let resource = "arn:aws:sqs:us-east-1:1:orders";
    let second = attempt("a2", 60_000, &[resource]);
    let Grant { others, .. } = granted(claim(&mut entry, &second, 60_000));
    assert_eq!(others.keys().collect::<Vec<_>>(), ["sqs:orders"]);
    let carried = BTreeMap::from([(
        resource.to_owned(),
        Delivery::Acknowledged {
            message_id: others["sqs:orders"].message_id.clone(),
            carried_from: Some("sqs:orders".into()),
        },
    )]);
    entry.settle(&Settlement {
        held: &held("a2", 1),
        results: &carried,
        now_ms: 60_010,
        expires_at: 160,
    });
    assert_eq!(
        entry.acks[resource].message_id.as_deref(),
        Some("sqs:orders-0")
    );
    assert!(
        entry.leases.is_empty(),
        "the carried destination's lease is freed"
    );
    assert_eq!(entry.verdict(1, 60_020), Some(Verdict::Duplicate));
}

#[test]
fn a_retry_publishes_only_where_the_last_attempt_failed_then_is_a_duplicate() {
    let mut entry = Entry::new("k", &identity());
    let first = attempt("a1", 1_000, &["q1", "q2"]);
    assert_eq!(
        claim(&mut entry, &first, 1_000),
        Claimed::Granted(Grant {
            attempt: 0,
            acked: BTreeMap::new(),
            others: BTreeMap::new(),
            since_ms: 1_000,
            folded: 0,
        })
    );
    settle(&mut entry, &first, 0, &[("q1", true), ("q2", false)]);
    assert!(entry.leases.is_empty());

    let second = attempt("a2", 60_000, &["q1", "q2"]);
    let retry = granted(claim(&mut entry, &second, 60_000));
    assert_eq!(retry.attempt, 1);
    assert_eq!(retry.acked.keys().collect::<Vec<_>>(), ["q1"]);
    assert_eq!(entry.leases.keys().collect::<Vec<_>>(), ["q2"]);
    settle(&mut entry, &second, 1, &[("q2", true)]);

    let third = attempt("a3", 120_000, &["q1", "q2"]);
    let Grant { attempt, acked, .. } = granted(claim(&mut entry, &third, 120_000));
    assert_eq!((attempt, acked.len()), (2, 2));
    assert_eq!(acked["q1"].message_id.as_deref(), Some("q1-0"));
    assert_eq!(acked["q2"].message_id.as_deref(), Some("q2-1"));
    assert!(entry.leases.is_empty(), "a duplicate takes no lease");
    let verdicts: Vec<_> = (0..3).map(|i| entry.verdict(i, 120_000)).collect();
    assert_eq!(
        verdicts,
        [
            Some(Verdict::Failed),
            Some(Verdict::Published),
            Some(Verdict::Duplicate)
        ]
    );
    assert_eq!(entry.duplicates(120_000), 1);
}

#[test]
fn a_live_lease_refuses_a_second_attempt_until_it_expires() {
    let mut entry = Entry::new("k", &identity());
    let first = attempt("a1", 1_000, &["q1"]);
    claim(&mut entry, &first, 1_000);
    let second = attempt("a2", 2_000, &["q1"]);
    assert_eq!(
        claim(&mut entry, &second, 2_000),
        Claimed::Busy { until_ms: 8_000 }
    );
    assert_eq!(entry.attempts.len(), 1, "a refused claim writes nothing");
    assert_eq!(entry.verdict(0, 2_000), Some(Verdict::InProgress));
    // The holder died: after its lease, the next attempt takes over.
    let third = attempt("a3", 8_001, &["q1"]);
    assert!(matches!(
        claim(&mut entry, &third, 8_001),
        Claimed::Granted(Grant { attempt: 1, .. })
    ));
    assert_eq!(entry.leases["q1"].holder, "a3");
    assert_eq!(entry.verdict(0, 8_001), Some(Verdict::Interrupted));
    // The late settlement of the first attempt keeps its acknowledgement but leaves the
    // lease of the attempt that took over.
    settle(&mut entry, &first, 0, &[("q1", true)]);
    assert_eq!(entry.leases["q1"].holder, "a3");
    assert_eq!(entry.acks["q1"].attempt, 0);
}

#[test]
fn an_acknowledged_destination_never_blocks_and_keeps_its_first_message_id() {
    let mut entry = acknowledged_once("q1");
    // A route added later: only the new destination is leased.
    let second = attempt("a2", 2_000, &["q1", "q3"]);
    claim(&mut entry, &second, 2_000);
    assert_eq!(entry.leases.keys().collect::<Vec<_>>(), ["q3"]);
    settle(&mut entry, &second, 1, &[("q1", true), ("q3", true)]);
    assert_eq!(entry.acks["q1"].message_id.as_deref(), Some("q1-0"));
}

#[test]
fn an_expired_entry_is_new_again() {
    let mut entry = acknowledged_once("q1");
    assert_eq!(entry.expires_at, 101);
    let late = attempt("a2", 101_001, &["q1"]);
    let Grant { attempt, acked, .. } = granted(claim(&mut entry, &late, 101_001));
    assert_eq!((attempt, acked.len()), (0, 0));
    assert_eq!(entry.attempts.len(), 1);
}

#[test]
fn a_filtered_attempt_is_recorded_without_leases() {
    let mut entry = Entry::new("k", &identity());
    let filtered = attempt("a1", 1_000, &[]);
    assert!(matches!(
        claim(&mut entry, &filtered, 1_000),
        Claimed::Granted(Grant { attempt: 0, .. })
    ));
    assert!(entry.leases.is_empty());
    assert_eq!(entry.verdict(0, 1_000), Some(Verdict::Filtered));
}
