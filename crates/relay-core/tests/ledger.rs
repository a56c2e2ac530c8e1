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
