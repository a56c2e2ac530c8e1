//! A request's trace context passed on with its messages: `traceparent` in, X-Ray's
//! `AWSTraceHeader` on the SQS message (moto), `googclient_traceparent` and
//! `googclient_tracestate` on the Pub/Sub emulator's message, `traceparent` on SNS's; the
//! Lambda invocation's X-Ray trace id on SQS; a malformed header ignored, never refused.
//!
//! moto keeps `AWSTraceHeader` on `SendMessage` and drops it from `SendMessageBatch`'s entries
//! (a moto gap): one notification at a time takes the single call. The batch body's
//! `MessageSystemAttributes` are held by the SQS sink's unit tests.

use std::time::Duration;

use aws_sdk_sqs::types::MessageSystemAttributeName;

use crate::common::{
    Encoding, attribute, create_queue, dss_request, gcf, receive, send, sqs, unique, v2,
};

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACESTATE: &str = "congo=t61rcWkgMzE";
const XRAY: &str = "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1";

/// A notification sent to the relay at `url` with `headers` added: the answer's status and body.
async fn send_with(url: &str, headers: &[(&str, &str)]) -> (u16, serde_json::Value) {
    let payload = v2(&unique("sub"), &unique("bundle"), "CREATE", "t1");
    let mut request = dss_request(url, &payload, Encoding::Json);
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).unwrap();
        request.headers_mut().insert(name, value.parse().unwrap());
    }
    send(request).await
}

fn aws_trace_header(message: &aws_sdk_sqs::types::Message) -> Option<&str> {
    let system = message.attributes()?;
    system
        .get(&MessageSystemAttributeName::AwsTraceHeader)
        .map(String::as_str)
}

#[tokio::test]
async fn a_traceparent_reaches_sqs_as_the_aws_trace_header() {
    let sqs = sqs().await;
    let queue = create_queue(&sqs, false).await;
    let url = gcf(&[("RELAY_SQS_QUEUE_URL", &queue)]).await;
    let (status, body) = send_with(&url, &[("traceparent", TRACEPARENT)]).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(
        body["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736",
        "{body}"
    );
    let messages = receive(&sqs, &queue, 1, Duration::from_millis(200)).await;
    assert_eq!(aws_trace_header(&messages[0]), Some(XRAY));
    // Not one of the ten attributes.
    assert_eq!(attribute(&messages[0], "traceparent"), None);

    // A malformed one is ignored: the notification is delivered, without a trace.
    let bad = "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01";
    let (status, body) = send_with(&url, &[("traceparent", bad)]).await;
    assert_eq!(status, 202, "{body}");
    assert!(body.get("trace_id").is_none(), "{body}");
    let messages = receive(&sqs, &queue, 1, Duration::from_millis(200)).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(aws_trace_header(&messages[0]), None);
}

#[tokio::test]
async fn a_traceparent_reaches_pubsub_as_google_clients_read_it() {
    let (topic, subscription) = crate::pubsub::topic_with_subscription().await;
    let url = gcf(&[("RELAY_PUBSUB_TOPIC", &topic)]).await;
    let headers = [("traceparent", TRACEPARENT), ("tracestate", TRACESTATE)];
    let (status, body) = send_with(&url, &headers).await;
    assert_eq!(status, 202, "{body}");
    let messages = crate::pubsub::pull(&subscription, 1).await;
    let attributes = &messages[0].attributes;
    assert_eq!(
        attributes.get("googclient_traceparent").map(String::as_str),
        Some(TRACEPARENT)
    );
    assert_eq!(
        attributes.get("googclient_tracestate").map(String::as_str),
        Some(TRACESTATE)
    );
}

#[tokio::test]
async fn a_traceparent_reaches_sns_as_an_attribute() {
    let sqs = sqs().await;
    let (topic, queue) = crate::sns::topic_into_queue(&sqs).await;
    let url = gcf(&[("RELAY_SNS_TOPIC_ARN", &topic)]).await;
    let (status, body) = send_with(&url, &[("traceparent", TRACEPARENT)]).await;
    assert_eq!(status, 202, "{body}");
    let messages = receive(&sqs, &queue, 1, Duration::from_millis(200)).await;
    assert_eq!(attribute(&messages[0], "traceparent"), Some(TRACEPARENT));
}

/// The Lambda invocation's own X-Ray trace id, which Lambda gives the handler, is the one the
/// SQS message carries, rather than the Function URL request's header.
#[tokio::test]
async fn the_lambda_invocations_xray_trace_id_reaches_sqs() {
    use lambda_http::RequestExt as _;
    let sqs = sqs().await;
    let queue = create_queue(&sqs, false).await;
    let relay =
        relay_core::Relay::from_config(crate::common::config(&[("RELAY_SQS_QUEUE_URL", &queue)]))
            .await
            .unwrap();
    let payload = v2(&unique("sub"), "b1", "CREATE", "t1");
    let mut headers = crate::lambda::dss_headers(
        crate::common::KEY_ID,
        crate::common::SECRET,
        payload.as_bytes(),
    )
    .to_vec();
    let front = "Root=1-5759e988-bd862e3fe1be46a994272793";
    headers.push(("x-amzn-trace-id".to_owned(), front.to_owned()));
    let event = crate::lambda::function_url_event_with(
        "dss-v2-create.json",
        None,
        payload.as_bytes(),
        "application/json",
        false,
        &headers,
    );
    let mut context = lambda_http::Context::default();
    context.xray_trace_id = Some(XRAY.to_owned());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    context.deadline = (now.unwrap() + Duration::from_secs(30)).as_millis() as u64;
    let response = relay_lambda::handle(&relay, event.with_lambda_context(context)).await;
    assert_eq!(response.status().as_u16(), 202, "{:?}", response.body());
    let messages = receive(&sqs, &queue, 1, Duration::from_millis(200)).await;
    assert_eq!(aws_trace_header(&messages[0]), Some(XRAY));
}
