//! Amazon SNS: standard and FIFO topics, `PublishBatch` for messages in flight together.

use std::collections::HashMap;
use std::sync::Arc;

use aws_config::SdkConfig;
use aws_sdk_sns::Client;
use aws_sdk_sns::config::Region;
use aws_sdk_sns::types::{MessageAttributeValue, PublishBatchRequestEntry};

use super::aws::{BatchReport, MAX_ATTRIBUTES, classify, entry_failure, send_entries};
use super::batch::{Batcher, Limits, SendBatch};
use super::{Message, Receipt, Sink, SinkError};
use crate::config::SnsTarget;

/// SNS takes at most ten entries and 256 KiB per `PublishBatch`.
const BATCH: Limits = Limits {
    max_entries: 10,
    max_bytes: 256 * 1024,
    max_in_flight: 8,
};

/// Publishes to one SNS topic: the payload text as the message, attributes as String message
/// attributes, and for FIFO topics the same group and deduplication ids as SQS FIFO.
#[derive(Debug)]
pub struct SnsSink {
    name: String,
    max_message_bytes: usize,
    batcher: Batcher,
}

#[derive(Debug)]
struct Sender {
    client: Client,
    topic_arn: String,
    fifo: bool,
}

impl SnsSink {
    /// Builds the client once; the topic ARN's region becomes the client's region.
    pub fn new(sdk: &SdkConfig, target: &SnsTarget) -> Self {
        let mut config = aws_sdk_sns::config::Builder::from(sdk);
        if let Some(region) = target.topic_arn.split(':').nth(3).filter(|r| !r.is_empty()) {
            config = config.region(Region::new(region.to_owned()));
        }
        let sender = Sender {
            client: Client::from_conf(config.build()),
            topic_arn: target.topic_arn.clone(),
            fifo: target.is_fifo(),
        };
        let name = format!(
            "sns:{}",
            target.topic_arn.rsplit(':').next().unwrap_or_default()
        );
        Self {
            name,
            max_message_bytes: target.max_message_bytes,
            batcher: Batcher::spawn(Arc::new(sender), BATCH),
        }
    }
}

#[async_trait::async_trait]
impl Sink for SnsSink {
    fn name(&self) -> &str {
        &self.name
    }

    fn max_message_bytes(&self) -> Option<usize> {
        Some(self.max_message_bytes)
    }

    async fn publish(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
        self.batcher.publish(batch).await
    }
}

fn attributes(message: &Message) -> Result<HashMap<String, MessageAttributeValue>, SinkError> {
    message
        .attributes
        .iter()
        .take(MAX_ATTRIBUTES)
        .map(|(name, value)| {
            let value = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(value)
                .build()
                .map_err(|e| SinkError::Permanent(Box::new(e)))?;
            Ok((name.to_owned(), value))
        })
        .collect()
}

fn text(message: &Message) -> Result<String, SinkError> {
    String::from_utf8(message.payload.to_vec()).map_err(|e| SinkError::Permanent(Box::new(e)))
}

impl Sender {
    async fn publish_one(&self, message: &Message) -> Result<Receipt, SinkError> {
        let mut request = self
            .client
            .publish()
            .topic_arn(&self.topic_arn)
            .message(text(message)?)
            .set_message_attributes(Some(attributes(message)?));
        if self.fifo {
            request = request
                .message_group_id(&message.subscription_id)
                .message_deduplication_id(&message.dedup_key);
        }
        let output = request.send().await.map_err(classify)?;
        Ok(Receipt {
            message_id: output.message_id().map(str::to_owned),
        })
    }

    fn entry(&self, id: String, message: &Message) -> Result<PublishBatchRequestEntry, SinkError> {
        let mut entry = PublishBatchRequestEntry::builder()
            .id(id)
            .message(text(message)?)
            .set_message_attributes(Some(attributes(message)?));
        if self.fifo {
            entry = entry
                .message_group_id(&message.subscription_id)
                .message_deduplication_id(&message.dedup_key);
        }
        entry.build().map_err(|e| SinkError::Permanent(Box::new(e)))
    }
}

#[async_trait::async_trait]
impl SendBatch for Sender {
    async fn send(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
        if let [message] = batch {
            return vec![self.publish_one(message).await];
        }
        send_entries(
            batch,
            |id, message| self.entry(id, message),
            |entries| async move {
                let output = self
                    .client
                    .publish_batch()
                    .topic_arn(&self.topic_arn)
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

    fn size(&self, message: &Message) -> usize {
        message.encoded_size()
    }
}
