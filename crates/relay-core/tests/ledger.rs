//! The embedded ledger (an SQLite file) against the conformance suite, and shared by two
//! processes' worth of connections.

#![cfg(feature = "sqlite")]

use std::sync::Arc;

use relay_core::ledger::{Claimed, Ledger, SqliteLedger};
use relay_testkit::ledger::{attempt, claim, conformance, fresh_identity};

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
    let id = fresh_identity();
    let t = 1_800_000_000_000;
    let attempts: Vec<_> = (0..40).map(|i| attempt(t + i, &["q1"])).collect();
    let claims = attempts.iter().enumerate().map(|(i, at)| {
        let ledger = match i % 2 {
            0 => Arc::clone(&a),
            _ => Arc::clone(&b),
        };
        let id = id.clone();
        async move { claim(ledger.as_ref(), &id, at).await }
    });
    let answers = futures_util::future::join_all(claims).await;
    let granted = answers
        .iter()
        .filter(|c| matches!(c, Claimed::Granted { .. }))
        .count();
    assert_eq!(granted, 1);
}
