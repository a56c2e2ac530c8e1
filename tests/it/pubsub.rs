//! Pub/Sub, read back through an ordered subscription on the emulator.

use std::time::Duration;

use google_cloud_pubsub::client::{Subscriber, SubscriptionAdmin, TopicAdmin};

use crate::common::{Encoding, gcf, publish_each, unique, v1, v2};

pub(crate) fn endpoint() -> String {
    format!(
        "http://{}",
        std::env::var("PUBSUB_EMULATOR_HOST").expect("source infra/local/env.sh")
    )
}

pub(crate) fn anonymous() -> google_cloud_auth::credentials::Credentials {
    google_cloud_auth::credentials::anonymous::Builder::new().build()
}

/// A client of this type for the emulator, without credentials.
macro_rules! emulator_client {
    ($client:ty) => {
        <$client>::builder()
            .with_endpoint($crate::pubsub::endpoint())
            .with_credentials($crate::pubsub::anonymous())
            .build()
            .await
            .unwrap()
    };
}
pub(crate) use emulator_client;

/// Creates a topic and an ordered subscription to it; returns their names.
pub(crate) async fn topic_with_subscription() -> (String, String) {
    let project = std::env::var("PUBSUB_PROJECT_ID").unwrap_or_else(|_| "test-project".into());
    topic_in(&project, &unique("dss")).await
}

/// Creates the topic `name` in `project` and an ordered subscription to it; returns their
/// names.
pub(crate) async fn topic_in(project: &str, name: &str) -> (String, String) {
    let topic = format!("projects/{project}/topics/{name}");
    let subscription = format!("projects/{project}/subscriptions/{}", unique("dss-sub"));
    let topics = emulator_client!(TopicAdmin);
    topics.create_topic().set_name(&topic).send().await.unwrap();
    let subscriptions = emulator_client!(SubscriptionAdmin);
    subscriptions
        .create_subscription()
        .set_name(&subscription)
        .set_topic(&topic)
        .set_enable_message_ordering(true)
        .send()
        .await
        .unwrap();
    (topic, subscription)
}

/// Pulls `want` messages (acknowledging them), waiting at most 30 s.
pub(crate) async fn pull(
    subscription: &str,
    want: usize,
) -> Vec<google_cloud_pubsub::model::Message> {
    let subscriber = emulator_client!(Subscriber);
    let mut stream = subscriber.subscribe(subscription).build();
    let mut got = Vec::new();
    while got.len() < want {
        match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
            Ok(Some(Ok((message, handler)))) => {
                handler.ack();
                got.push(message);
            }
            other => panic!("pulled {} of {want}: {other:?}", got.len()),
        }
    }
    got
}

#[tokio::test]
async fn json_and_multipart_reach_a_pubsub_topic_unchanged_and_ordered() {
    let (topic, subscription) = topic_with_subscription().await;
    let url = gcf(&[
        ("RELAY_PUBSUB_TOPIC", &topic),
        ("RELAY_PUBSUB_ORDERING", "true"),
    ])
    .await;
    let sub = unique("sub");
    let payloads = [
        v2(&sub, "b1", "CREATE", "t1"),
        v1(&sub, "b1"),
        v2(&sub, "b1", "TOMBSTONE", "t2"),
    ];
    publish_each(
        &url,
        &payloads,
        &[Encoding::Json, Encoding::Multipart, Encoding::Json],
        "pubsub",
    )
    .await;
    let messages = pull(&subscription, 3).await;
    let data: Vec<&[u8]> = messages.iter().map(|m| m.data.as_ref()).collect();
    let sent: Vec<&[u8]> = payloads.iter().map(|p| p.as_bytes()).collect();
    assert_eq!(data, sent, "byte for byte, in order");
    for message in &messages {
        assert_eq!(message.ordering_key, "b1");
        assert_eq!(
            message
                .attributes
                .get("dss.subscription_id")
                .map(String::as_str),
            Some(sub.as_str())
        );
        assert_eq!(
            message.attributes.get("relay.dedup_key").map(String::len),
            Some(64)
        );
    }
    assert_eq!(
        messages[1].attributes.get("dss.kind").map(String::as_str),
        Some("v1")
    );
}
