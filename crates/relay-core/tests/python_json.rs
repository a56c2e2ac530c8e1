//! Every document Python's `json.dumps` writes with default settings is a notification the
//! relay accepts, when it has the required fields, and is forwarded byte for byte: `NaN`,
//! `Infinity`, numbers beyond a double's range, lone surrogate escapes, duplicate keys.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use relay_core::sink::{FileSink, FileTarget};
use relay_core::{Relay, Sink};
use relay_testkit::{Signer, assert_accepted, capture_clock, config, relay};

/// A JSON value as Python writes it: already serialized.
fn python_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("NaN".to_owned()),
        Just("Infinity".to_owned()),
        Just("-Infinity".to_owned()),
        Just("null".to_owned()),
        any::<bool>().prop_map(|b| if b { "true" } else { "false" }.to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        "[1-9][0-9]{19,400}".prop_map(|digits| digits),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(python_float),
        python_string(),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5)
                .prop_map(|items| format!("[{}]", items.join(", "))),
            prop::collection::vec((python_string(), inner), 0..5).prop_map(|pairs| {
                let members: Vec<String> = pairs
                    .into_iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect();
                format!("{{{}}}", members.join(", "))
            }),
        ]
    })
}

/// Python's `repr` of a float: an exponent has a sign, an integral value keeps `.0`.
fn python_float(f: f64) -> String {
    let text = format!("{f:?}");
    match text.split_once('e') {
        Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
        _ => text,
    }
}

/// A string as `ensure_ascii` writes it: every non-ASCII character escaped (astral ones as a
/// surrogate pair), and sometimes a lone surrogate, which Python strings may hold.
fn python_string() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[ -~]".prop_map(|c| match c.as_str() {
            "\"" => "\\\"".to_owned(),
            "\\" => "\\\\".to_owned(),
            other => other.to_owned(),
        }),
        any::<char>().prop_map(|c| {
            let mut units = [0u16; 2];
            c.encode_utf16(&mut units)
                .iter()
                .map(|u| format!("\\u{u:04x}"))
                .collect::<String>()
        }),
        (0xd800u32..0xe000).prop_map(|u| format!("\\u{u:04x}")),
        Just("\\n".to_owned()),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|pieces| format!("\"{}\"", pieces.concat()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn python_documents_with_the_required_fields_are_accepted_unchanged(extra in python_value(), key in python_string()) {
        let text = format!(
            r#"{{"subscription_id": "s-1", "event_type": "CREATE", "match": {{"bundle_uuid": "u", "bundle_version": "v"}}, {key}: {extra}, "subscription_id": "s-2"}}"#
        );
        let notification = relay_core::Notification::parse(Bytes::from(text.clone()));
        let notification = notification.map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        prop_assert_eq!(notification.payload().as_ref(), text.as_bytes());
        // Duplicate keys: the last one wins, as Python's json.loads reads it.
        prop_assert_eq!(notification.subscription_id(), Some("s-2"));
    }
}

/// A relay that forwards every accepted notification to a file sink writing to `sink.jsonl`
/// in a fresh directory; the directory lives as long as the first element.
async fn file_sink_relay() -> (tempfile::TempDir, PathBuf, Relay) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sink.jsonl");
    let file: Arc<dyn Sink> = Arc::new(
        FileSink::open(&FileTarget::Path(path.clone()))
            .await
            .unwrap(),
    );
    let relay = relay(
        config(&[("RELAY_HMAC_SECRET", "ribos0me"), ("RELAY_FILE_SINK", "-")]),
        &[("file", file)],
        capture_clock(),
    );
    (dir, path, relay)
}

/// The string `field` of every line the file sink wrote to `path`, in order.
fn stored_field(path: &Path, field: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()[field]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn python_only_forms_reach_the_file_sink_byte_identical() {
    let (_dir, path, relay) = file_sink_relay().await;
    let big = "7".repeat(400);
    let forms = [
        "1e400".to_owned(),
        "-1e400".to_owned(),
        big,
        "NaN".to_owned(),
        "[Infinity, -Infinity]".to_owned(),
        r#""lone \ud800 and \udfff""#.to_owned(),
        r#"{"k": 1, "k": 2}"#.to_owned(),
    ];
    let mut sent = Vec::new();
    for form in forms {
        let body = format!(
            r#"{{"subscription_id": "s", "event_type": "CREATE", "match": {{"bundle_uuid": "u", "bundle_version": "v"}}, "value": {form}}}"#
        );
        assert_accepted(&relay.accept(Signer::capture("k").json(&body)).await);
        sent.push(body);
    }
    let stored = stored_field(&path, "payload");
    assert_eq!(stored, sent);
}

#[tokio::test]
async fn lone_surrogates_in_the_key_fields_give_different_dedup_keys() {
    let (_dir, path, relay) = file_sink_relay().await;
    let mut answered = Vec::new();
    for uuid in [
        r"bundle-\ud800",
        r"bundle-\udbff",
        "bundle-\u{fffd}",
        "bundle-x",
    ] {
        let body = format!(
            r#"{{"subscription_id": "s", "event_type": "CREATE", "match": {{"bundle_uuid": "{uuid}", "bundle_version": "v"}}, "value": NaN}}"#
        );
        let outcome = relay.accept(Signer::capture("k").json(&body)).await;
        assert_accepted(&outcome);
        let answer: serde_json::Value = serde_json::from_slice(&outcome.body).unwrap();
        answered.push(answer["dedup_key"].as_str().unwrap().to_owned());
    }
    let stored = stored_field(&path, "dedup_key");
    assert_eq!(stored, answered);
    let distinct: std::collections::BTreeSet<&String> = answered.iter().collect();
    assert_eq!(distinct.len(), 4, "{answered:?}");
    // The documented key of the fields' text, where no field holds a lone surrogate.
    assert_eq!(
        answered[3],
        relay_core::notification::dedup_key("s", "bundle-x", "v", Some("CREATE"))
    );
}
