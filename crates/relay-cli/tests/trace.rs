//! `relay trace` against the ledger a running relay records in: attempts, routes version,
//! split, message ids and duplicates, as a table and as JSON.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use relay_core::{Config, Relay};

use common::{assert_fails, output, relay_cmd, succeeded, text};

const SECRET: &str = "a-trace-secret";
const BUNDLE: &str = "c86309f6-e5b7-4698-abb6-b81644573bff";

fn example() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/notifications/v2-create.json")
}

/// A relay built as in production from `vars`, serving on a free loopback port.
async fn start(vars: Vec<(&'static str, String)>) -> String {
    let config = Config::from_vars(|n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone()))
        .expect("a valid configuration");
    let relay = Arc::new(Relay::from_config(config).await.expect("the relay starts"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, relay_gcf::app(relay)).await });
    url
}

async fn send(url: &str) -> String {
    let mut cmd = relay_cmd();
    cmd.args(["send", example().to_str().unwrap(), "--url", url])
        .args(["--key-id", "dev"])
        .env("RELAY_SEND_SECRET", SECRET);
    text(&output(cmd).await.stdout)
}

#[tokio::test]
async fn trace_shows_attempts_routes_version_split_message_ids_and_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.db");
    let routes = dir.path().join("routes.toml");
    let split_sink = dir.path().join("alice.jsonl");
    let now = SystemTime::now();
    let stamp = |t: SystemTime| humantime::format_rfc3339_seconds(t).to_string();
    std::fs::write(
        &routes,
        format!(
            "[[splits]]\nname = \"alice\"\nmatch = {{ match = {{ bundle_uuid = [{{ prefix = \"c8\" }}] }} }}\n\
             to = {{ type = \"file\", path = \"{}\" }}\nregistered_at = \"{}\"\nexpires_at = \"{}\"\n",
            split_sink.display(),
            stamp(now - Duration::from_secs(60)),
            stamp(now + Duration::from_secs(3600)),
        ),
    )
    .unwrap();
    let url = start(vec![
        ("RELAY_HMAC_KEYS", format!(r#"{{"dev": "{SECRET}"}}"#)),
        (
            "RELAY_FILE_SINK",
            dir.path().join("sink.jsonl").display().to_string(),
        ),
        ("RELAY_ROUTES_URL", routes.display().to_string()),
        ("RELAY_LEDGER_URL", ledger.display().to_string()),
    ])
    .await;
    let first = send(&url).await;
    assert!(first.contains(r#""status":"published""#), "{first}");
    for _ in 0..2 {
        let again = send(&url).await;
        assert!(again.contains(r#""status":"duplicate""#), "{again}");
    }
    assert_eq!(
        std::fs::read_to_string(&split_sink)
            .unwrap()
            .lines()
            .count(),
        1
    );

    let mut cmd = relay_cmd();
    cmd.args(["trace", BUNDLE, "--ledger", ledger.to_str().unwrap()]);
    let (table, _) = succeeded(cmd).await;
    assert!(table.contains(&format!("bundle {BUNDLE}")), "{table}");
    assert!(
        table.contains("3 attempts; 2 duplicates answered without publishing"),
        "{table}"
    );
    let split_row = table
        .lines()
        .find(|l| l.contains("alice.jsonl") && !l.contains("published"))
        .unwrap_or_else(|| panic!("a row for the split's destination: {table}"));
    assert!(
        split_row.contains(" 1"),
        "acknowledged by attempt 1: {split_row}"
    );

    // JSON, through RELAY_LEDGER_URL as the relay reads it.
    let mut cmd = relay_cmd();
    cmd.args(["trace", BUNDLE, "--json"])
        .env("RELAY_LEDGER_URL", &ledger);
    let all: serde_json::Value = serde_json::from_str(&succeeded(cmd).await.0).unwrap();
    let entry = &all[0];
    assert_eq!(entry["bundle_uuid"], BUNDLE);
    assert_eq!(entry["duplicates"], 2);
    let attempts = entry["attempts"].as_array().unwrap();
    let verdicts: Vec<&str> = attempts
        .iter()
        .map(|a| a["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["published", "duplicate", "duplicate"]);
    assert_eq!(attempts[0]["split"], "alice");
    assert!(
        attempts[0]["routes_version"]
            .as_str()
            .is_some_and(|v| !v.is_empty()),
        "{entry}"
    );
    let acknowledged = entry["acknowledged"].as_object().unwrap();
    assert_eq!(acknowledged.len(), 1, "{entry}");
    let (destination, ack) = acknowledged.iter().next().unwrap();
    assert!(destination.contains("alice"), "{destination}");
    assert_eq!(ack["attempt"], 1);
    assert!(ack["message_id"].is_string(), "{ack}");
}

#[tokio::test]
async fn trace_says_when_nothing_is_found_and_when_no_ledger_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.db");
    // A ledger the relay made; relay trace never makes one.
    relay_core::ledger::SqliteLedger::open(&ledger).unwrap();
    let mut cmd = relay_cmd();
    cmd.args([
        "trace",
        "no-such-bundle",
        "--ledger",
        ledger.to_str().unwrap(),
    ]);
    assert_fails(cmd, 1, "nothing in").await;

    let mut cmd = relay_cmd();
    cmd.args(["trace", BUNDLE]);
    assert_fails(cmd, 2, "no ledger is configured").await;

    let mut cmd = relay_cmd();
    cmd.args(["trace", BUNDLE, "--ledger", "s3://not/a-ledger"]);
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test]
async fn relay_check_says_whether_the_ledger_answers() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.db");
    let mut cmd = relay_cmd();
    cmd.arg("check")
        .env("RELAY_HMAC_SECRET", "s")
        .env("RELAY_FILE_SINK", "-")
        .env("RELAY_LEDGER_URL", &ledger);
    let (stdout, _) = succeeded(cmd).await;
    assert!(stdout.contains("RELAY_LEDGER_URL"), "{stdout}");
    assert!(
        stdout.contains(&format!("ledger {}: answers", ledger.display())),
        "{stdout}"
    );

    // A ledger that is not a database: relay check fails, as the relay would not start.
    let bad = dir.path().join("not-a-database");
    std::fs::write(&bad, "this is not SQLite").unwrap();
    let mut cmd = relay_cmd();
    cmd.arg("check")
        .env("RELAY_HMAC_SECRET", "s")
        .env("RELAY_FILE_SINK", "-")
        .env("RELAY_LEDGER_URL", &bad);
    assert_fails(cmd, 1, "the relay does not start").await;
}
