//! Every document Python's `json.dumps` writes with default settings is a notification the
//! relay accepts, when it has the required fields, and is forwarded byte for byte: `NaN`,
//! `Infinity`, numbers beyond a double's range, lone surrogate escapes, duplicate keys.

use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use relay_core::Sink;
use relay_core::sink::{FileSink, FileTarget};
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
        prop_assert_eq!(notification.subscription_id(), "s-2");
    }
}

#[tokio::test]
async fn python_only_forms_reach_the_file_sink_byte_identical() {
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
    let lines = std::fs::read_to_string(&path).unwrap();
    let stored: Vec<String> = lines
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["payload"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(stored, sent);
}
