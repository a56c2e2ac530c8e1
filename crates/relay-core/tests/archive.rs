//! The archive's folder store against the conformance suite every store passes
//! (`relay_testkit::archive`); S3 and Cloud Storage run it against their emulators in
//! tests/it/archive.rs.

use relay_core::archive::DirArchive;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_passes_the_archive_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let archive = DirArchive::open(&dir.path().join("archive")).unwrap();
    relay_testkit::archive::conformance(&archive).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_lists_more_than_a_page_of_keys() {
    let dir = tempfile::tempdir().unwrap();
    let archive = DirArchive::open(dir.path()).unwrap();
    relay_testkit::archive::lists_past_one_page(&archive, 1001).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn folders_one_inside_the_other_keep_their_records_apart() {
    let dir = tempfile::tempdir().unwrap();
    let root = DirArchive::open(dir.path()).unwrap();
    let inner = DirArchive::open(&dir.path().join("notifications")).unwrap();
    relay_testkit::archive::prefixes_are_apart(&inner, &root).await;
}
