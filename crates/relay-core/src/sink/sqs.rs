//! Amazon SQS: standard and FIFO queues, `SendMessageBatch` for messages in flight together.

use std::collections::HashMap;
use std::sync::Arc;

use aws_config::SdkConfig;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::Region;
use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};

use super::aws::{
    BatchReport, MAX_ATTRIBUTES, classify, entry_failure, region_of_host, send_entries,
};
use super::batch::{Batcher, Limits, SendBatch};
use super::{Message, Receipt, Sink, SinkError};
use crate::config::SqsTarget;

/// SQS takes at most ten entries and 1 MiB per `SendMessageBatch`.
const BATCH: Limits = Limits {
    max_entries: 10,
    max_bytes: 1024 * 1024,
    max_in_flight: 8,
};

/// Publishes to one SQS queue. The body is the payload text, unchanged; attributes are String
/// message attributes; FIFO queues get `MessageGroupId` = subscription_id and
/// `MessageDeduplicationId` = the stable dedup key.
#[derive(Debug)]
pub struct SqsSink {
    name: String,
    max_message_bytes: usize,
    batcher: Batcher,
}

#[derive(Debug)]
struct Sender {
    client: Client,
    queue_url: String,
    fifo: bool,
}

impl SqsSink {
    /// Builds the client once, from the shared AWS configuration. A queue URL on an AWS host
    /// sets the client's region, so a relay can publish to a queue in another region.
    pub fn new(sdk: &SdkConfig, target: &SqsTarget) -> Self {
        let mut config = aws_sdk_sqs::config::Builder::from(sdk);
        let host = target
            .queue_url
            .parse::<http::Uri>()
            .ok()
            .and_then(|u| u.host().map(str::to_owned));
        if let Some(region) = host.as_deref().and_then(region_of_host) {
            config = config.region(Region::new(region));
        }
        let sender = Sender {
            client: Client::from_conf(config.build()),
            queue_url: target.queue_url.clone(),
            fifo: target.is_fifo(),
        };
        let name = format!(
            "sqs:{}",
            target.queue_url.rsplit('/').next().unwrap_or_default()
        );
        Self {
            name,
            max_message_bytes: target.max_message_bytes,
            batcher: Batcher::spawn(Arc::new(sender), BATCH),
        }
    }
}

#[async_trait::async_trait]
impl Sink for SqsSink {
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

fn body(message: &Message) -> Result<String, SinkError> {
    String::from_utf8(message.payload.to_vec()).map_err(|e| SinkError::Permanent(Box::new(e)))
}

impl Sender {
    async fn send_one(&self, message: &Message) -> Result<Receipt, SinkError> {
        let mut request = self
            .client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body(message)?)
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

    fn entry(
        &self,
        id: String,
        message: &Message,
    ) -> Result<SendMessageBatchRequestEntry, SinkError> {
        let mut entry = SendMessageBatchRequestEntry::builder()
            .id(id)
            .message_body(body(message)?)
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
            return vec![self.send_one(message).await];
        }
        send_entries(
            batch,
            |id, message| self.entry(id, message),
            |entries| async move {
                let output = self
                    .client
                    .send_message_batch()
                    .queue_url(&self.queue_url)
                    .set_entries(Some(entries))
                    .send()
                    .await
                    .map_err(classify)?;
                Ok(BatchReport {
                    accepted: output
                        .successful()
                        .iter()
                        .map(|ok| (ok.id().to_owned(), Some(ok.message_id().to_owned())))
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
