//! The ledger conformance suite: the same claims and settlements against any store, so that
//! the embedded file, DynamoDB and Firestore give the same answers ([`conformance`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use relay_core::ledger::{
    Ack, Attempt, Claim, Claimed, Delivery, Entry, Grant, HeldAttempt, Identity, KEPT_ATTEMPTS,
    Ledger, LedgerError, Lookup, Settlement, Verdict, attempt_id,
};

/// A clock the test moves: the relay's, the signer's and the ledger's time.
#[derive(Debug)]
pub struct ManualClock(std::sync::Mutex<std::time::SystemTime>);

impl ManualClock {
    /// A clock at `at`.
    pub fn at(at: std::time::SystemTime) -> Arc<Self> {
        Arc::new(Self(std::sync::Mutex::new(at)))
    }

    /// Sets the time.
    pub fn set(&self, at: std::time::SystemTime) {
        *self.0.lock().expect("not poisoned") = at;
    }
}

impl relay_core::verify::Clock for ManualClock {
    fn now(&self) -> std::time::SystemTime {
        *self.0.lock().expect("not poisoned")
    }
}

/// A notification identity with a fresh random key and bundle, so runs never collide in a
/// shared store.
pub fn fresh_identity() -> Identity {
    Identity {
        dedup_key: format!(
            "{}{}{}{}",
            attempt_id(),
            attempt_id(),
            attempt_id(),
            attempt_id()
        ),
        subscription_id: "sub-1".into(),
        bundle_uuid: format!("bundle-{}", attempt_id()),
        bundle_version: "2026-12-01T000000.000000Z".into(),
        event_type: Some("CREATE".into()),
    }
}

/// The time of the conformance checks' first attempts (2027-01-15).
pub const T0: i64 = 1_800_000_000_000;

/// An attempt at `at_ms` routed to `routed`.
pub fn attempt(at_ms: i64, routed: &[&str]) -> Attempt {
    Attempt {
        id: attempt_id(),
        at_ms,
        routes_version: Some("v1".into()),
        split: None,
        routed: routed.iter().map(|d| (*d).to_owned()).collect(),
        outcome: None,
    }
}

/// Claims `attempt` for `identity` at its own time, with a 7 s lease and a 100 s retention.
pub async fn claim(ledger: &dyn Ledger, identity: &Identity, attempt: &Attempt) -> Claimed {
    claim_or_error(ledger, identity, attempt)
        .await
        .expect("the ledger answers")
}

/// [`claim`], which must be granted at `index`: the acknowledgements it found among the routed
/// destinations.
pub async fn acked_at(
    ledger: &dyn Ledger,
    identity: &Identity,
    attempt: &Attempt,
    index: usize,
) -> BTreeMap<String, Ack> {
    match claim(ledger, identity, attempt).await {
        Claimed::Granted(Grant { attempt, acked, .. }) if attempt == index => acked,
        other => panic!("a claim granted at {index}, not {other:?}"),
    }
}

/// [`claim`], keeping the ledger's error.
pub async fn claim_or_error(
    ledger: &dyn Ledger,
    identity: &Identity,
    attempt: &Attempt,
) -> Result<Claimed, LedgerError> {
    let claim = Claim {
        key: &identity.dedup_key,
        identity,
        attempt,
        lease_until_ms: attempt.at_ms + 7_000,
        expires_at: attempt.at_ms / 1000 + 100,
    };
    ledger.claim(&claim, attempt.at_ms).await
}

/// One claim of a new notification against `ledger`, keeping its error: for stores that are
/// down, throttled or refusing.
pub async fn try_claim(ledger: &dyn Ledger) -> Result<Claimed, LedgerError> {
    let id = fresh_identity();
    claim_or_error(ledger, &id, &attempt(T0, &["q1"])).await
}

/// Settles `attempt` (claimed at `index`): each destination acknowledged (`true`, message id
/// `<destination>-<index>`) or failed.
pub async fn settle(
    ledger: &dyn Ledger,
    identity: &Identity,
    attempt: &Attempt,
    index: usize,
    results: &[(&str, bool)],
) {
    settle_folded(ledger, identity, attempt, (index, 0), results).await;
}

/// A new notification whose first attempt, at [`T0`] and routed to `routed`, was claimed (and
/// holds its leases): its identity and that attempt.
pub async fn held(ledger: &dyn Ledger, routed: &[&str]) -> (Identity, Attempt) {
    let (id, first) = (fresh_identity(), attempt(T0, routed));
    claim(ledger, &id, &first).await;
    (id, first)
}

