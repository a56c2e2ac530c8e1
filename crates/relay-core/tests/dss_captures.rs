//! Replays the signed requests captured from the DSS's own signing code, byte for byte.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use relay_core::verify::SystemClock;
use relay_testkit::capture::{self, NAMES, SECRET};
use relay_testkit::{
    assert_accepted, capture_clock, capture_relay, config, relay, status_and_code,
};

const V2_JSON: &str = "v2-json-post";
const V1_JSON: &str = "v1-json-post-custom-keyid";
const V2_MULTIPART: &str = "v2-multipart-put";

fn error_code(outcome: &relay_core::Outcome) -> String {
    status_and_code(outcome).1
}

#[tokio::test]
async fn every_capture_verifies_and_publishes_its_exact_payload() {
    for (name, kind, key_id) in [
        (
            V2_JSON,
            "v2",
            "hca-dss:8a6a7e5c-2f0b-4c39-9c9e-2d1c7c0e7b11",
        ),
        (V1_JSON, "v1", "relay-key-1"),
        (
            V2_MULTIPART,
            "v2",
            "hca-dss:8a6a7e5c-2f0b-4c39-9c9e-2d1c7c0e7b11",
        ),
    ] {
        let (relay, sink) = capture_relay(&[]);
        let outcome = relay.accept(capture::request(name)).await;
        assert_accepted(&outcome);
        let messages = sink.messages();
        assert_eq!(messages.len(), 1);
        let m = &messages[0];
        assert_eq!(
            m.payload,
            capture::payload(name),
            "payload forwarded byte for byte"
        );
        assert_eq!(m.attributes.get("dss.kind"), Some(kind));
        assert_eq!(m.attributes.get("relay.key_id"), Some(key_id));
        assert_eq!(
            m.attributes.get("relay.dedup_key"),
            Some(m.dedup_key.as_str())
        );
        let body: serde_json::Value = serde_json::from_slice(&outcome.body).unwrap();
        assert_eq!(body["status"], "published");
        assert_eq!(body["deliveries"][0]["sink"], "file");
        assert_eq!(body["deliveries"][0]["resource"], "file:-");
    }
}

#[tokio::test]
async fn v1_capture_carries_its_attempt_header() {
    let (relay, sink) = capture_relay(&[]);
    relay.accept(capture::request(V1_JSON)).await;
    let messages = sink.messages();
    assert_eq!(messages[0].attributes.get("dss.notify_attempt"), Some("0"));
    assert_eq!(messages[0].attributes.get("dss.event_type"), None);
}

