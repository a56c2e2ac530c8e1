//! The embedded ledger (an SQLite file) against the conformance suite, and shared by two
//! processes' worth of connections.

#![cfg(feature = "sqlite")]

use std::sync::Arc;

use relay_core::ledger::{Ledger, SqliteLedger};
use relay_testkit::ledger::{conformance, one_claim_granted_among};

#[tokio::test]
async fn the_embedded_ledger_follows_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = SqliteLedger::open(&dir.path().join("ledger.db")).unwrap();
    conformance(Arc::new(ledger)).await;
}

#[tokio::test]
async fn two_connections_to_one_file_grant_one_claim() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let a: Arc<dyn Ledger> = Arc::new(SqliteLedger::open(&path).unwrap());
    let b: Arc<dyn Ledger> = Arc::new(SqliteLedger::open(&path).unwrap());
    one_claim_granted_among(a, b, 40).await;
}

/// A connection keeps the entries it claimed for their settlement; another connection's write
/// in between is read, not overwritten: here the other connection settles one destination,
/// then the claiming one the other, and the entry holds both.
#[tokio::test]
async fn a_settlement_reads_what_another_connection_wrote_since_the_claim() {
    use relay_testkit::ledger::{attempt, claim, entry, fresh_identity, settle};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let a = SqliteLedger::open(&path).unwrap();
    let b = SqliteLedger::open(&path).unwrap();
    let id = fresh_identity();
    let first = attempt(1_800_000_000_000, &["q1", "q2"]);
    assert!(matches!(
        claim(&a, &id, &first).await,
        relay_core::ledger::Claimed::Granted(relay_core::ledger::Grant { attempt: 0, .. })
    ));
    settle(&b, &id, &first, 0, &[("q1", true)]).await;
    settle(&a, &id, &first, 0, &[("q2", true)]).await;
    let acked: Vec<String> = entry(&a, &id).await.acks.into_keys().collect();
    assert_eq!(acked, ["q1", "q2"]);
}
