//! How sink results become answers: every sink must acknowledge; failures choose 502 or 503.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{CAPTURE_SECRET, FailingSink, RecordingSink, capture_time, config, error_code};
use http::StatusCode;
use relay_core::verify::{FixedClock, Secret, sign};
use relay_core::{Message, Receipt, Relay, Sink, SinkError};

const BODY: &str = r#"{"subscription_id": "s", "event_type": "CREATE", "match": {"bundle_uuid": "u", "bundle_version": "v"}}"#;

fn request(body: &str) -> http::Request<Bytes> {
    let sig = sign(
        "k",
        &Secret::new(CAPTURE_SECRET),
        capture_time(),
        body.as_bytes(),
    )
    .unwrap();
    http::Request::post("/")
        .header("content-type", "application/json")
        .header("date", sig.date)
        .header("digest", sig.digest)
        .header("authorization", sig.authorization)
        .body(Bytes::from(body.to_owned()))
        .unwrap()
}

fn relay(vars: &[(&str, &str)], sinks: Vec<Arc<dyn Sink>>) -> Relay {
    let mut all = vec![("RELAY_HMAC_SECRET", CAPTURE_SECRET)];
    all.extend_from_slice(vars);
    Relay::new(config(&all), sinks, Arc::new(FixedClock(capture_time())))
}

/// Never answers.
#[derive(Debug)]
struct Stuck;

#[async_trait::async_trait]
impl Sink for Stuck {
    fn name(&self) -> &str {
        "stuck"
    }

    async fn publish(&self, _: &[Message]) -> Vec<Result<Receipt, SinkError>> {
        std::future::pending().await
    }
}

/// Accepts, but takes only small messages.
#[derive(Debug, Default)]
struct Small(RecordingSink);

#[async_trait::async_trait]
impl Sink for Small {
    fn name(&self) -> &str {
        "small"
    }

    fn max_message_bytes(&self) -> Option<usize> {
        Some(200)
    }

    async fn publish(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
        self.0.publish(batch).await
    }
}

#[tokio::test]
async fn every_sink_gets_the_notification() {
    let (a, b) = (
        Arc::new(RecordingSink::default()),
        Arc::new(RecordingSink::default()),
    );
    let relay = relay(
        &[],
        vec![
            Arc::clone(&a) as Arc<dyn Sink>,
            Arc::clone(&b) as Arc<dyn Sink>,
        ],
    );
    let outcome = relay.accept(request(BODY)).await;
    assert_eq!(outcome.status, StatusCode::ACCEPTED);
    let body: serde_json::Value = serde_json::from_slice(&outcome.body).unwrap();
    assert_eq!(body["deliveries"].as_array().unwrap().len(), 2);
    assert_eq!(
        (
            a.messages.lock().unwrap().len(),
            b.messages.lock().unwrap().len()
        ),
        (1, 1)
    );
}

#[tokio::test]
async fn one_failing_sink_fails_the_request() {
    let ok = Arc::new(RecordingSink::default()) as Arc<dyn Sink>;
    let retry = Arc::new(FailingSink {
        name: "flaky",
        retryable: true,
    }) as Arc<dyn Sink>;
    let broken = Arc::new(FailingSink {
        name: "broken",
        retryable: false,
    }) as Arc<dyn Sink>;

    let outcome = relay(&[], vec![Arc::clone(&ok), Arc::clone(&retry)])
        .accept(request(BODY))
        .await;
    assert_eq!(
        (outcome.status, error_code(&outcome).as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "sink_unavailable")
    );
    assert_eq!(outcome.headers["retry-after"], "5");

    let outcome = relay(&[], vec![Arc::clone(&ok), Arc::clone(&broken)])
        .accept(request(BODY))
        .await;
    assert_eq!(
        (outcome.status, error_code(&outcome).as_str()),
        (StatusCode::BAD_GATEWAY, "sink_failed")
    );

    // Retrying cannot fix a permanent failure, so it decides the status.
    let outcome = relay(&[], vec![retry, broken]).accept(request(BODY)).await;
    assert_eq!(outcome.status, StatusCode::BAD_GATEWAY);
    assert!(
        !String::from_utf8_lossy(&outcome.body).contains("simulated"),
        "no internal detail leaks"
    );
}

#[tokio::test]
async fn a_sink_that_never_answers_gets_503_by_the_deadline() {
    let quick = relay(&[("RELAY_SINK_TIMEOUT_MS", "300")], vec![Arc::new(Stuck)]);
    let started = Instant::now();
    let outcome = quick.accept(request(BODY)).await;
    assert_eq!(outcome.status, StatusCode::SERVICE_UNAVAILABLE);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );

    // A platform deadline earlier than the sink timeout wins.
    let late = relay(&[], vec![Arc::new(Stuck)]);
    let started = Instant::now();
    let outcome = late
        .accept_until(
            request(BODY),
            Some(Instant::now() + Duration::from_millis(200)),
        )
        .await;
    assert_eq!(outcome.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn too_large_for_a_sink_is_413_before_any_sink_is_called() {
    let small = Arc::new(Small::default());
    let other = Arc::new(RecordingSink::default());
    let relay = relay(
        &[],
        vec![
            Arc::clone(&other) as Arc<dyn Sink>,
            Arc::clone(&small) as Arc<dyn Sink>,
        ],
    );
    let big = BODY.replace(r#""s""#, &format!("\"{}\"", "s".repeat(200)));
    let outcome = relay.accept(request(&big)).await;
    assert_eq!(
        (outcome.status, error_code(&outcome).as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "message_too_large")
    );
    assert!(
        other.messages.lock().unwrap().is_empty() && small.0.messages.lock().unwrap().is_empty()
    );
}
