//! Hostile patterns through every door that compiles one: `relay check`, `relay routes put`,
//! `relay split start --match`, and a relay reading them from its stored routes. Each is refused
//! with its place and reason; nothing overflows a stack.

mod common;

use std::process::Output;

use relay_core::{Config, Relay};

use common::relay_cmd;

/// JMESPath expressions that once overflowed a thread's stack, compiling or evaluating.
fn nested_expressions() -> [(&'static str, String); 4] {
    [
        ("4,050 negations", format!("{}event_type", "!".repeat(4050))),
        ("5,000 dots", vec!["a"; 5001].join(".")),
        (
            "20,000 parentheses",
            format!("{}event_type{}", "(".repeat(20_000), ")".repeat(20_000)),
        ),
        ("a 4 KB line", format!("{}a", "!".repeat(4096))),
    ]
}

/// The stored-routes (or `[[routes]]`) text of one route matching on `expression`.
fn route_on(expression: &str) -> String {
    let pattern = serde_json::json!({ "$jmespath": expression }).to_string();
    relay_testkit::file_route(
        "audit",
        "/tmp/audit.jsonl",
        "deep",
        Some(&toml_inline(&pattern)),
    )
}

/// A JSON object as a TOML inline table of one string key.
fn toml_inline(json: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(json).unwrap();
    let (key, expression) = value.as_object().unwrap().iter().next().unwrap();
    let expression = serde_json::to_string(expression.as_str().unwrap()).unwrap();
    format!("{{ \"{key}\" = {expression} }}")
}

/// The process ended by itself with a refusal: not a success, not a crash.
fn refused(out: &Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "{what}: {:?}\n{stderr}",
        out.status
    );
    assert!(stderr.contains("JMESPath"), "{what}: {stderr}");
    stderr
}

#[test]
fn check_refuses_nested_expressions_in_the_configuration() {
    let dir = tempfile::tempdir().unwrap();
    for (what, expression) in nested_expressions() {
        let file = dir.path().join("relay.toml");
        std::fs::write(&file, route_on(&expression)).unwrap();
        let out = relay_cmd()
            .env("RELAY_HMAC_SECRET", "s")
            .args(["check", "--config", file.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = refused(&out, what);
        assert!(stderr.contains("relay.toml"), "{what}: {stderr}");
    }
}

#[test]
fn routes_put_and_split_start_refuse_nested_expressions() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    for (what, expression) in nested_expressions() {
        let file = dir.path().join("deep.toml");
        std::fs::write(&file, route_on(&expression)).unwrap();
        let out = relay_cmd()
            .args(["routes", "put", file.to_str().unwrap(), "--routes"])
            .arg(&routes)
            .output()
            .unwrap();
        refused(&out, what);
        assert!(!routes.exists(), "{what}: the document was written");

        let pattern = serde_json::json!({ "$jmespath": expression }).to_string();
        let out = relay_cmd()
            .args([
                "split",
                "start",
                "deep",
                "--match",
                &pattern,
                "--file",
                "/tmp/deep.jsonl",
            ])
            .arg("--routes")
            .arg(&routes)
            .output()
            .unwrap();
        refused(&out, what);
        assert!(!routes.exists(), "{what}: the split was written");
    }
}

#[tokio::test]
async fn a_relay_refuses_them_from_its_stored_routes_and_keeps_answering() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    let sink = dir.path().join("sink.jsonl");
    for (what, expression) in nested_expressions() {
        std::fs::write(&routes, route_on(&expression)).unwrap();
        let vars = [
            (
                "RELAY_HMAC_SECRET",
                relay_testkit::capture::SECRET.to_owned(),
            ),
            ("RELAY_MAX_CLOCK_SKEW_SECS", "0".to_owned()),
            ("RELAY_FILE_SINK", sink.display().to_string()),
            ("RELAY_ROUTES_URL", routes.display().to_string()),
        ];
        let config =
            Config::from_vars(|n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone()))
                .unwrap();
        let relay = Relay::from_config(config).await.expect("starts");
        // The deployed route takes the notification; the stored document was refused whole.
        let outcome = relay
            .accept(relay_testkit::capture::request("v2-json-post"))
            .await;
        assert_eq!(outcome.status, 202, "{what}: {outcome:?}");
        let body: serde_json::Value = serde_json::from_slice(&outcome.body).unwrap();
        assert_eq!(
            body["routes_version"],
            serde_json::Value::Null,
            "{what}: {body}"
        );
    }
}