/// A new notification whose first attempt, at [`T0`], was claimed and then acknowledged by
/// `sink`: its identity and that attempt.
pub async fn delivered_once(ledger: &dyn Ledger, sink: &str) -> (Identity, Attempt) {
    let (id, first) = held(ledger, &[sink]).await;
    settle(ledger, &id, &first, 0, &[(sink, true)]).await;
    (id, first)
}

/// The grant of a claim that must have been granted; panics on a busy one.
pub fn granted(claimed: Claimed) -> Grant {
    match claimed {
        Claimed::Granted(grant) => grant,
        Claimed::Busy { .. } => panic!("the claim is granted, not {claimed:?}"),
    }
}

/// What an attempt at `index` did: each destination with `true` acknowledged it (message id
/// `{destination}-{index}`), each with `false` failed, retryably.
pub fn deliveries(index: usize, results: &[(&str, bool)]) -> BTreeMap<String, Delivery> {
    let delivery = |d: &str, ok| match ok {
        true => Delivery::Acknowledged {
            message_id: Some(format!("{d}-{index}")),
            carried_from: None,
        },
        false => Delivery::Failed {
            retryable: true,
            error: "unavailable".into(),
        },
    };
    (results.iter())
        .map(|&(d, ok)| (d.to_owned(), delivery(d, ok)))
        .collect()
}

/// [`settle`] for an attempt claimed at `index` of an entry that had folded `folded` attempts.
pub async fn settle_folded(
    ledger: &dyn Ledger,
    identity: &Identity,
    attempt: &Attempt,
    (index, folded): (usize, usize),
    results: &[(&str, bool)],
) {
    let results = deliveries(index, results);
    let held = HeldAttempt {
        key: identity.dedup_key.clone(),
        bundle: identity.bundle_uuid.clone(),
        holder: attempt.id.clone(),
        attempt: index,
        folded,
    };
    let settlement = Settlement {
        held: &held,
        results: &results,
        now_ms: attempt.at_ms + 50,
        expires_at: attempt.at_ms / 1000 + 100,
    };
    ledger
        .settle(&settlement)
        .await
        .expect("the ledger answers");
}

/// The one entry of `identity`.
pub async fn entry(ledger: &dyn Ledger, identity: &Identity) -> Entry {
    let mut found = ledger
        .find(&Lookup::Key {
            key: identity.dedup_key.clone(),
            bundle: Some(identity.bundle_uuid.clone()),
        })
        .await
        .expect("the ledger answers");
    assert_eq!(found.len(), 1, "one entry per key");
    found.remove(0)
}

/// Runs every case against `ledger`; panics on the first difference from the entry's rules.
pub async fn conformance(ledger: Arc<dyn Ledger>) {
    let ledger = ledger.as_ref();
    retries_publish_only_what_is_missing(ledger).await;
    a_live_lease_refuses_others_until_it_expires(ledger).await;
    concurrent_claims_grant_one(ledger).await;
    an_expired_entry_is_new_again(ledger).await;
    bundles_are_found_by_lookup(ledger).await;
    other_acknowledgements_come_back(ledger).await;
    many_retries_keep_a_bounded_entry(ledger).await;
}

/// Two handles on one store (two relays' connections), `n` claims of one new notification at
/// once, alternating between them: exactly one is granted, and the entry holds one attempt.
pub async fn one_claim_granted_among(a: Arc<dyn Ledger>, b: Arc<dyn Ledger>, n: usize) {
    let id = fresh_identity();
    let t = T0;
    let attempts: Vec<Attempt> = (0..n as i64)
        .map(|i| attempt(t + i, &["q1", "q2"]))
        .collect();
    let claims = attempts.iter().enumerate().map(|(i, at)| {
        let ledger = match i % 2 {
            0 => Arc::clone(&a),
            _ => Arc::clone(&b),
        };
        let id = id.clone();
        async move { claim(ledger.as_ref(), &id, at).await }
    });
    let answers = futures_util::future::join_all(claims).await;
    assert_one_granted(&answers);
    assert_eq!(entry(a.as_ref(), &id).await.attempts.len(), 1);
}

