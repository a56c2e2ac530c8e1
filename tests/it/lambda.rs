//! relay-lambda's handler with Function URL events, into a real SQS queue.

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use relay_core::Relay;
use relay_core::verify::{Secret, sign};

use crate::common::{KEY_ID, SECRET, attribute, config, create_queue, receive, sqs, unique, v2};

/// The example Function URL event, re-signed now for a new body.
fn function_url_event(
    template: &str,
    body: &[u8],
    content_type: &str,
    base64: bool,
) -> lambda_http::Request {
    let headers = dss_headers(KEY_ID, SECRET, body);
    function_url_event_with(template, None, body, content_type, base64, &headers)
}

/// The headers the DSS signs `body` with, now, as `(name, value)` text.
pub(crate) fn dss_headers(key_id: &str, secret: &str, body: &[u8]) -> [(String, String); 3] {
    let signature = sign(key_id, &Secret::new(secret), SystemTime::now(), body).unwrap();
    [
        ("date", signature.date),
        ("digest", signature.digest),
        ("authorization", signature.authorization),
    ]
    .map(|(name, value)| (name.to_owned(), value.to_str().unwrap().to_owned()))
}

/// The example Function URL event `template` with a new body, its type, and `headers` set; at
/// `target` (a path and a query string) instead of the template's, when given.
pub(crate) fn function_url_event_with(
    template: &str,
    target: Option<(&str, &str)>,
    body: &[u8],
    content_type: &str,
    base64: bool,
    headers: &[(String, String)],
) -> lambda_http::Request {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crates/relay-lambda/events")
        .join(template);
    let mut event: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let all = event["headers"].as_object_mut().unwrap();
    all.insert("content-type".into(), content_type.into());
    all.insert("content-length".into(), body.len().to_string().into());
    for (name, value) in headers {
        all.insert(name.clone(), value.clone().into());
    }
    event["body"] = if base64 {
        BASE64.encode(body).into()
    } else {
        String::from_utf8(body.to_vec()).unwrap().into()
    };
    event["isBase64Encoded"] = base64.into();
    if let Some((path, query)) = target {
        event["rawPath"] = path.into();
        event["requestContext"]["http"]["path"] = path.into();
        event["rawQueryString"] = query.into();
    }
    lambda_http::request::from_str(&event.to_string()).unwrap()
}

#[tokio::test]
async fn function_url_events_land_byte_identical_in_sqs() {
    let sqs = sqs().await;
    let queue = create_queue(&sqs, false).await;
    let relay = Relay::from_config(config(&[("RELAY_SQS_QUEUE_URL", &queue)]))
        .await
        .unwrap();
    let sub = unique("sub");
    let json = v2(&sub, "b1", "CREATE", "t1");
    let b = "5f0d2a0c9b8e4f7a8d6c5b4a3f2e1d0c";
    let form = format!(
        "--{b}\r\nContent-Disposition: form-data; name=\"payload\"\r\n\r\n{}\r\n--{b}--\r\n",
        v2(&sub, "b2", "DELETE", "t2")
    );
    let events = [
        function_url_event(
            "dss-v2-create.json",
            json.as_bytes(),
            "application/json",
            false,
        ),
        function_url_event(
            "dss-v2-multipart-put.json",
            form.as_bytes(),
            &format!("multipart/form-data; boundary={b}"),
            true,
        ),
    ];
    for event in events {
        let response = relay_lambda::handle(&relay, event).await;
        assert_eq!(response.status().as_u16(), 202, "{:?}", response.body());
    }
    let mut messages = receive(&sqs, &queue, 2, Duration::from_millis(500)).await;
    messages.sort_by_key(|m| attribute(m, "dss.bundle_uuid").unwrap().to_owned());
    assert_eq!(messages[0].body(), Some(json.as_str()));
    assert_eq!(
        messages[1].body(),
        Some(v2(&sub, "b2", "DELETE", "t2").as_str())
    );
}
