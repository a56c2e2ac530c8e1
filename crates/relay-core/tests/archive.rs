//! The archive's folder store against the conformance suite every store passes
//! (`relay_testkit::archive`); S3 and Cloud Storage run it against their emulators in
//! tests/it/archive.rs.

use std::sync::Arc;

use relay_core::archive::{Archive, DirArchive};

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

/// Another record, an unsealed or forged copy, bytes that are no record, a folder, a dangling
/// link or a link to another record at a notification's key: the relay writes its own record
/// beside it and never counts what it found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_object_never_counts_as_a_record_in_a_folder() {
    use relay_testkit::archive::{a_planted_object_is_not_a_record, planted_objects_never_count};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("archive");
    let archive: Arc<dyn Archive> = Arc::new(DirArchive::open(&root).unwrap());
    planted_objects_never_count(&archive).await;

    let root = &std::fs::canonicalize(&root).unwrap();
    let at = |key: &str| {
        let path = root.join(key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        path
    };
    a_planted_object_is_not_a_record(&archive, "a folder", |key| async move {
        std::fs::create_dir(at(&key)).unwrap();
    })
    .await;
    a_planted_object_is_not_a_record(&archive, "a dangling link", |key| async move {
        std::os::unix::fs::symlink(root.join("nowhere"), at(&key)).unwrap();
    })
    .await;
    let other = relay_testkit::archive::fresh_record("other", "{\"other\": 1}");
    let elsewhere = &relay_testkit::archive::write(&archive, &other)
        .await
        .unwrap();
    a_planted_object_is_not_a_record(&archive, "a link to another record", |key| async move {
        std::os::unix::fs::symlink(root.join(elsewhere), at(&key)).unwrap();
    })
    .await;
}
