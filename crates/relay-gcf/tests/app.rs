//! The HTTP surface of relay-gcf, driven through the router and through the real binary.

mod common;

use std::io::{Read, Write};

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use relay_core::sink::{FileSink, FileTarget};
use relay_core::{Relay, Sink};
use relay_testkit::capture;
use relay_testkit::capture_clock;
use tower::ServiceExt;

const V2_JSON: &str = "v2-json-post";

/// A capture as an axum request.
fn capture_request(name: &str) -> Request<Body> {
    capture::request(name).map(Body::from)
}

async fn relay_with_file(
    dir: &tempfile::TempDir,
    extra: &[(&str, &str)],
) -> (Arc<Relay>, std::path::PathBuf) {
    let path = dir.path().join("sink.jsonl");
    let path_text = path.display().to_string();
    let mut vars = vec![
        ("RELAY_HMAC_SECRET", capture::SECRET),
        ("RELAY_FILE_SINK", path_text.as_str()),
    ];
    vars.extend_from_slice(extra);
    let config = relay_testkit::config(&vars);
    let sink: Arc<dyn Sink> = Arc::new(
        FileSink::open(&FileTarget::Path(path.clone()))
            .await
            .unwrap(),
    );
    (
        Arc::new(relay_testkit::relay(
            config,
            &[("file", sink)],
            capture_clock(),
        )),
        path,
    )
}

async fn send(relay: &Arc<Relay>, req: Request<Body>) -> (StatusCode, serde_json::Value) {
    let response = relay_gcf::app(Arc::clone(relay))
        .oneshot(req)
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn captures_land_byte_identical_in_the_file_sink() {
    let dir = tempfile::tempdir().unwrap();
    let (relay, path) = relay_with_file(&dir, &[]).await;
    for name in [V2_JSON, "v2-multipart-put"] {
        let (status, body) = send(&relay, capture_request(name)).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        assert_eq!(body["deliveries"][0]["sink"], "file", "{body}");
        assert!(
            body["deliveries"][0]["resource"]
                .as_str()
                .unwrap()
                .starts_with("file:/"),
            "{body}"
        );
    }
    let lines = std::fs::read_to_string(path).unwrap();
    let lines: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for line in &lines {
        assert_eq!(
            line["payload"].as_str().unwrap().as_bytes(),
            capture::body(V2_JSON)
        );
        assert_eq!(line["attributes"]["dss.event_type"], "CREATE");
        assert_eq!(line["attributes"]["relay.dedup_key"], line["dedup_key"]);
    }
}

#[tokio::test]
async fn health_any_path_and_crawler_paths() {
    let dir = tempfile::tempdir().unwrap();
    let (relay, _) = relay_with_file(&dir, &[]).await;
    let get = |uri: &str| Request::get(uri).body(Body::empty()).unwrap();
    assert_eq!(
        send(&relay, get("/")).await,
        (StatusCode::OK, serde_json::json!({"status": "ok"}))
    );
    assert_eq!(
        send(&relay, get("/some/callback?replica=aws")).await.0,
        StatusCode::OK
    );
    for path in ["/favicon.ico", "/robots.txt"] {
        for method in ["GET", "POST"] {
            let request = Request::builder()
                .method(method)
                .uri(path)
                .body(Body::empty())
                .unwrap();
            let (status, body) = send(&relay, request).await;
            assert_eq!(
                (status, body["error"]["code"].as_str()),
                (StatusCode::NOT_FOUND, Some("not_found"))
            );
        }
    }
    let (status, _) = send(&relay, Request::delete("/x").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn declared_oversize_is_refused_without_reading_the_body() {
    let dir = tempfile::tempdir().unwrap();
    let (relay, _) = relay_with_file(&dir, &[]).await;
    // A body that never yields a byte: answering at all proves it was not read.
    let endless = Body::from_stream(Box::into_pin(never_ending()));
    let req = Request::post("/")
        .header("content-length", "10737418240")
        .header("content-type", "application/json")
        .body(endless)
        .unwrap();
    assert_too_large(&relay, req).await;
}

#[tokio::test]
async fn undeclared_oversize_is_cut_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (relay, _) = relay_with_file(&dir, &[("RELAY_MAX_BODY_BYTES", "1000")]).await;
    // Chunked, no Content-Length: an endless stream of bytes, refused after 1000.
    let chunks = Box::into_pin(endless(vec![b' '; 100]));
    let req = Request::post("/")
        .header("content-type", "application/json")
        .body(Body::from_stream(chunks))
        .unwrap();
    assert_too_large(&relay, req).await;
}

/// The request is refused with 413 `body_too_large` within 5 s, however long its body.
async fn assert_too_large(relay: &Arc<Relay>, request: Request<Body>) {
    let answer = tokio::time::timeout(Duration::from_secs(5), send(relay, request)).await;
    let (status, body) = answer.expect("an answer without reading the whole body");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("body_too_large"))
    );
}

