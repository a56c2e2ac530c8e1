//! What the sender sees when a destination is missing, down, or too small for the message.

use std::time::{Duration, Instant};

use crate::common::{
    CountingProxy, Encoding, create_queue, dss_request, gcf, gcf_with, sdk_via, send, sqs, unique,
    v2,
};

/// A queue URL for tests whose endpoint never lets the call reach a queue.
const QUEUE: &str = "http://127.0.0.1:5000/123456789012/q";

/// One notification through a relay whose SQS client is built from `sdk`, with this sink
/// timeout: the status, the body and how long the answer took.
async fn send_through_sqs(
    sdk: &aws_config::SdkConfig,
    timeout_ms: &str,
) -> (u16, serde_json::Value, Duration) {
    let vars = [
        ("RELAY_SINK_TIMEOUT_MS", timeout_ms),
        ("RELAY_SQS_QUEUE_URL", QUEUE),
    ];
    let url = gcf_with(&vars, sdk).await;
    let started = Instant::now();
    let (status, body) = send(request(&url)).await;
    (status, body, started.elapsed())
}

/// Panics, showing the body, unless the answer has this status and `error.code`.
fn assert_answer(status: u16, body: &serde_json::Value, (expected, code): (u16, &str)) {
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (expected, Some(code)),
        "{body}"
    );
}

fn request(url: &str) -> http::Request<http_body_util::Full<bytes::Bytes>> {
    dss_request(
        url,
        &v2(&unique("sub"), "b1", "CREATE", "t1"),
        Encoding::Json,
    )
}

#[tokio::test]
async fn a_missing_queue_is_502() {
    let sqs = sqs().await;
    let queue = format!("{}-missing", create_queue(&sqs, false).await);
    let url = gcf(&[("RELAY_SQS_QUEUE_URL", &queue)]).await;
    let (status, body) = send(request(&url)).await;
    assert_answer(status, &body, (502, "sink_failed"));
    assert!(
        !body.to_string().contains("QueueDoesNotExist"),
        "no internal detail in the answer"
    );
}

#[tokio::test]
async fn a_missing_topic_is_502() {
    let project = std::env::var("PUBSUB_PROJECT_ID").unwrap_or_else(|_| "test-project".into());
    let topic = format!("projects/{project}/topics/{}", unique("never-created"));
    let url = gcf(&[("RELAY_PUBSUB_TOPIC", &topic)]).await;
    let (status, body) = send(request(&url)).await;
    assert_answer(status, &body, (502, "sink_failed"));
}

#[tokio::test]
async fn sqs_down_is_503_within_the_deadline() {
    let sdk = sdk_via(
        &format!("http://127.0.0.1:{}", relay_testkit::free_port()),
        Duration::from_millis(1500),
    )
    .await;
    let (status, body, took) = send_through_sqs(&sdk, "1500").await;
    assert_answer(status, &body, (503, "sink_unavailable"));
    assert!(
        took < Duration::from_millis(2500),
        "answered after {took:?}"
    );
}

#[tokio::test]
async fn sqs_that_never_answers_is_503_at_the_deadline() {
    // Accepts connections and reads, but never responds.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let sdk = sdk_via(&endpoint, Duration::from_millis(1000)).await;
    let (status, _, took) = send_through_sqs(&sdk, "1000").await;
    assert_eq!(status, 503);
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(2000),
        "answered after {took:?}"
    );
}

#[tokio::test]
async fn pubsub_down_is_503_within_the_deadline() {
    let emulator = format!("127.0.0.1:{}", relay_testkit::free_port());
    let vars = [
        ("RELAY_SINK_TIMEOUT_MS", "1500"),
        (
            "RELAY_PUBSUB_TOPIC",
            "projects/test-project/topics/dss-events",
        ),
        ("PUBSUB_EMULATOR_HOST", emulator.as_str()),
    ];
    let url = gcf(&vars).await;
    let started = Instant::now();
    let (status, body) = send(request(&url)).await;
    assert_answer(status, &body, (503, "sink_unavailable"));
    assert!(started.elapsed() < Duration::from_millis(2500));
}

#[tokio::test]
async fn oversize_is_413_and_no_call_is_made() {
    let sqs = sqs().await;
    let queue = create_queue(&sqs, false).await;
    let proxy = CountingProxy::start().await;
    let vars = [
        ("RELAY_SQS_QUEUE_URL", queue.as_str()),
        ("RELAY_SQS_MAX_MESSAGE_BYTES", "1000"),
    ];
    let url = gcf_with(&vars, &proxy.sdk(Duration::from_secs(5)).await).await;
    let big = v2(&unique("sub"), &"b".repeat(1000), "CREATE", "t1");
    let (status, body) = send(dss_request(&url, &big, Encoding::Json)).await;
    assert_answer(status, &body, (413, "message_too_large"));
    assert_eq!(proxy.calls(), 0);
    // The same route does carry a message that fits.
    let (status, _) = send(request(&url)).await;
    assert_eq!((status, proxy.calls()), (202, 1));
}
