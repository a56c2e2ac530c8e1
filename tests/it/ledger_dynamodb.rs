//! The DynamoDB ledger against moto, through the production code path (`ledger::open` and
//! `load_aws_config`): the conformance suite, the calls each step costs, two relays sharing a
//! table, and the answers to a missing table, a closed port and a throttled table.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use relay_core::cloud::Cloud;
use relay_core::ledger::{self, Claimed, DynamoDbLedger, Grant, Ledger, LedgerError, LedgerUrl};
use relay_testkit::dynamodb::create_ledger_table;
use relay_testkit::ledger::{
    T0, acked_at, attempt, claim, conformance, entry, fresh_identity, held,
    one_claim_granted_among, settle, try_claim,
};

use crate::common::{CountingProxy, dynamodb_answering, sdk, sdk_via, unique};

/// A new ledger table in moto; its `dynamodb://` URL.
async fn table() -> (String, LedgerUrl) {
    let name = unique("ledger");
    create_ledger_table(&sdk().await, &name).await;
    let url = format!("dynamodb://{name}").parse().unwrap();
    (name, url)
}

/// The ledger at `url`, as `relay trace` opens it: with no SDK configuration passed in, the store
/// loads the production one.
async fn opened(url: &LedgerUrl) -> Arc<dyn Ledger> {
    ledger::open(url, &Cloud::default())
        .await
        .expect("the ledger opens")
}

#[tokio::test]
async fn the_dynamodb_ledger_follows_the_rules() {
    let (_, url) = table().await;
    let ledger = opened(&url).await;
    conformance(ledger).await;
}

/// One notification retried ten thousand times: the item never nears DynamoDB's 400 KB limit,
/// and stays the size it had after the first few claims.
#[tokio::test]
async fn ten_thousand_retries_keep_the_item_bounded() {
    let (_, url) = table().await;
    let ledger = opened(&url).await;
    let n = 10_000;
    let (entry, early) = relay_testkit::ledger::retried_many_times(ledger.as_ref(), n).await;
    let size = serde_json::to_string(&entry).unwrap().len();
    assert!(
        size <= early,
        "{size} bytes after {n} claims, {early} after the first few"
    );
    assert!(entry.attempts.len() <= 2 * ledger::KEPT_ATTEMPTS);
    // Every claim is counted. A claim whose call was retried after the first try was
    // applied (a slow answer on a loaded machine) is counted twice: its attempt is recorded
    // once per call, which a DynamoDB UpdateItem cannot tell apart. Rare, and never fewer.
    let counted = entry.folded + entry.attempts.len();
    assert!(
        (n..=n + n / 100).contains(&counted),
        "{counted} attempts counted for {n} claims"
    );
}

#[tokio::test]
async fn a_claim_and_a_settlement_are_one_call_each_and_a_duplicate_one() {
    let (name, _) = table().await;
    let calls = CountingProxy::start().await;
    let ledger = DynamoDbLedger::new(&calls.sdk(Duration::from_secs(5)).await, &name)
        .await
        .unwrap();
    let id = fresh_identity();
    let t = T0;
    // The calls since the last count, by operation: `PutItem=1,UpdateItem=1`.
    let count = |proxy: &CountingProxy| {
        let mut counts = std::collections::BTreeMap::<String, usize>::new();
        for operation in proxy.take() {
            *counts.entry(operation).or_default() += 1;
        }
        (counts.iter())
            .map(|(op, n)| format!("{op}={n}"))
            .collect::<Vec<_>>()
            .join(",")
    };

    let first = attempt(t, &["q1", "q2"]);
    assert!(matches!(
        claim(&ledger, &id, &first).await,
        Claimed::Granted(Grant { attempt: 0, .. })
    ));
    assert_eq!(count(&calls), "UpdateItem=1", "a new notification's claim");
    settle(&ledger, &id, &first, 0, &[("q1", true), ("q2", true)]).await;
    assert_eq!(count(&calls), "UpdateItem=1", "its settlement");

    let again = attempt(t + 60_000, &["q1", "q2"]);
    let acked = acked_at(&ledger, &id, &again, 1).await;
    assert_eq!(acked.len(), 2);
    assert_eq!(count(&calls), "UpdateItem=1", "a duplicate");

    // A claim refused by a live lease: one call.
    let (other, holder) = held(&ledger, &["q1"]).await;
    calls.take();
    assert!(matches!(
        claim(&ledger, &other, &attempt(t + 1, &["q1"])).await,
        Claimed::Busy { .. }
    ));
    assert_eq!(count(&calls), "UpdateItem=1", "a claim that loses");

    // The rare paths: a settlement whose lease another attempt took over (two calls), and the
    // reset of an expired entry (the failed update, then one put).
    let takeover = attempt(t + 7_001, &["q1"]);
    claim(&ledger, &other, &takeover).await;
    calls.take();
    settle(&ledger, &other, &holder, 0, &[("q1", true)]).await;
    assert_eq!(count(&calls), "UpdateItem=2", "a late settlement");
    let entry_now = entry(&ledger, &other).await;
    assert_eq!(entry_now.leases["q1"].holder, takeover.id);
    assert_eq!(entry_now.acks["q1"].attempt, 0);
    calls.take();
    let late = attempt(t + 200_000, &["q1"]);
    assert!(matches!(
        claim(&ledger, &other, &late).await,
        Claimed::Granted(Grant { attempt: 0, .. })
    ));
    assert_eq!(
        count(&calls),
        "PutItem=1,UpdateItem=1",
        "the reset of an expired entry"
    );
}