#[tokio::test]
async fn keys_are_looked_up_by_key_id() {
    let keys = r#"{"relay-key-1": "ribos0me", "hca-dss:8a6a7e5c-2f0b-4c39-9c9e-2d1c7c0e7b11": "ribos0me"}"#;
    let relay = relay(
        config(&[("RELAY_HMAC_KEYS", keys), ("RELAY_FILE_SINK", "-")]),
        &[],
        capture_clock(),
    );
    for name in NAMES {
        assert_eq!(
            relay.accept(capture::request(name)).await.status,
            StatusCode::ACCEPTED
        );
    }
    // Only relay-key-1 configured: the default hca-dss:<uuid> keyId is unknown.
    let only_key_1 = config(&[
        ("RELAY_HMAC_KEYS", r#"{"relay-key-1": "ribos0me"}"#),
        ("RELAY_FILE_SINK", "-"),
    ]);
    let relay = relay_testkit::relay(only_key_1, &[], capture_clock());
    assert_eq!(
        relay.accept(capture::request(V1_JSON)).await.status,
        StatusCode::ACCEPTED
    );
    let outcome = relay.accept(capture::request(V2_JSON)).await;
    assert_eq!(
        (outcome.status, error_code(&outcome).as_str()),
        (StatusCode::UNAUTHORIZED, "unknown_key_id")
    );
}

/// Flips the lowest bit of one byte of a header value.
fn flip_header_byte(req: &http::Request<Bytes>, name: &str, index: usize) -> http::Request<Bytes> {
    let mut value = req.headers()[name].as_bytes().to_vec();
    value[index] ^= 0x01;
    let mut changed = clone(req);
    changed.headers_mut().insert(
        http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
        HeaderValue::from_bytes(&value).expect("still a valid header value"),
    );
    changed
}

fn clone(req: &http::Request<Bytes>) -> http::Request<Bytes> {
    let mut copy = http::Request::new(req.body().clone());
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.headers_mut() = req.headers().clone();
    copy
}

#[tokio::test]
async fn every_single_byte_change_is_rejected() {
    let (relay, sink) = capture_relay(&[]);
    let mut checked = 0;
    for name in NAMES {
        let original = capture::request(name);
        for i in 0..original.body().len() {
            let mut body = original.body().to_vec();
            body[i] ^= 0x01;
            let mut changed = clone(&original);
            *changed.body_mut() = Bytes::from(body);
            let outcome = relay.accept(changed).await;
            assert_eq!(outcome.status, StatusCode::UNAUTHORIZED, "body byte {i}");
            assert_eq!(error_code(&outcome), "digest_mismatch", "body byte {i}");
            checked += 1;
        }
        for name in ["digest", "date", "authorization"] {
            let len = original.headers()[name].len();
            // For Authorization, change only the signature value: other bytes are covered by
            // the parameter tests and may legitimately be ignored (unknown parameter names).
            let value = original.headers()[name].to_str().unwrap();
            let range = if name == "authorization" {
                let start = value.find("signature=\"").unwrap() + "signature=\"".len();
                start..len - 1
            } else {
                0..len
            };
            for i in range {
                let outcome = relay.accept(flip_header_byte(&original, name, i)).await;
                assert_eq!(outcome.status, StatusCode::UNAUTHORIZED, "{name} byte {i}");
                checked += 1;
            }
        }
    }
    assert!(checked > 1900, "{checked} changes checked");
    assert!(sink.messages().is_empty(), "nothing tampered was published");
}

#[tokio::test]
async fn unsigned_parts_may_change() {
    let (relay, sink) = capture_relay(&[]);
    let mut req = capture::request(V1_JSON);
    *req.uri_mut() = "/another/path?replica=gcp&x=2".parse().unwrap();
    req.headers_mut()
        .insert("host", HeaderValue::from_static("relay.example"));
    req.headers_mut()
        .insert("x-dss-notify-attempt", HeaderValue::from_static("3"));
    assert_eq!(relay.accept(req).await.status, StatusCode::ACCEPTED);
    assert_eq!(
        sink.messages()[0].attributes.get("dss.notify_attempt"),
        Some("3")
    );
}

#[tokio::test]
async fn captures_are_stale_on_the_real_clock() {
    let on_real_clock = |pairs: &[(&str, &str)]| {
        let mut all = vec![("RELAY_HMAC_SECRET", SECRET), ("RELAY_FILE_SINK", "-")];
        all.extend_from_slice(pairs);
        relay(config(&all), &[], Arc::new(SystemClock))
    };
    let relay = on_real_clock(&[]);
    for name in NAMES {
        assert_eq!(
            error_code(&relay.accept(capture::request(name)).await),
            "stale_date"
        );
    }
    // With the skew check off they verify again.
    let relay = on_real_clock(&[("RELAY_MAX_CLOCK_SKEW_SECS", "0")]);
    assert_eq!(
        relay.accept(capture::request(V2_JSON)).await.status,
        StatusCode::ACCEPTED
    );
}

#[tokio::test]
async fn the_reversed_key_fails_as_in_the_dss_tests() {
    let (relay, _) = capture_relay(&[("RELAY_HMAC_SECRET", "em0sobir")]);
    for name in NAMES {
        let outcome = relay.accept(capture::request(name)).await;
        assert_eq!(error_code(&outcome), "bad_signature");
    }
}

#[test]
fn signing_reproduces_the_captured_headers() {
    for name in NAMES {
        let req = capture::request(name);
        let auth = req.headers()["authorization"].to_str().unwrap();
        let key_id = auth.split('"').nth(1).unwrap();
        let sig = relay_core::verify::sign(
            key_id,
            &relay_core::verify::Secret::new(SECRET),
            capture::time(),
            req.body(),
        )
        .unwrap();
        assert_eq!(sig.authorization, req.headers()["authorization"]);
        assert_eq!(sig.digest, req.headers()["digest"]);
        assert_eq!(sig.date, req.headers()["date"]);
    }
}

#[tokio::test]
async fn an_attempt_header_that_is_not_a_small_number_is_dropped() {
    for (value, kept) in [
        ("12", Some("12")),
        ("3; injected=1", None),
        ("99999", None),
        ("-1", None),
        ("0x1", None),
        ("", None),
    ] {
        let (relay, sink) = capture_relay(&[]);
        let mut req = capture::request(V1_JSON);
        req.headers_mut().insert(
            "x-dss-notify-attempt",
            HeaderValue::from_str(value).unwrap(),
        );
        assert_accepted(&relay.accept(req).await);
        assert_eq!(
            sink.messages()[0].attributes.get("dss.notify_attempt"),
            kept,
            "{value:?}"
        );
    }
}
