//! CloudEvents (`format = "cloudevents"`): binary mode on the Pub/Sub emulator (the `ce-`
//! attributes beside the payload, byte for byte), structured mode on moto's SQS (the envelope
//! as the body, the payload its `data`), each checked against CloudEvents 1.0's required
//! attributes.

use std::time::Duration;

use relay_core::Relay;
use relay_testkit::config::ConfigFile;

use crate::common::{
    Encoding, KEY_ID, SECRET, attribute, create_queue, dss_request, receive, send, serve, sqs,
    unique, v2,
};

/// A relay whose one sink is the `[sinks.events]` table `sink`, taking every notification.
async fn relay_with(sink: &str) -> (String, ConfigFile) {
    let file = ConfigFile::new(&format!(
        "[sinks.events]\n{sink}\nformat = \"cloudevents\"\n\n[[routes]]\nname = \"all\"\nmatch = {{}}\nto = [\"events\"]\n"
    ));
    let keys = format!(r#"{{"{KEY_ID}": "{SECRET}"}}"#);
    let emulator = std::env::var("PUBSUB_EMULATOR_HOST").unwrap();
    let pairs = [
        ("RELAY_HMAC_KEYS", keys.as_str()),
        ("PUBSUB_EMULATOR_HOST", emulator.as_str()),
    ];
    let config = file.load(&pairs).expect("a valid configuration");
    let relay = Relay::from_config(config).await.expect("the relay starts");
    (serve(relay).await, file)
}

/// The required attributes of CloudEvents 1.0, by name, each a non-empty string.
fn assert_required(get: impl Fn(&str) -> Option<String>) {
    for name in ["specversion", "id", "source", "type"] {
        let value = get(name).unwrap_or_default();
        assert!(!value.is_empty(), "{name} is required");
    }
    assert_eq!(get("specversion").as_deref(), Some("1.0"));
}

#[tokio::test]
async fn pubsub_gets_the_payload_unchanged_with_ce_attributes() {
    crate::common::require_emulator_env();
    let (topic, subscription) = crate::pubsub::topic_with_subscription().await;
    let (url, _file) = relay_with(&format!("type = \"pubsub\"\ntopic = \"{topic}\"")).await;
    let sub = unique("sub");
    let payload = v2(&sub, "b1", "DELETE", "t1");
    let (status, body) = send(dss_request(&url, &payload, Encoding::Json)).await;
    assert_eq!(status, 202, "{body}");
    let messages = crate::pubsub::pull(&subscription, 1).await;
    let message = &messages[0];
    assert_eq!(
        &message.data[..],
        payload.as_bytes(),
        "the data byte for byte"
    );
    let attributes = &message.attributes;
    assert_required(|name| attributes.get(&format!("ce-{name}")).cloned());
    let get = |name: &str| attributes.get(name).map(String::as_str);
    assert_eq!(get("ce-id"), body["dedup_key"].as_str());
    assert_eq!(
        get("ce-source"),
        Some(format!("/dss/subscriptions/{sub}").as_str())
    );
    assert_eq!(get("ce-type"), Some("org.humancellatlas.dss.bundle.delete"));
    assert_eq!(get("ce-datacontenttype"), Some("application/json"));
    assert!(get("ce-time").is_some_and(|t| humantime::parse_rfc3339(t).is_ok()));
    // The relay's own attributes are still there.
    assert_eq!(get("relay.dedup_key"), body["dedup_key"].as_str());
}

#[tokio::test]
async fn sqs_gets_the_structured_envelope() {
    crate::common::require_emulator_env();
    let sqs = sqs().await;
    let queue = create_queue(&sqs, false).await;
    let (url, _file) = relay_with(&format!("type = \"sqs\"\nqueue_url = \"{queue}\"")).await;
    let payload = v2(&unique("sub"), "b1", "CREATE", "t1");
    let (status, body) = send(dss_request(&url, &payload, Encoding::Json)).await;
    assert_eq!(status, 202, "{body}");
    let messages = receive(&sqs, &queue, 1, Duration::from_millis(200)).await;
    let envelope: serde_json::Value =
        serde_json::from_str(messages[0].body().unwrap()).expect("a JSON envelope");
    assert_required(|name| envelope[name].as_str().map(str::to_owned));
    assert_eq!(envelope["id"], body["dedup_key"]);
    assert_eq!(envelope["type"], "org.humancellatlas.dss.bundle.create");
    let data: serde_json::Value = serde_json::from_str(&payload).unwrap();
    assert_eq!(envelope["data"], data);
    assert_eq!(
        attribute(&messages[0], "relay.dedup_key"),
        body["dedup_key"].as_str()
    );
}
