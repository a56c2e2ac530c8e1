//! SNS, read back through an SQS queue subscribed with raw message delivery.

use crate::common::{attribute, create_queue, gcf, sdk, sqs, unique};
use crate::sqs::json_and_multipart_arrive_unchanged;

/// A new topic, and a new queue subscribed to it with raw message delivery: their ARN and URL.
pub(crate) async fn topic_into_queue(sqs: &aws_sdk_sqs::Client) -> (String, String) {
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
    let queue = create_queue(sqs, false).await;
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
    (topic, queue)
}

#[tokio::test]
async fn json_and_multipart_reach_an_sns_topic_unchanged() {
    let sqs = sqs().await;
    let (topic, queue) = topic_into_queue(&sqs).await;
    let url = gcf(&[("RELAY_SNS_TOPIC_ARN", &topic)]).await;
    let messages = json_and_multipart_arrive_unchanged(&sqs, &queue, &url, "sns", "DELETE").await;
    assert_eq!(attribute(&messages[0], "dss.event_type"), Some("DELETE"));
}
