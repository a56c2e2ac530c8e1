//! Amazon SNS: standard and FIFO topics, `PublishBatch` for messages in flight together.

use std::collections::HashMap;
use std::sync::Arc;

use aws_config::SdkConfig;
use aws_sdk_sns::Client;
use aws_sdk_sns::config::Region;
use aws_sdk_sns::types::{MessageAttributeValue, PublishBatchRequestEntry};

use super::aws::{
    BatchReport, classify, entry_failure, payload_text, send_entries, string_attributes,
};
use super::batch::{BatchedSink, Limits, SendBatch};
use super::{Message, Receipt, SinkError};
use crate::config::SnsTarget;

/// SNS takes at most ten entries and 256 KiB per `PublishBatch`.
const BATCH: Limits = Limits {
    max_entries: 10,
    max_bytes: 256 * 1024,
    max_in_flight: 8,
};

/// A sink for one SNS topic: the payload text as the message, attributes as String message
/// attributes, and for FIFO topics the same group and deduplication ids as SQS FIFO. The client
/// is built once; the topic ARN's region becomes its region.
pub fn sns_sink(sdk: &SdkConfig, target: &SnsTarget) -> BatchedSink {
    let mut config = aws_sdk_sns::config::Builder::from(sdk);
    if let Some(region) = target.topic_arn.split(':').nth(3).filter(|r| !r.is_empty()) {
        config = config.region(Region::new(region.to_owned()));
    }
    let topic = Topic {
        client: Client::from_conf(config.build()),
        arn: target.topic_arn.clone(),
        fifo: target.is_fifo(),
    };
    let name = format!(
        "sns:{}",
        target.topic_arn.rsplit(':').next().unwrap_or_default()
    );
    BatchedSink::new(name, target.max_message_bytes, Arc::new(topic), BATCH)
}

#[derive(Debug)]
struct Topic {
    client: Client,
    arn: String,
    fifo: bool,
}

fn attributes(message: &Message) -> Result<HashMap<String, MessageAttributeValue>, SinkError> {
    string_attributes(message, |value| {
        MessageAttributeValue::builder()
            .data_type("String")
            .string_value(value)
            .build()
    })
}

impl Topic {
    fn entry(&self, id: String, message: &Message) -> Result<PublishBatchRequestEntry, SinkError> {
        let mut entry = PublishBatchRequestEntry::builder()
            .id(id)
            .message(payload_text(message)?)
            .set_message_attributes(Some(attributes(message)?));
        if self.fifo {
            entry = entry
                .message_group_id(&message.group_id)
                .message_deduplication_id(&message.dedup_id);
        }
        entry.build().map_err(|e| SinkError::Permanent(Box::new(e)))
    }
}

#[async_trait::async_trait]
impl SendBatch for Topic {
    async fn send_one(&self, message: &Message) -> Result<Receipt, SinkError> {
        let mut request = self
            .client
            .publish()
            .topic_arn(&self.arn)
            .message(payload_text(message)?)
            .set_message_attributes(Some(attributes(message)?));
        if self.fifo {
            request = request
                .message_group_id(&message.group_id)
                .message_deduplication_id(&message.dedup_id);
        }
        let output = request.send().await.map_err(classify)?;
        Ok(Receipt {
            message_id: output.message_id().map(str::to_owned),
        })
    }

    async fn send_many(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
        send_entries(
            batch,
            |id, message| self.entry(id, message),
            |entries| async move {
                let output = self
                    .client
                    .publish_batch()
                    .topic_arn(&self.arn)
                    .set_publish_batch_request_entries(Some(entries))
                    .send()
                    .await
                    .map_err(classify)?;
                Ok(BatchReport {
                    accepted: output
                        .successful()
                        .iter()
                        .map(|ok| {
                            (
                                ok.id().unwrap_or_default().to_owned(),
                                ok.message_id().map(str::to_owned),
                            )
                        })
                        .collect(),
                    failed: output
                        .failed()
                        .iter()
                        .map(|f| {
                            (
                                f.id().to_owned(),
                                entry_failure(f.code(), f.sender_fault(), f.message()),
                            )
                        })
                        .collect(),
                })
            },
        )
        .await
    }
}
