//! Replays the signed requests captured from the DSS's own signing code, byte for byte.

mod common;

use bytes::Bytes;
use common::{CAPTURE_SECRET, capture_relay, config, error_code, parse_capture};
use http::{HeaderValue, StatusCode};
use relay_core::Relay;
use std::sync::Arc;

const V2_JSON: &[u8] = include_bytes!("data/dss/v2-json-post.http");
const V1_JSON: &[u8] = include_bytes!("data/dss/v1-json-post-custom-keyid.http");
const V2_MULTIPART: &[u8] = include_bytes!("data/dss/v2-multipart-put.http");

/// The JSON payload each capture carries (for multipart: the `payload` field).
fn expected_payload(raw: &[u8]) -> Bytes {
    let req = parse_capture(raw);
    if raw == V2_MULTIPART {
        parse_capture(V2_JSON).into_body()
    } else {
        req.into_body()
    }
}

#[tokio::test]
async fn every_capture_verifies_and_publishes_its_exact_payload() {
    for (raw, kind, key_id) in [
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
        let outcome = relay.accept(parse_capture(raw)).await;
        assert_eq!(
            outcome.status,
            StatusCode::ACCEPTED,
            "{}",
            String::from_utf8_lossy(&outcome.body)
        );
        let messages = sink.messages.lock().unwrap();
        assert_eq!(messages.len(), 1);
        let m = &messages[0];
        assert_eq!(
            m.payload,
            expected_payload(raw),
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
        assert_eq!(body["deliveries"][0]["sink"], "memory");
    }
}

#[tokio::test]
async fn v1_capture_carries_its_attempt_header() {
    let (relay, sink) = capture_relay(&[]);
    relay.accept(parse_capture(V1_JSON)).await;
    let messages = sink.messages.lock().unwrap();
    assert_eq!(messages[0].attributes.get("dss.notify_attempt"), Some("0"));
    assert_eq!(messages[0].attributes.get("dss.event_type"), None);
}

#[tokio::test]
async fn keys_are_looked_up_by_key_id() {
    let keys = r#"{"relay-key-1": "ribos0me", "hca-dss:8a6a7e5c-2f0b-4c39-9c9e-2d1c7c0e7b11": "ribos0me"}"#;
    let sink = Arc::new(common::RecordingSink::default());
    let relay = Relay::new(
        config(&[("RELAY_HMAC_KEYS", keys)]),
        vec![Arc::clone(&sink) as Arc<dyn relay_core::Sink>],
        Arc::new(relay_core::verify::FixedClock(common::capture_time())),
    );
    for raw in [V2_JSON, V1_JSON, V2_MULTIPART] {
        assert_eq!(
            relay.accept(parse_capture(raw)).await.status,
            StatusCode::ACCEPTED
        );
    }
    // Only relay-key-1 configured: the default hca-dss:<uuid> keyId is unknown.
    let relay = Relay::new(
        config(&[("RELAY_HMAC_KEYS", r#"{"relay-key-1": "ribos0me"}"#)]),
        vec![sink],
        Arc::new(relay_core::verify::FixedClock(common::capture_time())),
    );
    assert_eq!(
        relay.accept(parse_capture(V1_JSON)).await.status,
        StatusCode::ACCEPTED
    );
    let outcome = relay.accept(parse_capture(V2_JSON)).await;
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
    for raw in [V2_JSON, V1_JSON, V2_MULTIPART] {
        let original = parse_capture(raw);
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
    assert!(
        sink.messages.lock().unwrap().is_empty(),
        "nothing tampered was published"
    );
}

#[tokio::test]
async fn unsigned_parts_may_change() {
    let (relay, sink) = capture_relay(&[]);
    let mut req = parse_capture(V1_JSON);
    *req.uri_mut() = "/another/path?replica=gcp&x=2".parse().unwrap();
    req.headers_mut()
        .insert("host", HeaderValue::from_static("relay.example"));
    req.headers_mut()
        .insert("x-dss-notify-attempt", HeaderValue::from_static("3"));
    assert_eq!(relay.accept(req).await.status, StatusCode::ACCEPTED);
    assert_eq!(
        sink.messages.lock().unwrap()[0]
            .attributes
            .get("dss.notify_attempt"),
        Some("3")
    );
}

#[tokio::test]
async fn captures_are_stale_on_the_real_clock() {
    let relay = Relay::new(
        config(&[("RELAY_HMAC_SECRET", CAPTURE_SECRET)]),
        vec![Arc::new(common::RecordingSink::default())],
        Arc::new(relay_core::verify::SystemClock),
    );
    for raw in [V2_JSON, V1_JSON, V2_MULTIPART] {
        let outcome = relay.accept(parse_capture(raw)).await;
        assert_eq!(error_code(&outcome), "stale_date");
    }
    // With the skew check off they verify again.
    let relay = Relay::new(
        config(&[
            ("RELAY_HMAC_SECRET", CAPTURE_SECRET),
            ("RELAY_MAX_CLOCK_SKEW_SECS", "0"),
        ]),
        vec![Arc::new(common::RecordingSink::default())],
        Arc::new(relay_core::verify::SystemClock),
    );
    assert_eq!(
        relay.accept(parse_capture(V2_JSON)).await.status,
        StatusCode::ACCEPTED
    );
}

#[tokio::test]
async fn the_reversed_key_fails_as_in_the_dss_tests() {
    let (relay, _) = capture_relay(&[("RELAY_HMAC_SECRET", "em0sobir")]);
    for raw in [V2_JSON, V1_JSON, V2_MULTIPART] {
        let outcome = relay.accept(parse_capture(raw)).await;
        assert_eq!(error_code(&outcome), "bad_signature");
    }
}

#[test]
fn signing_reproduces_the_captured_headers() {
    for raw in [V2_JSON, V1_JSON, V2_MULTIPART] {
        let req = parse_capture(raw);
        let auth = req.headers()["authorization"].to_str().unwrap();
        let key_id = auth.split('"').nth(1).unwrap();
        let sig = relay_core::verify::sign(
            key_id,
            &relay_core::verify::Secret::new(CAPTURE_SECRET),
            common::capture_time(),
            req.body(),
        )
        .unwrap();
        assert_eq!(sig.authorization, req.headers()["authorization"]);
        assert_eq!(sig.digest, req.headers()["digest"]);
        assert_eq!(sig.date, req.headers()["date"]);
    }
}
