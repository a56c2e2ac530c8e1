//! What every stored-routes backend must do, for the file store's tests and the S3 and Cloud
//! Storage ones on their emulators.

use std::process::Command;

use relay_core::live::store::{DEFAULT_MAX_BYTES, Fetched, Store, StoreError, WriteError};

/// On an empty store: missing; a create-only write; a second create refused; unchanged at the
/// version written; a swap; a stale swap refused; the swapped text read back; then
/// [`reads_stop_at_the_size_limit`] at the default limit, which `store` must have.
pub async fn reads_are_conditional_and_writes_compare_and_swap(store: &dyn Store) {
    reads_are_conditional(store).await;
    reads_stop_at_the_size_limit(store, DEFAULT_MAX_BYTES).await;
}

/// A document of `bytes` bytes: a TOML comment line, then `a = 1`.
fn document_of(bytes: usize) -> String {
    let tail = "\na = 1\n";
    let mut text = "#".repeat(bytes - tail.len());
    text.push_str(tail);
    text
}

/// On a store that refuses documents over `limit` bytes (and has a document): one of `limit`
/// bytes is read whole; one byte more is refused as too large, naming the store, and so is a
/// much larger one.
pub async fn reads_stop_at_the_size_limit(store: &dyn Store, limit: usize) {
    let current = match store.read(None).await.unwrap() {
        Fetched::Document { version, .. } => Some(version),
        _ => None,
    };
    let at_limit = document_of(limit);
    let version = store.write(current.as_ref(), &at_limit).await.unwrap();
    assert_eq!(
        store.read(None).await.unwrap(),
        Fetched::Document {
            text: at_limit,
            version: version.clone()
        }
    );
    let mut version = version;
    for size in [limit + 1, 3 * limit] {
        version = store
            .write(Some(&version), &document_of(size))
            .await
            .unwrap();
        match store.read(None).await {
            Err(e @ StoreError::TooLarge { .. }) => {
                let message = e.to_string();
                assert!(message.starts_with(&store.url()), "{message}");
                assert!(message.contains(&limit.to_string()), "{message}");
            }
            Ok(fetched) => panic!(
                "a document of {size} bytes over a limit of {limit} was read: {}",
                match fetched {
                    Fetched::Document { text, .. } => format!("{} bytes", text.len()),
                    other => format!("{other:?}"),
                }
            ),
            Err(e) => panic!("a document of {size} bytes over a limit of {limit}: {e}"),
        }
    }
}

async fn reads_are_conditional(store: &dyn Store) {
    assert_eq!(store.read(None).await.unwrap(), Fetched::Missing);
    let first = store.write(None, "a = 1\n").await.unwrap();
    assert!(matches!(
        store.write(None, "a = 2\n").await,
        Err(WriteError::Conflict)
    ));
    assert_eq!(store.read(Some(&first)).await.unwrap(), Fetched::Unchanged);
    let second = store.write(Some(&first), "a = 3\n").await.unwrap();
    assert_ne!(first, second);
    assert!(matches!(
        store.write(Some(&first), "a = 4\n").await,
        Err(WriteError::Conflict)
    ));
    assert_eq!(
        store.read(Some(&first)).await.unwrap(),
        Fetched::Document {
            text: "a = 3\n".into(),
            version: second
        }
    );
}

/// Runs the `relay` binary built next to the test with `args` and `--routes routes`, outside any
/// relay configuration.
pub fn relay_with_routes(routes: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(crate::built_binary("relay"))
        .args(args)
        .arg("--routes")
        .arg(routes)
        .env_remove("RELAY_CONFIG")
        .output()
        .unwrap()
}

/// [`relay_with_routes`], which must succeed; its standard output.
pub fn relay_with_routes_ok(routes: &std::path::Path, args: &[&str]) -> String {
    let out = relay_with_routes(routes, args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Two threads each run `relay split start` 50 times against the stored routes at `routes` (a
/// path or URL) with the `relay` binary built next to the test; all 100 splits are there after.
pub fn two_split_writers_lose_no_update(routes: &str) {
    const EACH: usize = 50;
    let routes = std::path::Path::new(routes);
    let relay = |args: &[&str]| relay_with_routes_ok(routes, args);
    std::thread::scope(|scope| {
        for writer in ["w1", "w2"] {
            scope.spawn(move || {
                for i in 0..EACH {
                    let name = format!("{writer}-{i}");
                    relay(&[
                        "split",
                        "start",
                        &name,
                        "--ttl",
                        "1h",
                        "--match",
                        r#"{"match":{"bundle_uuid":[{"prefix":"aa"}]}}"#,
                        "--file",
                        &format!("/tmp/{name}.jsonl"),
                    ]);
                }
            });
        }
    });
    let listed: serde_json::Value =
        serde_json::from_str(&relay(&["split", "list", "--json"])).unwrap();
    let mut names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    let mut expected: Vec<String> = (0..EACH)
        .flat_map(|i| [format!("w1-{i}"), format!("w2-{i}")])
        .collect();
    expected.sort_unstable();
    assert_eq!(names, expected);
}