async fn retries_publish_only_what_is_missing(ledger: &dyn Ledger) {
    let id = fresh_identity();
    let t = T0;
    let first = attempt(t, &["q1", "q2"]);
    assert_eq!(
        claim(ledger, &id, &first).await,
        Claimed::Granted(Grant {
            attempt: 0,
            acked: BTreeMap::new(),
            others: BTreeMap::new(),
            since_ms: t,
            folded: 0,
        })
    );
    settle(ledger, &id, &first, 0, &[("q1", true), ("q2", false)]).await;

    let second = attempt(t + 60_000, &["q1", "q2"]);
    let Grant {
        attempt: index,
        acked,
        others,
        since_ms,
        ..
    } = granted(claim(ledger, &id, &second).await);
    assert_eq!(index, 1, "the retry is the entry's second attempt");
    assert_eq!(
        since_ms, t,
        "the notification has waited since its first attempt"
    );
    assert_eq!(acked.keys().collect::<Vec<_>>(), ["q1"]);
    assert_eq!(acked["q1"].message_id.as_deref(), Some("q1-0"));
    assert!(
        others.is_empty(),
        "every acknowledgement is a routed one: {others:?}"
    );
    settle(ledger, &id, &second, 1, &[("q2", true)]).await;

    let third = attempt(t + 120_000, &["q1", "q2"]);
    let acked = acked_at(ledger, &id, &third, 2).await;
    assert_eq!(acked.len(), 2, "every destination had acknowledged");
    assert_eq!(acked["q2"].message_id.as_deref(), Some("q2-1"));

    let entry = entry(ledger, &id).await;
    assert_eq!(entry.identity, id);
    assert_eq!(entry.attempts.len(), 3);
    assert_eq!(entry.attempts[0].routes_version.as_deref(), Some("v1"));
    let now = t + 120_000;
    let verdicts: Vec<_> = (0..3).map(|i| entry.verdict(i, now)).collect();
    assert_eq!(
        verdicts,
        [
            Some(Verdict::Failed),
            Some(Verdict::Published),
            Some(Verdict::Duplicate)
        ]
    );
    assert_eq!(entry.duplicates(now), 1);
    assert!(
        entry.expires_at >= (t + 120_000) / 1000 + 100,
        "kept for the retention after the last attempt"
    );
}

async fn a_live_lease_refuses_others_until_it_expires(ledger: &dyn Ledger) {
    let id = fresh_identity();
    let t = T0;
    let first = attempt(t, &["q1"]);
    assert!(matches!(
        claim(ledger, &id, &first).await,
        Claimed::Granted(Grant { attempt: 0, .. })
    ));
    let second = attempt(t + 1_000, &["q1"]);
    assert_eq!(
        claim(ledger, &id, &second).await,
        Claimed::Busy {
            until_ms: t + 7_000
        }
    );
    assert_eq!(
        entry(ledger, &id).await.attempts.len(),
        1,
        "a refused claim writes nothing"
    );
    // The holder died: past its lease the next attempt takes over.
    let third = attempt(t + 7_001, &["q1"]);
    assert!(matches!(
        claim(ledger, &id, &third).await,
        Claimed::Granted(Grant { attempt: 1, .. })
    ));
    // The first attempt settles late: its acknowledgement stays, the new holder's lease too.
    settle(ledger, &id, &first, 0, &[("q1", true)]).await;
    let entry = entry(ledger, &id).await;
    assert_eq!(entry.acks["q1"].attempt, 0);
    assert_eq!(entry.leases["q1"].holder, third.id);
    assert_eq!(entry.verdict(1, t + 8_000), Some(Verdict::InProgress));
}

/// Asserts that one of concurrent `answers` is granted: one attempt publishes.
fn assert_one_granted(answers: &[Claimed]) {
    let granted = (answers.iter()).filter(|c| matches!(c, Claimed::Granted(_)));
    let n = answers.len();
    assert_eq!(
        granted.count(),
        1,
        "one of {n} concurrent claims: {answers:?}"
    );
}

async fn concurrent_claims_grant_one(ledger: &dyn Ledger) {
    let id = fresh_identity();
    let t = T0;
    let attempts: Vec<Attempt> = (0..20).map(|i| attempt(t + i, &["q1", "q2"])).collect();
    let claims = attempts.iter().map(|a| claim(ledger, &id, a));
    let answers = futures_util::future::join_all(claims).await;
    assert_one_granted(&answers);
    assert_eq!(entry(ledger, &id).await.attempts.len(), 1);
}

async fn an_expired_entry_is_new_again(ledger: &dyn Ledger) {
    let (id, _) = delivered_once(ledger, "q1").await;
    let t = T0;
    // Past the 100 s retention, whether or not the store has deleted it yet.
    let late = attempt(t + 101_000, &["q1"]);
    assert_eq!(
        claim(ledger, &id, &late).await,
        Claimed::Granted(Grant {
            attempt: 0,
            acked: BTreeMap::new(),
            others: BTreeMap::new(),
            since_ms: t + 101_000,
            folded: 0,
        })
    );
    assert_eq!(entry(ledger, &id).await.attempts, [late]);
}