#[tokio::test]
async fn the_edges_of_leases_and_expiry_are_those_of_the_rules() {
    let (_, url) = table().await;
    let ledger = opened(&url).await;
    let ledger = ledger.as_ref();
    let t = T0;
    // A lease is live up to its last millisecond (Entry::claim: until_ms >= now_ms).
    let id = fresh_identity();
    claim(ledger, &id, &attempt(t, &["q1"])).await;
    assert_eq!(
        claim(ledger, &id, &attempt(t + 7_000, &["q1"])).await,
        Claimed::Busy {
            until_ms: t + 7_000
        }
    );
    assert!(matches!(
        claim(ledger, &id, &attempt(t + 7_001, &["q1"])).await,
        Claimed::Granted(Grant { attempt: 1, .. })
    ));
    // An entry is live up to the last millisecond of its expiry second (expires_at * 1000 >=
    // now_ms), and new again one millisecond later.
    let (live, gone) = (fresh_identity(), fresh_identity());
    for id in [&live, &gone] {
        claim(ledger, id, &attempt(t, &[])).await;
    }
    let expiry_ms = (t / 1000 + 100) * 1000;
    assert!(matches!(
        claim(ledger, &live, &attempt(expiry_ms, &[])).await,
        Claimed::Granted(Grant { attempt: 1, .. })
    ));
    assert!(matches!(
        claim(ledger, &gone, &attempt(expiry_ms + 1, &[])).await,
        Claimed::Granted(Grant { attempt: 0, .. })
    ));
    // A settlement never recreates an entry that is gone.
    let missing = fresh_identity();
    settle(ledger, &missing, &attempt(t, &["q1"]), 0, &[("q1", true)]).await;
    let found = ledger
        .find(&relay_core::ledger::Lookup::Key {
            key: missing.dedup_key.clone(),
            bundle: Some(missing.bundle_uuid.clone()),
        })
        .await
        .unwrap();
    assert!(found.is_empty(), "{found:?}");
}

#[tokio::test]
async fn two_relays_sharing_a_table_grant_one_claim() {
    let (_, url) = table().await;
    let a = opened(&url).await;
    let b = opened(&url).await;
    one_claim_granted_among(a, b, 40).await;
}

#[tokio::test]
async fn a_missing_table_is_refused() {
    let url = format!("dynamodb://{}", unique("no-such-table"))
        .parse()
        .unwrap();
    let ledger = opened(&url).await;
    let error = try_claim(ledger.as_ref()).await.unwrap_err();
    assert!(matches!(error, LedgerError::Refused(_)), "{error:?}");
    assert!(
        format!("{error:?}").contains("ResourceNotFound"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_closed_port_is_unavailable() {
    let port = relay_testkit::free_port();
    let sdk = sdk_via(&format!("http://127.0.0.1:{port}"), Duration::from_secs(2)).await;
    let ledger = DynamoDbLedger::new(&sdk, "ledger").await.unwrap();
    let error = try_claim(&ledger).await.unwrap_err();
    assert!(matches!(error, LedgerError::Unavailable(_)), "{error:?}");
}

#[tokio::test]
async fn a_throttled_or_failing_table_is_unavailable() {
    for (status, error_type) in [
        (400, "ProvisionedThroughputExceededException"),
        (400, "RequestLimitExceeded"),
        (400, "ThrottlingException"),
        (500, "InternalServerError"),
    ] {
        let (endpoint, calls, server) = dynamodb_answering(status, error_type).await;
        let sdk = sdk_via(&endpoint, Duration::from_secs(5)).await;
        let ledger = DynamoDbLedger::new(&sdk, "ledger").await.unwrap();
        let error = try_claim(&ledger).await.unwrap_err();
        assert!(
            matches!(error, LedgerError::Unavailable(_)),
            "{status} {error_type}: {error:?}"
        );
        assert!(calls.load(Ordering::SeqCst) >= 1);
        server.abort();
    }
}
