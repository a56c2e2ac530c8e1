//! One notification retried ten thousand times (one valid capture is enough to do it): the
//! embedded ledger keeps a bounded entry, so the last claim reads and writes what an early one
//! did. The DynamoDB store is held to the same on moto (tests/it/ledger_dynamodb.rs).

#![cfg(feature = "sqlite")]

use relay_core::ledger::{KEPT_ATTEMPTS, SqliteLedger, Verdict};
use relay_testkit::ledger::retried_many_times;

#[tokio::test]
async fn ten_thousand_retries_leave_an_entry_no_larger_than_the_first_few() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = SqliteLedger::open(&dir.path().join("ledger.db")).unwrap();
    let n = 10_000;
    let (entry, early) = retried_many_times(&ledger, n).await;
    let size = serde_json::to_string(&entry).unwrap().len();
    assert!(
        size <= early,
        "{size} bytes after {n} claims, {early} after the first few"
    );
    assert!(size <= 64 * 1024, "{size} bytes");
    assert!(entry.attempts.len() <= 2 * KEPT_ATTEMPTS);
    assert_eq!(entry.folded + entry.attempts.len(), n);
    let now = entry.attempts.last().unwrap().at_ms;
    assert_eq!(entry.verdict(n - 1, now), Some(Verdict::Duplicate));
}