/// An entry retried far more often than it keeps attempts: every claim gets its own index and
/// the first arrival, every settlement lands, and the entry keeps at most twice
/// [`KEPT_ATTEMPTS`] attempts, the rest counted as folded.
async fn many_retries_keep_a_bounded_entry(ledger: &dyn Ledger) {
    let id = fresh_identity();
    let t = T0;
    let n = 3 * KEPT_ATTEMPTS + 5;
    for i in 0..n {
        let retry = attempt(t + i as i64 * 1000, &["q1"]);
        let grant = granted(claim(ledger, &id, &retry).await);
        assert_eq!((grant.attempt, grant.since_ms), (i, t), "retry {i}");
        let at = (grant.attempt, grant.folded);
        settle_folded(ledger, &id, &retry, at, &[("q1", i == n - 1)]).await;
    }
    let entry = entry(ledger, &id).await;
    assert!(
        entry.attempts.len() <= 2 * KEPT_ATTEMPTS,
        "{} attempts kept",
        entry.attempts.len()
    );
    assert_eq!(entry.folded + entry.attempts.len(), n);
    assert_eq!(entry.first_at_ms(), Some(t));
    assert_eq!(entry.acks["q1"].attempt, n - 1);
    let now = t + n as i64 * 1000;
    assert_eq!(entry.verdict(n - 1, now), Some(Verdict::Published));
    assert_eq!(entry.verdict(n - 2, now), Some(Verdict::Failed));
    assert_eq!(entry.verdict(0, now), None, "folded away");
}

/// A claim gives back the acknowledgements of destinations it was not routed to (an earlier
/// release's names for them among them), and leases the routed one all the same.
async fn other_acknowledgements_come_back(ledger: &dyn Ledger) {
    let (id, _) = delivered_once(ledger, "sqs:orders").await;
    let t = T0;
    let resource = "arn:aws:sqs:us-east-1:111111111111:orders";
    let second = attempt(t + 60_000, &[resource]);
    let Grant {
        attempt: index,
        acked,
        others,
        ..
    } = granted(claim(ledger, &id, &second).await);
    assert_eq!(index, 1, "the retry is the entry's second attempt");
    assert!(acked.is_empty(), "{acked:?}");
    assert_eq!(others.keys().collect::<Vec<_>>(), ["sqs:orders"]);
    assert_eq!(
        others["sqs:orders"].message_id.as_deref(),
        Some("sqs:orders-0")
    );
    let held = entry(ledger, &id).await;
    assert!(held.leases.contains_key(resource), "{:?}", held.leases);
}

async fn bundles_are_found_by_lookup(ledger: &dyn Ledger) {
    let create = fresh_identity();
    let tombstone = Identity {
        dedup_key: fresh_identity().dedup_key,
        event_type: Some("TOMBSTONE".into()),
        ..create.clone()
    };
    let other = fresh_identity();
    let t = T0;
    for id in [&create, &tombstone, &other] {
        let filtered = attempt(t, &[]);
        assert!(matches!(
            claim(ledger, id, &filtered).await,
            Claimed::Granted(Grant { attempt: 0, .. })
        ));
    }
    let found = ledger
        .find(&Lookup::Bundle(create.bundle_uuid.clone()))
        .await
        .expect("the ledger answers");
    let mut keys: Vec<&str> = found.iter().map(|e| e.key.as_str()).collect();
    keys.sort_unstable();
    let mut expected = [create.dedup_key.as_str(), tombstone.dedup_key.as_str()];
    expected.sort_unstable();
    assert_eq!(keys, expected);
    assert!(
        found
            .iter()
            .all(|e| e.verdict(0, t) == Some(Verdict::Filtered))
    );
    let none = ledger
        .find(&Lookup::Bundle("no-such-bundle".into()))
        .await
        .expect("the ledger answers");
    assert!(none.is_empty());
}

/// One notification claimed `n` times, its one destination acknowledged by the first attempt
/// (every retry a duplicate, as a capture resent again and again would be): its entry after the
/// last claim, and the largest size (as JSON) the entry had over the first
/// `3 * KEPT_ATTEMPTS` claims.
pub async fn retried_many_times(ledger: &dyn Ledger, n: usize) -> (Entry, usize) {
    let id = fresh_identity();
    let t = T0;
    let mut early = 0;
    for i in 0..n {
        let retry = attempt(t + i as i64, &["q1"]);
        let claimed = claim(ledger, &id, &retry).await;
        assert!(
            matches!(claimed, Claimed::Granted(_)),
            "retry {i}: {claimed:?}"
        );
        if i == 0 {
            settle(ledger, &id, &retry, 0, &[("q1", true)]).await;
        }
        if i < 3 * KEPT_ATTEMPTS {
            let size = serde_json::to_string(&entry(ledger, &id).await)
                .unwrap()
                .len();
            early = early.max(size);
        }
    }
    (entry(ledger, &id).await, early)
}
