//! The example Function URL events, through the handler, into the file sink.

use std::path::Path;

use lambda_http::Body;
use relay_core::{Config, Relay};

fn event(name: &str) -> lambda_http::Request {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("events")
        .join(name);
    lambda_http::request::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

async fn relay(sink: &Path) -> Relay {
    let vars = [
        ("RELAY_HMAC_SECRET", "ribos0me".to_owned()),
        ("RELAY_MAX_CLOCK_SKEW_SECS", "0".to_owned()),
        ("RELAY_FILE_SINK", sink.display().to_string()),
    ];
    let config = Config::from_vars(|n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone()));
    Relay::from_config(config.unwrap()).await.unwrap()
}

fn capture_body(name: &str) -> Vec<u8> {
    let raw = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../relay-core/tests/data/dss")
            .join(name),
    )
    .unwrap();
    let at = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    raw[at..].to_vec()
}

#[tokio::test]
async fn example_events_get_their_documented_status() {
    let dir = tempfile::tempdir().unwrap();
    let sink = dir.path().join("sink.jsonl");
    let relay = relay(&sink).await;
    for (name, status, code) in [
        ("dss-v2-create.json", 202, None),
        ("dss-v1-create.json", 202, None),
        ("dss-v2-multipart-put.json", 202, None),
        ("dss-bad-signature.json", 401, Some("bad_signature")),
    ] {
        let response = relay_lambda::handle(&relay, event(name)).await;
        assert_eq!(response.status().as_u16(), status, "{name}");
        let Body::Text(text) = response.body() else {
            panic!("{name}: not a text body")
        };
        let body: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(body["error"]["code"].as_str(), code, "{name}: {text}");
        assert_eq!(response.headers()["content-type"], "application/json");
    }
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&sink)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let payloads: Vec<&[u8]> = lines
        .iter()
        .map(|l| l["payload"].as_str().unwrap().as_bytes())
        .collect();
    let v2 = capture_body("v2-json-post.http");
    let v1 = capture_body("v1-json-post-custom-keyid.http");
    // The multipart event's body is base64 in the event; its payload field is the v2 JSON.
    assert_eq!(payloads, [v2.as_slice(), v1.as_slice(), v2.as_slice()]);
    assert_eq!(lines[1]["attributes"]["dss.notify_attempt"], "0");
}
