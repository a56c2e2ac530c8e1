//! Amazon SNS: standard and FIFO topics, `PublishBatch` for messages in flight together.

super::fifo::fifo_config! {
    /// A `type = "sns"` sink, or `RELAY_SNS_TOPIC_ARN` with `RELAY_SNS_MAX_MESSAGE_BYTES`.
    pub struct SnsConfig {
        /// The topic ARN; a name ending in `.fifo` makes it a FIFO topic.
        pub topic_arn: TopicArn,
    }
    type = "sns", noun = "topic", limit = 262144, trace = "traceparent"
}

impl SnsConfig {
    /// The topic this sink publishes to, as one stable id: its ARN.
    fn resource_id(&self) -> String {
        self.topic_arn.to_string()
    }
}

crate::text::checked_string!(
    /// An SNS topic ARN: `arn:<partition>:sns:<region>:<account>:<name>`.
    TopicArn,
    "an SNS topic ARN",
    |arn| match arn.split(':').collect::<Vec<_>>().as_slice() {
        ["arn", partition, "sns", region, account, name]
            if partition.starts_with("aws") && ![region, account, name].iter().any(|p| p.is_empty()) =>
        {
            Ok(())
        }
        _ => Err(format!("expected a topic ARN such as arn:aws:sns:us-east-1:123456789012:name, got {arn:?}")),
    }
);

impl TopicArn {
    /// The topic's region.
    pub fn region(&self) -> &str {
        self.0.split(':').nth(3).unwrap_or_default()
    }
}

#[cfg(feature = "sns")]
mod api {
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::time::Duration;

    use aws_sdk_sns::Client;
    use aws_sdk_sns::config::Region;
    use aws_sdk_sns::types::{MessageAttributeValue, PublishBatchRequestEntry};

    use super::super::SinkError;
    use super::super::aws::{
        AwsApi, AwsEntry, AwsSender, BatchReport, classify, entry_failure, invalid, opened,
    };
    use super::super::batch::{BatchedSink, Limits};
    use super::SnsConfig;

    impl SnsConfig {
        /// The sink (`PublishBatch` for messages in flight together), its client built once;
        /// the topic ARN's region becomes its region. A partial batch waits at most `wait` for
        /// more messages.
        pub(in crate::sink) fn build(
            &self,
            sdk: &aws_config::SdkConfig,
            wait: Duration,
        ) -> BatchedSink {
            let config = aws_sdk_sns::config::Builder::from(sdk)
                .region(Region::new(self.topic_arn.region().to_owned()));
            let topic = Topic {
                client: Client::from_conf(config.build()),
                arn: self.topic_arn.as_str().to_owned(),
            };
            let name = format!("sns:{}", topic.arn.rsplit(':').next().unwrap_or_default());
            // SNS takes at most 256 KiB per `PublishBatch`.
            let limits = Limits::aws(256 * 1024, wait);
            BatchedSink::new(name, Arc::new(AwsSender(topic)), limits)
        }
    }

    #[derive(Debug)]
    struct Topic {
        client: Client,
        arn: String,
    }

    fn attributes(entry: &AwsEntry) -> Result<HashMap<String, MessageAttributeValue>, SinkError> {
        let value = |v: &str| {
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value(v)
                .build()
        };
        entry
            .attributes
            .iter()
            .map(|(name, v)| Ok((name.to_owned(), value(v).map_err(invalid)?)))
            .collect()
    }

    #[async_trait::async_trait]
    impl AwsApi for Topic {
        async fn warm(&self) -> Result<(), SinkError> {
            opened(
                self.client
                    .get_topic_attributes()
                    .topic_arn(&self.arn)
                    .send()
                    .await,
            )
        }

        async fn send(&self, entry: AwsEntry) -> Result<Option<String>, SinkError> {
            let request = self.client.publish().topic_arn(&self.arn);
            let output = request
                .set_message_attributes(Some(attributes(&entry)?))
                .message(entry.body_string())
                .set_message_group_id(entry.group_id)
                .set_message_deduplication_id(entry.dedup_id)
                .send()
                .await
                .map_err(classify)?;
            Ok(output.message_id().map(str::to_owned))
        }

        async fn send_batch(&self, entries: Vec<AwsEntry>) -> Result<BatchReport, SinkError> {
            let mut built = Vec::with_capacity(entries.len());
            for entry in entries {
                let attributes = attributes(&entry)?;
                built.push(
                    PublishBatchRequestEntry::builder()
                        .message(entry.body_string())
                        .id(entry.id)
                        .set_message_attributes(Some(attributes))
                        .set_message_group_id(entry.group_id)
                        .set_message_deduplication_id(entry.dedup_id)
                        .build()
                        .map_err(invalid)?,
                );
            }
            let call = self.client.publish_batch().topic_arn(&self.arn);
            let output = call
                .set_publish_batch_request_entries(Some(built))
                .send()
                .await
                .map_err(classify)?;
            let mut report = BatchReport::default();
            for ok in output.successful() {
                let id = ok.id().unwrap_or_default().to_owned();
                report
                    .accepted
                    .push((id, ok.message_id().map(str::to_owned)));
            }
            for f in output.failed() {
                report.failed.push((
                    f.id().to_owned(),
                    entry_failure(f.code(), f.sender_fault(), f.message()),
                ));
            }
            Ok(report)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_arns() {
        let arn: TopicArn = "arn:aws:sns:us-east-1:123456789012:dss.fifo"
            .parse()
            .unwrap();
        assert_eq!(arn.region(), "us-east-1");
        assert!(SnsConfig::new(arn).is_fifo());
        for bad in ["arn:aws:sqs:us-east-1:1:q", "dss", "arn:aws:sns::1:t"] {
            assert!(bad.parse::<TopicArn>().is_err(), "{bad}");
        }
    }
}
