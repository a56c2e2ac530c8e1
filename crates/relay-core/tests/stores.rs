//! The stored routes in a local file: the store contract every backend meets.

use relay_core::live::store::FileStore;

#[tokio::test]
async fn file_reads_are_conditional_and_writes_compare_and_swap() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("routes.toml"));
    relay_testkit::stores::reads_are_conditional_and_writes_compare_and_swap(&store).await;
}
