//! SNS, read back through an SQS queue subscribed with raw message delivery.

use std::time::Duration;

use crate::common::{
    Encoding, attribute, create_queue, gcf, publish_each, receive, sdk, sqs, unique, v1, v2,
};

#[tokio::test]
async fn json_and_multipart_reach_an_sns_topic_unchanged() {
    let sqs = sqs().await;
    let sns = aws_sdk_sns::Client::new(&sdk().await);
    let topic = sns
        .create_topic()
        .name(unique("dss"))
        .send()
        .await
        .unwrap()
        .topic_arn()
        .unwrap()
        .to_owned();
    let queue = create_queue(&sqs, false).await;
    let queue_arn = sqs
        .get_queue_attributes()
        .queue_url(&queue)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes()
        .unwrap()[&aws_sdk_sqs::types::QueueAttributeName::QueueArn]
        .clone();
    sns.subscribe()
        .topic_arn(&topic)
        .protocol("sqs")
        .endpoint(queue_arn)
        .attributes("RawMessageDelivery", "true")
        .send()
        .await
        .unwrap();

    let url = gcf(&[("RELAY_SNS_TOPIC_ARN", &topic)]).await;
    let sub = unique("sub");
    let payloads = [v2(&sub, "b1", "DELETE", "t1"), v1(&sub, "b2")];
    publish_each(
        &url,
        &payloads,
        &[Encoding::Json, Encoding::Multipart],
        "sns",
    )
    .await;
    let mut messages = receive(&sqs, &queue, 2, Duration::from_millis(500)).await;
    assert_eq!(messages.len(), 2);
    messages.sort_by_key(|m| attribute(m, "dss.bundle_uuid").unwrap().to_owned());
    for (message, payload) in messages.iter().zip(&payloads) {
        assert_eq!(message.body().unwrap().as_bytes(), payload.as_bytes());
        assert_eq!(
            attribute(message, "dss.subscription_id"),
            Some(sub.as_str())
        );
    }
    assert_eq!(attribute(&messages[0], "dss.event_type"), Some("DELETE"));
}
