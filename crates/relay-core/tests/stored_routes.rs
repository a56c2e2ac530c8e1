//! The stored routes document as an untrusted input: only a regular file is read, never past
//! the size limit, never blocking the relay; writes go through an exclusively created temporary
//! file and a lock that is neither a symbolic link nor waited on forever; a read error is logged
//! once; a document with too many routes or splits is refused whole.
//!
//! Anything that blocked forever before runs under [`within`], so a regression fails the test
//! instead of hanging it.

use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use relay_core::Relay;
use relay_core::live::refresh::Refreshed;
use relay_core::live::store::{FileStore, Store, StoreError, WriteError};
use relay_core::live::{
    MAX_STORED_ROUTES, MAX_STORED_SINKS, MAX_STORED_SPLITS, RoutesError, check_document,
};

/// Runs `work` on a runtime of its own, for at most `limit`; `None` when it did not finish. The
/// runtime is left behind without waiting for its blocking threads, so a read stuck in one
/// cannot hang the test.
fn within<T: Send + 'static>(
    limit: Duration,
    work: impl Future<Output = T> + Send + 'static,
) -> Option<T> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let done = runtime.block_on(async { tokio::time::timeout(limit, work).await.ok() });
    runtime.shutdown_background();
    done
}

/// What one read of `store` gives within a second.
fn read_within_a_second(store: FileStore) -> Result<relay_core::live::Fetched, StoreError> {
    within(
        Duration::from_secs(1),
        async move { store.read(None).await },
    )
    .expect("the read returns within a second")
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// A relay configuration with a file sink in `dir` and the stored routes at `routes`.
fn relay_config(dir: &Path, routes: &Path) -> relay_core::Config {
    relay_testkit::config(&[
        ("RELAY_ALLOW_UNSIGNED", "true"),
        ("RELAY_FILE_SINK", dir.join("out.jsonl").to_str().unwrap()),
        ("RELAY_ROUTES_URL", routes.to_str().unwrap()),
    ])
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("routes.toml");
    mkfifo(&path);
    let error = read_within_a_second(FileStore::new(path.clone())).unwrap_err();
    assert!(matches!(error, StoreError::NotAFile { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.starts_with(path.to_str().unwrap()) && message.contains("a FIFO"),
        "{message}"
    );
}

#[test]
fn a_relay_starts_and_refreshes_with_a_fifo_as_its_stored_routes() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    mkfifo(&routes);
    let config = relay_config(dir.path(), &routes);
    let relay = within(Duration::from_secs(2), Relay::from_config(config))
        .expect("the relay starts within 2 s")
        .unwrap();
    // While it runs: a good document, then a FIFO in its place, then a good one again.
    std::fs::remove_file(&routes).unwrap();
    std::fs::write(&routes, "").unwrap();
    let relay = Arc::new(relay);
    let refresh = |relay: &Arc<Relay>| {
        let relay = Arc::clone(relay);
        within(Duration::from_secs(1), async move { relay.refresh().await })
            .expect("a refresh returns within a second")
            .unwrap()
    };
    assert!(matches!(refresh(&relay), Refreshed::Swapped(Some(_))));
    std::fs::remove_file(&routes).unwrap();
    mkfifo(&routes);
    match refresh(&relay) {
        Refreshed::Kept(problem) => assert!(problem.contains("a FIFO"), "{problem}"),
        other => panic!("{other:?}"),
    }
    std::fs::remove_file(&routes).unwrap();
    std::fs::write(&routes, "# again\n").unwrap();
    assert!(matches!(refresh(&relay), Refreshed::Swapped(Some(_))));
}

#[test]
fn the_relay_reads_within_its_configured_size_limit() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    std::fs::write(&routes, format!("{}\n", "#".repeat(2048))).unwrap();
    let mut config = relay_config(dir.path(), &routes);
    assert_eq!(config.routes_max_bytes, 4 << 20, "the default");
    config = relay_testkit::config(&[
        ("RELAY_ALLOW_UNSIGNED", "true"),
        (
            "RELAY_FILE_SINK",
            dir.path().join("out.jsonl").to_str().unwrap(),
        ),
        ("RELAY_ROUTES_URL", routes.to_str().unwrap()),
        ("RELAY_ROUTES_MAX_BYTES", "1024"),
    ]);
    let relay = within(Duration::from_secs(2), async move {
        let relay = Relay::from_config(config).await.unwrap();
        relay.refresh().await
    })
    .expect("the relay starts within 2 s");
    match relay {
        Some(Refreshed::Kept(problem)) => {
            assert!(problem.contains("larger than 1024 bytes"), "{problem}")
        }
        other => panic!("{other:?}"),
    }
}

/// The process's resident memory, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_symlink_to_dev_zero_is_refused_and_memory_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("routes.toml");
    std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
    let before = rss_kib();
    let error = read_within_a_second(FileStore::new(path)).unwrap_err();
    assert!(
        matches!(
            error,
            StoreError::NotAFile {
                kind: "a character device",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(rss_kib() < before + 64 * 1024, "memory grew while reading");
}

#[test]
fn a_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let error = read_within_a_second(FileStore::new(dir.path().to_owned())).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("a directory, not a regular file"),
        "{message}"
    );
}

#[test]
fn a_symlink_to_a_regular_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("real.toml");
    std::fs::write(&target, "# routes\n").unwrap();
    let path = dir.path().join("routes.toml");
    std::os::unix::fs::symlink(&target, &path).unwrap();
    assert!(matches!(
        read_within_a_second(FileStore::new(path)).unwrap(),
        relay_core::live::Fetched::Document { .. }
    ));
}

