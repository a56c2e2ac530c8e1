//! The destinations' connections are opened at start (`RELAY_WARM_CONNECTIONS`), so the first
//! notification does not open one: relay-gcf against an SQS-protocol endpoint on loopback that
//! counts its connections and calls.

use std::io::{Read, Write};
use std::time::Duration;

use relay_testkit::RelayProcess;
use relay_testkit::capture;
use relay_testkit::fake_sqs::{FakeSqs, Fault};

fn start(sqs: &FakeSqs, warm: &str) -> RelayProcess {
    RelayProcess::start(
        env!("CARGO_BIN_EXE_relay-gcf"),
        [
            ("RELAY_HMAC_SECRET", capture::SECRET),
            ("RELAY_MAX_CLOCK_SKEW_SECS", "0"),
            ("RELAY_SQS_QUEUE_URL", sqs.queue_url().as_str()),
            ("RELAY_WARM_CONNECTIONS", warm),
            ("RELAY_LOG_FORMAT", "json"),
            ("AWS_ENDPOINT_URL_SQS", sqs.endpoint.as_str()),
            ("AWS_ACCESS_KEY_ID", "warm"),
            ("AWS_SECRET_ACCESS_KEY", "warm"),
            ("AWS_REGION", "us-east-1"),
        ],
    )
}

/// Sends the v2 capture and returns the answer's status line.
async fn send_capture(relay: &RelayProcess) -> String {
    let mut stream = relay.connect();
    tokio::task::spawn_blocking(move || {
        stream.write_all(capture::raw("v2-json-post")).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut answer = [0u8; 512];
        let n = stream.read(&mut answer).unwrap();
        String::from_utf8_lossy(&answer[..n])
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queues_connection_is_open_before_the_first_notification() {
    let sqs = FakeSqs::start(Fault::None).await;
    let relay = start(&sqs, "true");
    // Listening means started, and the start opened the connection with a call that sends
    // nothing (this endpoint refuses it, 400 InvalidAction: an answer all the same).
    assert_eq!(sqs.connections(), 1, "{}", relay.stderr());
    assert_eq!(sqs.targets(), ["AmazonSQS.GetQueueAttributes"]);
    assert_eq!(sqs.distinct(), 0);
    assert!(
        !relay.stderr().contains("could not be opened"),
        "{}",
        relay.stderr()
    );

    assert_eq!(send_capture(&relay).await, "HTTP/1.1 202 Accepted");
    // The notification went out on the connection opened at start.
    assert_eq!(sqs.connections(), 1);
    assert_eq!(
        sqs.targets(),
        ["AmazonSQS.GetQueueAttributes", "AmazonSQS.SendMessage"]
    );
    assert_eq!(sqs.distinct(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_warming_off_the_first_notification_opens_it() {
    let sqs = FakeSqs::start(Fault::None).await;
    let relay = start(&sqs, "false");
    assert_eq!(sqs.connections(), 0, "{}", relay.stderr());
    assert_eq!(send_capture(&relay).await, "HTTP/1.1 202 Accepted");
    assert_eq!(sqs.connections(), 1);
    assert_eq!(sqs.targets(), ["AmazonSQS.SendMessage"]);
}
