//! SQS standard and FIFO queues, read back with the SDK.

use std::time::Duration;

use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};

use crate::common::{
    CountingProxy, Encoding, attribute, create_queue, dss_request, gcf, gcf_with, publish_each,
    receive, send, sqs, unique, v1, v2,
};

/// A new queue, standard or FIFO, and relay-gcf publishing to it: the client, the queue URL
/// and the relay's URL.
async fn relay_to_a_new_queue(fifo: bool) -> (aws_sdk_sqs::Client, String, String) {
    let sqs = sqs().await;
    let queue = create_queue(&sqs, fifo).await;
    let url = gcf(&[("RELAY_SQS_QUEUE_URL", &queue)]).await;
    (sqs, queue, url)
}

/// Sends a v2 notification (`event_type`, as JSON) and a v1 one (as multipart) of a new
/// subscription to the relay at `url`, whose one sink's name starts with `kind:`, and reads both
/// back from `queue`: each its payload byte for byte, with the subscription's id. The v2
/// message comes first.
pub(crate) async fn json_and_multipart_arrive_unchanged(
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
    url: &str,
    kind: &str,
    event_type: &str,
) -> Vec<Message> {
    let sub = unique("sub");
    let payloads = [v2(&sub, "b1", event_type, "t1"), v1(&sub, "b2")];
    let encodings = [Encoding::Json, Encoding::Multipart];
    publish_each(url, &payloads, &encodings, kind).await;
    let mut messages = receive(sqs, queue, 2, Duration::from_millis(500)).await;
    assert_eq!(messages.len(), 2);
    messages.sort_by_key(|m| attribute(m, "dss.bundle_uuid").unwrap().to_owned());
    for (message, payload) in messages.iter().zip(&payloads) {
        assert_eq!(
            message.body().unwrap().as_bytes(),
            payload.as_bytes(),
            "byte for byte"
        );
        assert_eq!(
            attribute(message, "dss.subscription_id"),
            Some(sub.as_str())
        );
    }
    messages
}

#[tokio::test]
async fn json_and_multipart_land_byte_identical_in_a_standard_queue() {
    let (sqs, queue, url) = relay_to_a_new_queue(false).await;
    let messages = json_and_multipart_arrive_unchanged(&sqs, &queue, &url, "sqs", "CREATE").await;
    for message in &messages {
        assert_eq!(
            attribute(message, "relay.key_id"),
            Some(crate::common::KEY_ID)
        );
        assert_eq!(
            attribute(message, "relay.dedup_key").map(str::len),
            Some(64)
        );
    }
    assert_eq!(attribute(&messages[0], "dss.kind"), Some("v2"));
    assert_eq!(attribute(&messages[0], "dss.event_type"), Some("CREATE"));
    assert_eq!(attribute(&messages[1], "dss.kind"), Some("v1"));
    assert_eq!(attribute(&messages[1], "dss.event_type"), None);
}

#[tokio::test]
async fn a_dss_retry_is_delivered_once_to_a_fifo_queue() {
    let (sqs, queue, url) = relay_to_a_new_queue(true).await;
    let sub = unique("sub");
    // The same event twice (a DSS retry: new transaction_id), then another event.
    for (event, transaction) in [("CREATE", "t1"), ("CREATE", "t2"), ("TOMBSTONE", "t3")] {
        let (status, body) = send(dss_request(
            &url,
            &v2(&sub, "b1", event, transaction),
            Encoding::Json,
        ))
        .await;
        assert_eq!(status, 202, "{body}");
    }
    let messages = receive(&sqs, &queue, 2, Duration::from_secs(2)).await;
    let events: Vec<_> = messages
        .iter()
        .map(|m| attribute(m, "dss.event_type").unwrap())
        .collect();
    assert_eq!(
        events,
        ["CREATE", "TOMBSTONE"],
        "the retry was deduplicated, order kept"
    );
    assert!(
        messages[0]
            .body()
            .unwrap()
            .contains(r#""transaction_id": "t1""#)
    );
    let system = messages[0].attributes().unwrap();
    assert_eq!(
        system
            .get(&MessageSystemAttributeName::MessageGroupId)
            .map(String::as_str),
        Some(sub.as_str())
    );
    assert_eq!(
        system
            .get(&MessageSystemAttributeName::MessageDeduplicationId)
            .map(String::as_str),
        attribute(&messages[0], "relay.dedup_key")
    );
}

#[tokio::test]
async fn a_burst_of_200_is_batched_and_delivered_exactly_once() {
    let sqs = sqs().await;
    let queue = create_queue(&sqs, false).await;
    let proxy = CountingProxy::start().await;
    let url = gcf_with(
        &[("RELAY_SQS_QUEUE_URL", &queue)],
        &proxy.sdk(Duration::from_secs(5)).await,
    )
    .await;
    let sub = unique("sub");
    let requests = (0..200).map(|i| {
        let request = dss_request(
            &url,
            &v2(&sub, &format!("bundle-{i:03}"), "CREATE", "t"),
            Encoding::Json,
        );
        tokio::spawn(crate::common::send(request))
    });
    let mut accepted = Vec::new();
    for (i, request) in requests.collect::<Vec<_>>().into_iter().enumerate() {
        let (status, _) = request.await.unwrap();
        if status == 202 {
            accepted.push(format!("bundle-{i:03}"));
        }
    }
    let calls = proxy.calls();
    let messages = receive(&sqs, &queue, accepted.len(), Duration::from_secs(2)).await;
    let mut bundles: Vec<String> = messages
        .iter()
        .map(|m| attribute(m, "dss.bundle_uuid").unwrap().to_owned())
        .collect();
    bundles.sort();
    assert_eq!(bundles, accepted, "every 2xx is in the queue exactly once");
    assert!(accepted.len() >= 190, "{} of 200 accepted", accepted.len());
    println!(
        "sqs burst: 200 notifications, {} accepted, {calls} SQS API calls",
        accepted.len()
    );
    // At most ten entries per call, so at least 20 calls went through the proxy.
    assert!(
        (20..=100).contains(&calls),
        "{calls} SQS calls for 200 notifications"
    );
}
