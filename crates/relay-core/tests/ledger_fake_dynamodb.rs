//! The DynamoDB ledger against relay-testkit's loopback DynamoDB-protocol endpoint: the ledger
//! conformance suite, the calls each step costs, and a throttled or unavailable table.

#![cfg(feature = "dynamodb")]

use std::sync::Arc;

use relay_core::ledger::{Claimed, DynamoDbLedger, Grant, Ledger, LedgerError};
use relay_testkit::fake_dynamodb::FakeDynamoDb;
use relay_testkit::ledger::{attempt, claim, conformance, fresh_identity, settle};

async fn ledger() -> (FakeDynamoDb, DynamoDbLedger) {
    let fake = FakeDynamoDb::start().await;
    let ledger = DynamoDbLedger::new(&fake.sdk_config(), "relay-ledger")
        .await
        .unwrap();
    (fake, ledger)
}

#[tokio::test]
async fn the_dynamodb_ledger_conforms_against_the_fake_endpoint() {
    let (fake, ledger) = ledger().await;
    conformance(Arc::new(ledger)).await;
    assert!(fake.calls().of("UpdateItem") > 0);
    assert!(
        fake.calls().of("Query") >= 2,
        "bundles are found by a query"
    );
}

#[tokio::test]
async fn a_new_notification_costs_two_calls_and_a_duplicate_one() {
    let (fake, ledger) = ledger().await;
    let id = fresh_identity();
    let t = 1_800_000_000_000;
    let first = attempt(t, &["q1", "q2"]);
    let before = fake.calls();
    claim(&ledger, &id, &first).await;
    settle(&ledger, &id, &first, 0, &[("q1", true), ("q2", true)]).await;
    let new = fake.calls().since(&before);
    assert_eq!((new.of("UpdateItem"), new.total()), (2, 2), "{new:?}");

    let before = fake.calls();
    let again = attempt(t + 60_000, &["q1", "q2"]);
    let Claimed::Granted(Grant { acked, .. }) = claim(&ledger, &id, &again).await else {
        panic!("the duplicate is granted")
    };
    assert_eq!(acked.len(), 2, "every destination had acknowledged");
    let duplicate = fake.calls().since(&before);
    assert_eq!(duplicate.total(), 1, "{duplicate:?}");
}

#[tokio::test]
async fn a_throttled_or_unavailable_table_is_unavailable() {
    let (fake, ledger) = ledger().await;
    let id = fresh_identity();
    let first = attempt(1_800_000_000_000, &["q1"]);
    let claim_of = |attempt| relay_core::ledger::Claim {
        key: &id.dedup_key,
        identity: &id,
        attempt,
        lease_until_ms: 1_800_000_007_000,
        expires_at: 1_800_000_100,
    };
    for switch in [FakeDynamoDb::set_throttled, FakeDynamoDb::set_unavailable] {
        switch(&fake, true);
        let before = fake.calls();
        let answer = ledger.claim(&claim_of(&first), 1_800_000_000_000).await;
        assert!(
            matches!(answer, Err(LedgerError::Unavailable(_))),
            "{answer:?}"
        );
        // Tried three times, as the AWS clients' standard retry does.
        assert_eq!(fake.calls().since(&before).of("UpdateItem"), 3);
        switch(&fake, false);
    }
    assert!(fake.is_empty(), "nothing was written");
    let answer = ledger.claim(&claim_of(&first), 1_800_000_000_000).await;
    assert!(matches!(
        answer,
        Ok(Claimed::Granted(Grant { attempt: 0, .. }))
    ));
}
