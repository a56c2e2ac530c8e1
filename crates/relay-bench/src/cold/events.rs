//! What Lambda gives the process: its environment, and the events, each a Function URL event
//! (payload format 2.0) carrying a distinct DSS-signed notification.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use relay_core::verify::{Secret, sign};
use serde_json::{Value, json};

use super::runtime_api::Event;

/// The HMAC secret the events are signed with and the relay is given.
pub(crate) const SECRET: &str = "bench-cold-secret";

/// The variables Lambda sets for a `provided.al2023` function (RELAY_METRICS is left to its
/// Lambda default, EMF on standard output).
pub(crate) fn lambda_env(runtime_api: &str, memory_mb: u64) -> Vec<(&'static str, String)> {
    [
        ("AWS_LAMBDA_RUNTIME_API", runtime_api.to_owned()),
        ("AWS_LAMBDA_FUNCTION_NAME", "relay-bench".to_owned()),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".to_owned()),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", memory_mb.to_string()),
        ("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/relay-bench".to_owned()),
        (
            "AWS_LAMBDA_LOG_STREAM_NAME",
            "2026/12/02/[$LATEST]0123456789abcdef0123456789abcdef".to_owned(),
        ),
        ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand".to_owned()),
        ("AWS_EXECUTION_ENV", "AWS_Lambda_provided.al2023".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_DEFAULT_REGION", "us-east-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", "ASIABENCHBENCHBENCH0".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "bench-secret-access-key".to_owned()),
        ("AWS_SESSION_TOKEN", "bench-session-token".to_owned()),
        ("AWS_XRAY_CONTEXT_MISSING", "LOG_ERROR".to_owned()),
        ("AWS_XRAY_DAEMON_ADDRESS", "169.254.79.129:2000".to_owned()),
        ("_AWS_XRAY_DAEMON_ADDRESS", "169.254.79.129".to_owned()),
        ("_AWS_XRAY_DAEMON_PORT", "2000".to_owned()),
        ("_HANDLER", "bootstrap".to_owned()),
        ("LAMBDA_TASK_ROOT", "/var/task".to_owned()),
        ("LAMBDA_RUNTIME_DIR", "/var/runtime".to_owned()),
        ("LANG", "en_US.UTF-8".to_owned()),
        ("TZ", ":UTC".to_owned()),
        ("PATH", "/usr/local/bin:/usr/bin/:/bin:/opt/bin".to_owned()),
        (
            "LD_LIBRARY_PATH",
            "/var/lang/lib:/lib64:/usr/lib64:/var/runtime:/var/runtime/lib:/var/task:/var/task/lib:/opt/lib"
                .to_owned(),
        ),
    ]
    .into()
}

/// Start `n`'s `count` events, each a Function URL event carrying a distinct signed
/// notification, and the notifications themselves.
pub(crate) fn events(n: usize, count: usize) -> (Vec<Event>, Vec<String>) {
    let pid = std::process::id();
    (0..count)
        .map(|i| {
            let id = format!("{pid:08x}-{n:04x}-4{i:03x}-8000-{:012x}", n * count + i);
            let payload = notification(&format!("{pid:08x}-{n:04x}-4{i:03x}-9000-0123456789ab"));
            let body = Bytes::from(function_url_event(&id, &payload).to_string());
            (Event { id, body }, payload)
        })
        .unzip()
}

/// A v2 CREATE as the DSS sends it (about 650 bytes), for bundle `uuid`.
fn notification(uuid: &str) -> String {
    let version = "2026-12-02T031501.000000Z";
    json!({
        "bundle_url": format!("https://dss.data.humancellatlas.org/v1/bundles/{uuid}?version={version}"),
        "dss_api": "https://dss.data.humancellatlas.org",
        "subscription_id": "8a6a7e5c-2f0b-4c39-9c9e-2d1c7c0e7b11",
        "event_timestamp": "2026-12-02T031502.123456Z",
        "event_type": "CREATE",
        "match": {"bundle_uuid": uuid, "bundle_version": version},
        "transaction_id": "4b1b6f1e-86a4-4b9e-9d4c-3f4f8d2a9c10",
        "jmespath_query": "event_type==`CREATE`",
        "attachments": {"project_shortname": "Glioblastoma_medium_1000_cells", "sample_id": ["b1829a9d-6678-493b-bf98-01520f9bad52"]}
    })
    .to_string()
}

/// The Function URL event (payload format 2.0) of a DSS POST of `payload`, signed now.
fn function_url_event(request_id: &str, payload: &str) -> Value {
    let key_id = "hca-dss:8a6a7e5c-2f0b-4c39-9c9e-2d1c7c0e7b11";
    let signature = sign(
        key_id,
        &Secret::new(SECRET),
        SystemTime::now(),
        payload.as_bytes(),
    )
    .expect("a valid keyId");
    let text = |v: &http::HeaderValue| v.to_str().expect("ASCII").to_owned();
    let host = "abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws";
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as u64;
    json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/dss/notify",
        "rawQueryString": "",
        "headers": {
            "host": host,
            "user-agent": "python-requests/2.22.0",
            "accept-encoding": "gzip, deflate",
            "accept": "*/*",
            "content-length": payload.len().to_string(),
            "content-type": "application/json",
            "date": text(&signature.date),
            "digest": text(&signature.digest),
            "authorization": text(&signature.authorization),
            "x-amzn-trace-id": "Root=1-674d2f3e-0123456789abcdef01234567",
            "x-forwarded-for": "203.0.113.7",
            "x-forwarded-port": "443",
            "x-forwarded-proto": "https"
        },
        "queryStringParameters": null,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "abcdefghijklmnopqrstuvwxyz012345",
            "domainName": host,
            "domainPrefix": "abcdefghijklmnopqrstuvwxyz012345",
            "http": {
                "method": "POST",
                "path": "/dss/notify",
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": "python-requests/2.22.0"
            },
            "requestId": request_id,
            "routeKey": "$default",
            "stage": "$default",
            "time": "02/Dec/2026:03:15:01 +0000",
            "timeEpoch": now_ms
        },
        "body": payload,
        "isBase64Encoded": false
    })
}
