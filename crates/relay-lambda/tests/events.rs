//! The example Function URL events, through the handler, into the file sink.

use std::path::Path;

use std::sync::Arc;

use http_body_util::BodyExt;
use lambda_http::Body;
use relay_core::Relay;
use relay_testkit::capture;
use tower::ServiceExt;

fn event(name: &str) -> lambda_http::Request {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("events")
        .join(name);
    lambda_http::request::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

async fn relay(sink: &Path) -> Relay {
    let sink = sink.display().to_string();
    let config = relay_testkit::config(&[
        ("RELAY_HMAC_SECRET", capture::SECRET),
        ("RELAY_MAX_CLOCK_SKEW_SECS", "0"),
        ("RELAY_FILE_SINK", &sink),
    ]);
    Relay::from_config(config).await.unwrap()
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
    let (v2, v1) = (
        capture::body("v2-json-post"),
        capture::body("v1-json-post-custom-keyid"),
    );
    // The multipart event's body is base64 in the event; its payload field is the v2 JSON.
    assert_eq!(payloads, [v2, v1, v2]);
    assert_eq!(lines[1]["attributes"]["dss.notify_attempt"], "0");
}

/// relay-lambda and relay-gcf answer every request the same way, because relay-core decides:
/// crawler paths, health checks, refused methods and an unsigned callback.
#[tokio::test]
async fn lambda_answers_exactly_as_relay_gcf_does() {
    let dir = tempfile::tempdir().unwrap();
    let relay = Arc::new(relay(&dir.path().join("sink.jsonl")).await);
    for (method, path) in [
        ("GET", "/favicon.ico"),
        ("GET", "/robots.txt"),
        ("POST", "/favicon.ico"),
        ("HEAD", "/robots.txt"),
        ("GET", "/"),
        ("GET", "/dss/notify?replica=aws"),
        ("DELETE", "/dss/notify"),
        ("POST", "/dss/notify"),
    ] {
        let request = || http::Request::builder().method(method).uri(path);
        let lambda = relay_lambda::handle(&relay, request().body(Body::Empty).unwrap()).await;
        let gcf = relay_gcf::app(Arc::clone(&relay))
            .oneshot(request().body(axum::body::Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(lambda.status(), gcf.status(), "{method} {path}");
        for header in ["content-type", "allow", "www-authenticate"] {
            assert_eq!(
                lambda.headers().get(header),
                gcf.headers().get(header),
                "{method} {path} {header}"
            );
        }
        let gcf_body = gcf.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(lambda.body().as_ref(), gcf_body.as_ref(), "{method} {path}");
    }
}

/// Collects metric lines.
#[derive(Debug, Default)]
struct Lines(std::sync::Mutex<Vec<serde_json::Value>>);

impl relay_core::metrics::MetricsOut for Lines {
    fn write_line(&self, line: &str) {
        self.0
            .lock()
            .unwrap()
            .push(serde_json::from_str(line).expect("one JSON object per line"));
    }
}

/// On Lambda every answer, and every sink's publish, is an Embedded Metric Format line.
#[tokio::test]
async fn answers_and_publishes_are_embedded_metric_lines() {
    let on_lambda = [
        ("RELAY_HMAC_SECRET", capture::SECRET),
        ("RELAY_MAX_CLOCK_SKEW_SECS", "0"),
        ("RELAY_FILE_SINK", "-"),
        ("AWS_LAMBDA_FUNCTION_NAME", "dss-relay"),
    ];
    assert_eq!(
        relay_testkit::config(&on_lambda).metrics,
        relay_core::config::MetricsFormat::Emf
    );
    let lines = Arc::new(Lines::default());
    let relay_with = |sink: Arc<dyn relay_core::Sink>| {
        let relay = relay_testkit::relay(
            relay_testkit::config(&on_lambda),
            &[("file", sink)],
            relay_testkit::capture_clock(),
        );
        relay.with_metrics(Arc::clone(&lines) as _)
    };
    let working = relay_with(relay_testkit::RecordingSink::new("memory"));
    let failing = relay_with(relay_testkit::FailingSink::new("flaky", true));
    for (relay, name, status) in [
        (&working, "dss-v2-create.json", 202),
        (&working, "dss-bad-signature.json", 401),
        (&failing, "dss-v2-create.json", 503),
    ] {
        assert_eq!(
            relay_lambda::handle(relay, event(name))
                .await
                .status()
                .as_u16(),
            status,
            "{name}"
        );
    }
    let lines = lines.0.lock().unwrap();
    // The three dimensions `keys` of each line that counts one of `metric`.
    let counted = |metric: &str, keys: [&str; 3]| -> Vec<[String; 3]> {
        (lines.iter())
            .filter(|l| l[metric] == 1)
            .map(|l| keys.map(|key| l[key].as_str().unwrap().to_owned()))
            .collect()
    };
    assert_eq!(
        counted("Answers", ["Class", "Status", "Code"]),
        [
            ["2xx", "202", "published"],
            ["4xx", "401", "bad_signature"],
            ["5xx", "503", "sink_unavailable"],
        ]
    );
    assert_eq!(
        counted("Publishes", ["Sink", "Resource", "Result"]),
        [["file", "file:-", "ok"], ["file", "file:-", "retryable"]]
    );
    for line in lines.iter() {
        // The function's name tells relays in one account apart, in every dimension set.
        assert_eq!(line["Relay"], "dss-relay", "{line}");
        let directive = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "DssRelay", "{line}");
        for set in directive["Dimensions"].as_array().unwrap() {
            assert_eq!(set[0], "Relay", "{line}");
            for dimension in set.as_array().unwrap() {
                assert!(line[dimension.as_str().unwrap()].is_string(), "{line}");
            }
        }
        assert!(
            line["_aws"]["Timestamp"].as_u64().is_some_and(|t| t > 0),
            "{line}"
        );
        for metric in directive["Metrics"].as_array().unwrap() {
            assert!(line[metric["Name"].as_str().unwrap()].is_number(), "{line}");
        }
    }
}

/// Background work freezes between invocations, so the stored routes are read at the start of
/// an invocation once the refresh interval has passed, and not before.
#[tokio::test]
async fn stored_routes_are_read_at_the_start_of_a_stale_invocation() {
    let dir = tempfile::tempdir().unwrap();
    let (main, routes, split) = (
        dir.path().join("main.jsonl"),
        dir.path().join("routes.toml"),
        dir.path().join("split.jsonl"),
    );
    let config = relay_testkit::config(&[
        ("RELAY_HMAC_SECRET", capture::SECRET),
        ("RELAY_MAX_CLOCK_SKEW_SECS", "0"),
        ("RELAY_FILE_SINK", main.to_str().unwrap()),
        ("RELAY_ROUTES_URL", routes.to_str().unwrap()),
        ("RELAY_ROUTES_REFRESH_SECS", "1"),
    ]);
    let relay = Relay::from_config(config).await.unwrap();
    let invoke = || async {
        let response = relay_lambda::handle(&relay, event("dss-v2-create.json")).await;
        assert_eq!(response.status(), 202);
        let body: serde_json::Value =
            serde_json::from_slice(response.into_body().as_ref()).unwrap();
        (
            body["routes_version"].clone(),
            body["deliveries"][0]["resource"]
                .as_str()
                .unwrap()
                .to_owned(),
        )
    };
    let (version, sink) = invoke().await;
    assert!(
        version.is_null() && sink.ends_with("main.jsonl"),
        "{version} {sink}"
    );

    std::fs::write(
        &routes,
        format!(
            r#"[[splits]]
name = "creates"
match = {{ event_type = ["CREATE"] }}
to = {{ type = "file", path = "{}" }}
registered_at = "{}"
expires_at = "{}"
"#,
            split.display(),
            // Within the longest a split may last (RELAY_SPLIT_MAX_TTL_SECS, 7 days).
            relay_core::live::Timestamp(
                std::time::SystemTime::now() - std::time::Duration::from_secs(60)
            ),
            relay_core::live::Timestamp(
                std::time::SystemTime::now() + std::time::Duration::from_secs(3600)
            ),
        ),
    )
    .unwrap();
    // Read less than a second ago: this invocation does not read again.
    let (version, sink) = invoke().await;
    assert!(
        version.is_null() && sink.ends_with("main.jsonl"),
        "{version} {sink}"
    );

    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (version, sink) = invoke().await;
    assert!(version.is_string(), "{version}");
    assert!(sink.ends_with("split.jsonl"), "{sink}");
}