#[tokio::test]
async fn a_file_store_refuses_documents_over_its_size_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("routes.toml");
    std::fs::write(&path, "").unwrap();
    let store = FileStore::new(path).with_max_bytes(1024);
    relay_testkit::stores::reads_stop_at_the_size_limit(&store, 1024).await;
}

#[test]
fn a_huge_file_is_refused_without_being_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("routes.toml");
    // Sparse: 1 GiB of zeros that take no disk.
    std::fs::File::create(&path)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let before = rss_kib();
    let error = read_within_a_second(FileStore::new(path)).unwrap_err();
    assert!(matches!(error, StoreError::TooLarge { .. }), "{error:?}");
    assert!(rss_kib() < before + 64 * 1024, "memory grew while reading");
}

/// Bytes this process has read through `read` calls so far.
fn bytes_read() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap();
    let line = io.lines().find(|l| l.starts_with("rchar:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn an_unchanged_file_is_not_read_again() {
    const SIZE: usize = 4 << 20;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("routes.toml");
    std::fs::write(&path, format!("{}\n", "#".repeat(SIZE - 1))).unwrap();
    let store = FileStore::new(path.clone());
    let relay_core::live::Fetched::Document { version, .. } = store.read(None).await.unwrap()
    else {
        panic!("a document");
    };
    let before = bytes_read();
    for _ in 0..5 {
        assert_eq!(
            store.read(Some(&version)).await.unwrap(),
            relay_core::live::Fetched::Unchanged
        );
    }
    // Five reads of the file would be 20 MiB; other tests read little.
    let read = bytes_read() - before;
    assert!(
        read < SIZE as u64,
        "{read} bytes read for an unchanged file"
    );
    // A change of the same length is seen (another inode, or other times).
    std::fs::write(&path, format!("{}\n", "%".repeat(SIZE - 1))).unwrap();
    assert!(matches!(
        store.read(Some(&version)).await.unwrap(),
        relay_core::live::Fetched::Document { .. }
    ));
}

/// Log lines, as text, from the subscriber [`capture`] sets for the current thread.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Lines {
    fn count(&self, needle: &str) -> usize {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines().filter(|l| l.contains(needle)).count()
    }
}

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_read_error_is_logged_once_until_it_changes() {
    const LOGGED: &str = "Cannot read the stored routes";
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    std::fs::write(&routes, b"# \xff\xfe not UTF-8\n").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let relay = runtime
        .block_on(Relay::from_config(relay_config(dir.path(), &routes)))
        .unwrap();
    let refresh = || runtime.block_on(relay.refresh()).unwrap();
    for _ in 0..3 {
        match refresh() {
            Refreshed::Kept(problem) => assert!(problem.contains("not UTF-8"), "{problem}"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(lines.count(LOGGED), 1, "at start, then not again");
    // Another error is logged, once.
    std::fs::remove_file(&routes).unwrap();
    std::fs::create_dir(&routes).unwrap();
    refresh();
    refresh();
    assert_eq!(lines.count(LOGGED), 2);
    // A good read in between: the same error again is logged again.
    std::fs::remove_dir(&routes).unwrap();
    std::fs::write(&routes, "").unwrap();
    assert!(matches!(refresh(), Refreshed::Swapped(Some(_))));
    std::fs::write(&routes, b"\xff").unwrap();
    refresh();
    refresh();
    assert_eq!(lines.count(LOGGED), 3);
}

/// Every temporary file name an older writer used for `doc` in this process.
fn predictable_temporaries(doc: &Path) -> Vec<PathBuf> {
    let name = doc.file_name().unwrap().to_str().unwrap();
    vec![doc.with_file_name(format!("{name}.{}.tmp", std::process::id()))]
}

#[tokio::test]
async fn a_write_never_follows_a_planted_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("routes.toml");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    for planted in predictable_temporaries(&doc) {
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
    }
    let store = FileStore::new(doc.clone());
    let first = store.write(None, "a = 1\n").await.unwrap();
    store.write(Some(&first), "a = 2\n").await.unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let meta = std::fs::symlink_metadata(&doc).unwrap();
    assert!(meta.is_file(), "the document is a file of its own");
    assert_eq!(std::fs::read_to_string(&doc).unwrap(), "a = 2\n");
    for planted in predictable_temporaries(&doc) {
        assert!(std::fs::symlink_metadata(&planted).unwrap().is_symlink());
    }
    // Nothing else is left behind: the document, its lock, the victim and the planted links.
    let left = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(left, 3 + predictable_temporaries(&doc).len());
}

/// The store error of a write refused over its lock file, whose message names `lock` and says
/// `why`.
fn lock_error<T: std::fmt::Debug>(
    written: Result<T, WriteError>,
    lock: &Path,
    why: &str,
) -> StoreError {
    match written {
        Err(WriteError::Store(e)) => {
            let message = e.to_string();
            assert!(
                message.contains(lock.to_str().unwrap()) && message.contains(why),
                "{message}"
            );
            e
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_lock_file_that_is_a_symlink_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("routes.toml");
    let lock = dir.path().join("routes.toml.lock");
    let target = dir.path().join("created-by-the-writer");
    std::os::unix::fs::symlink(&target, &lock).unwrap();
    let store = FileStore::new(doc.clone());
    let written = store.write(None, "a = 1\n").await;
    let e = lock_error(written, &lock, "a symbolic link");
    assert!(matches!(e, StoreError::LockNotAFile { .. }), "{e:?}");
    assert!(!target.exists(), "the link's target was created");
    assert!(!doc.exists(), "the document was written");
}

#[test]
fn a_held_lock_is_given_up_after_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("routes.toml");
    let lock_path = dir.path().join("routes.toml.lock");
    let held = std::fs::File::create(&lock_path).unwrap();
    held.lock().unwrap();
    let store = FileStore::new(doc.clone()).with_lock_timeout(Duration::from_millis(300));
    let written = within(Duration::from_secs(5), async move {
        store.write(None, "a = 1\n").await
    })
    .expect("the writer gives up within 5 s");
    let e = lock_error(written, &lock_path, "gave up");
    assert!(matches!(e, StoreError::LockTimeout { .. }), "{e:?}");
    assert!(!doc.exists());
    drop(held);
}

/// A document with `sinks` file sinks (at least one), `routes` routes over them (each sink
/// used, when there are enough routes) and `splits` splits.
fn document(routes: usize, splits: usize, sinks: usize) -> String {
    let sinks = sinks.max(1);
    let mut text = String::new();
    for i in 0..sinks {
        text.push_str(&format!(
            "[sinks.out{i}]\ntype = \"file\"\npath = \"/tmp/out{i}.jsonl\"\n"
        ));
    }
    for i in 0..routes {
        text.push_str(&format!(
            "[[routes]]\nname = \"r{i}\"\nto = [\"out{}\"]\n",
            i % sinks
        ));
    }
    for i in 0..splits {
        text.push_str(&format!(
            "[[splits]]\nname = \"s{i}\"\nmatch = {{ event_type = [\"CREATE\"] }}\n\
             to = {{ type = \"file\", path = \"/tmp/s{i}.jsonl\" }}\n\
             registered_at = \"2026-01-01T00:00:00Z\"\nexpires_at = \"2026-01-01T01:00:00Z\"\n"
        ));
    }
    text
}

#[test]
fn a_document_with_too_many_routes_or_splits_is_refused_whole() {
    let deployed =
        relay_testkit::config(&[("RELAY_ALLOW_UNSIGNED", "true"), ("RELAY_FILE_SINK", "-")])
            .routes();
    let at_limit = document(MAX_STORED_ROUTES, MAX_STORED_SPLITS, MAX_STORED_SINKS);
    check_document(&at_limit, None).unwrap();
    check_document(&at_limit, Some(&deployed)).unwrap();
    for (text, what) in [
        (document(MAX_STORED_ROUTES + 1, 0, 0), "routes"),
        (document(1, MAX_STORED_SPLITS + 1, 0), "splits"),
        (document(1, 0, MAX_STORED_SINKS + 1), "sinks"),
    ] {
        for against in [None, Some(&deployed)] {
            match check_document(&text, against) {
                Err(RoutesError::TooMany { what: found, .. }) => assert_eq!(found, what),
                other => panic!("{what}: {:?}", other.map(|_| ())),
            }
        }
    }
}

#[test]
fn a_store_error_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("routes.toml");
    let mut file = std::fs::File::create(&path).unwrap();
    file.write_all(b"\xff").unwrap();
    let error = read_within_a_second(FileStore::new(path.clone())).unwrap_err();
    assert!(matches!(error, StoreError::NotText { .. }), "{error:?}");
    assert_eq!(error.url(), path.to_str().unwrap());
    assert!(error.to_string().starts_with(path.to_str().unwrap()));
}

/// A stored sink of `dir` whose transform is `program`, and a route of everything to it.
fn transformed_document(dir: &Path, program: &str) -> String {
    let out = dir.join("shaped.jsonl");
    format!(
        "[sinks.shaped]\ntype = \"file\"\npath = \"{}\"\ntransform = '{program}'\n\n\
         [[routes]]\nname = \"shaped\"\nmatch = {{}}\nto = [\"shaped\"]\n",
        out.display()
    )
}

#[test]
fn a_stored_transform_that_does_not_compile_keeps_the_last_good_routes() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    std::fs::write(
        &routes,
        transformed_document(dir.path(), "{event: .event_type}"),
    )
    .unwrap();
    let config = relay_config(dir.path(), &routes);
    let relay = within(Duration::from_secs(5), Relay::from_config(config))
        .expect("the relay starts")
        .unwrap();
    let relay = Arc::new(relay);
    let broken = transformed_document(dir.path(), "{event: .event_type");
    std::fs::write(&routes, broken).unwrap();
    let refreshed = {
        let relay = Arc::clone(&relay);
        within(Duration::from_secs(2), async move { relay.refresh().await })
            .unwrap()
            .unwrap()
    };
    match refreshed {
        Refreshed::Kept(problem) => assert!(
            problem.contains("transform: line 1, column 20"),
            "{problem}"
        ),
        other => panic!("{other:?}"),
    }
    // The last good transform still shapes what arrives.
    let request = http::Request::post("/")
        .header("content-type", "application/json")
        .body(bytes::Bytes::from(relay_testkit::v2("CREATE")))
        .unwrap();
    let outcome = within(Duration::from_secs(5), async move {
        relay.accept(request).await
    })
    .unwrap();
    let body = String::from_utf8_lossy(&outcome.body).into_owned();
    assert_eq!(outcome.status, http::StatusCode::ACCEPTED, "{body}");
    let written = std::fs::read_to_string(dir.path().join("shaped.jsonl")).expect(&body);
    assert!(written.contains(r#"{\"event\":\"CREATE\"}"#), "{written}");
}
