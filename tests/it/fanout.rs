//! Several sinks at once: 202 only when every one acknowledged.

use std::time::Duration;

use crate::common::{
    Encoding, attribute, create_queue, dss_request, gcf, receive, send, sqs, unique, v2,
};
use crate::pubsub::{pull, topic_with_subscription};

#[tokio::test]
async fn one_notification_reaches_sqs_and_pubsub() {
    let sqs = sqs().await;
    let queue = create_queue(&sqs, false).await;
    let (topic, subscription) = topic_with_subscription().await;
    let url = gcf(&[
        ("RELAY_SQS_QUEUE_URL", &queue),
        ("RELAY_PUBSUB_TOPIC", &topic),
    ])
    .await;
    let payload = v2(&unique("sub"), "b1", "CREATE", "t1");
    let (status, body) = send(dss_request(&url, &payload, Encoding::Json)).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["deliveries"].as_array().unwrap().len(), 2);
    let queued = receive(&sqs, &queue, 1, Duration::from_millis(500)).await;
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].body(), Some(payload.as_str()));
    assert_eq!(attribute(&queued[0], "dss.bundle_uuid"), Some("b1"));
    let published = pull(&subscription, 1).await;
    assert_eq!(published[0].data.as_ref(), payload.as_bytes());
}

#[tokio::test]
async fn a_failing_second_sink_fails_the_request() {
    let sqs = sqs().await;
    let queue = create_queue(&sqs, false).await;
    let project = std::env::var("PUBSUB_PROJECT_ID").unwrap_or_else(|_| "test-project".into());
    let missing = format!("projects/{project}/topics/{}", unique("never-created"));
    let url = gcf(&[
        ("RELAY_SQS_QUEUE_URL", &queue),
        ("RELAY_PUBSUB_TOPIC", &missing),
    ])
    .await;
    let (status, body) = send(dss_request(
        &url,
        &v2(&unique("sub"), "b1", "CREATE", "t1"),
        Encoding::Json,
    ))
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (502, Some("sink_failed")),
        "{body}"
    );
    // SQS took its copy; the DSS retry will bring the same dedup key again.
    assert_eq!(
        receive(&sqs, &queue, 1, Duration::from_millis(200))
            .await
            .len(),
        1
    );
}