type Chunks = dyn futures_core::Stream<Item = Result<Vec<u8>, std::io::Error>> + Send;

fn never_ending() -> Box<Chunks> {
    Box::new(futures_util::stream::pending())
}

fn endless(chunk: Vec<u8>) -> Box<Chunks> {
    Box::new(futures_util::stream::repeat_with(move || Ok(chunk.clone())))
}

#[test]
fn sigterm_drains_the_request_in_flight_then_exits() {
    let mut server = common::Server::start(&[]);
    let sink = server.sink();
    let mut stream = server.connect();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();

    // Send the headers and half the body, then ask the server to stop.
    let raw = capture::raw(V2_JSON);
    let (head, body) = raw.split_at(raw.len() - capture::body(V2_JSON).len());
    stream.write_all(head).unwrap();
    stream.write_all(&body[..300]).unwrap();
    stream.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    server.process.terminate();
    std::thread::sleep(Duration::from_millis(200));

    // The in-flight request still completes and is published.
    stream.write_all(&body[300..]).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 202"), "{response}");

    let status = server.process.exits_within(Duration::from_secs(12));
    assert!(status.success(), "{status}");
    let line = std::fs::read_to_string(&sink).unwrap();
    let line: serde_json::Value = serde_json::from_str(line.trim_end()).unwrap();
    assert_eq!(line["payload"].as_str().unwrap().as_bytes(), body);
}

#[test]
fn refuses_to_start_without_a_key() {
    let mut relay_gcf = Command::new(env!("CARGO_BIN_EXE_relay-gcf"));
    relay_gcf.env(
        "RELAY_LISTEN",
        format!("127.0.0.1:{}", relay_testkit::free_port()),
    );
    relay_testkit::assert_refuses_without_a_key(&mut relay_gcf, 2);
}

#[test]
fn log_format_from_the_file_gives_json_lines() {
    let stderr = start_and_stop("[relay]\nhmac_secret = \"x\"\nlog_format = \"json\"\n");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.iter().any(|l| l.contains("Relay ready.")), "{stderr}");
    for line in lines {
        let parsed: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(parsed["message"].is_string(), "{line}");
    }
}

#[test]
fn text_logs_to_a_file_have_no_colours_and_an_open_replay_window_is_warned_of() {
    let stderr = start_and_stop(
        "[relay]\nhmac_secret = \"x\"\nlog_format = \"text\"\nmax_clock_skew_secs = 0\n",
    );
    assert!(stderr.contains("Relay ready."), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "ANSI escapes in a log file: {stderr:?}"
    );
    assert!(stderr.contains("The Date check is off"), "{stderr}");
}

/// Starts relay-gcf with `config` as its file (standard error to a file, not a terminal), stops
/// it once it listens, and returns what it logged.
fn start_and_stop(config: &str) -> String {
    let file = relay_testkit::ConfigFile::new(config);
    let mut command = Command::new(env!("CARGO_BIN_EXE_relay-gcf"));
    command
        .env_remove("RELAY_LOG_FORMAT")
        .env_remove("K_SERVICE")
        .env("RELAY_CONFIG", &file.path)
        .env("RELAY_FILE_SINK", "-");
    let mut server = relay_testkit::RelayProcess::spawn(command);
    server.terminate();
    server.exits_within(Duration::from_secs(20));
    server.stderr()
}

#[test]
fn a_broken_secret_line_stops_the_start_without_being_logged() {
    for text in relay_testkit::FILES_WITH_A_BROKEN_SECRET_LINE {
        let file = relay_testkit::ConfigFile::new(text);
        let output = Command::new(env!("CARGO_BIN_EXE_relay-gcf"))
            .env("RELAY_CONFIG", &file.path)
            .env("RELAY_FILE_SINK", "-")
            .env(
                "RELAY_LISTEN",
                format!("127.0.0.1:{}", relay_testkit::free_port()),
            )
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{text:?}: {stderr}");
        assert!(
            stderr.contains("relay.toml:"),
            "no place for {text:?}: {stderr}"
        );
        assert!(!stderr.contains("s3cret"), "{text:?}: {stderr}");
    }
}
