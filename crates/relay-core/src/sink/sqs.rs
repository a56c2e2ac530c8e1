//! Amazon SQS: standard and FIFO queues, `SendMessageBatch` for messages in flight together.

use std::collections::HashMap;
use std::sync::Arc;

use aws_config::SdkConfig;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::Region;
use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};

use super::aws::{
    BatchReport, classify, entry_failure, payload_text, region_of_host, send_entries,
    string_attributes,
};
use super::batch::{BatchedSink, Limits, SendBatch};
use super::{Message, Receipt, SinkError};
use crate::config::SqsTarget;

/// SQS takes at most ten entries and 1 MiB per `SendMessageBatch`.
const BATCH: Limits = Limits {
    max_entries: 10,
    max_bytes: 1024 * 1024,
    max_in_flight: 8,
};

/// A sink for one SQS queue. The body is the payload text, unchanged; attributes are String
/// message attributes; FIFO queues get `MessageGroupId` = subscription_id and
/// `MessageDeduplicationId` = the stable dedup key.
///
/// The client is built once, from the shared AWS configuration. A queue URL on an AWS host sets
/// the client's region, so a relay can publish to a queue in another region.
pub fn sqs_sink(sdk: &SdkConfig, target: &SqsTarget) -> BatchedSink {
    let mut config = aws_sdk_sqs::config::Builder::from(sdk);
    let host = target
        .queue_url
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| u.host().map(str::to_owned));
    if let Some(region) = host.as_deref().and_then(region_of_host) {
        config = config.region(Region::new(region));
    }
    let queue = Queue {
        client: Client::from_conf(config.build()),
        url: target.queue_url.clone(),
        fifo: target.is_fifo(),
    };
    let name = format!(
        "sqs:{}",
        target.queue_url.rsplit('/').next().unwrap_or_default()
    );
    BatchedSink::new(name, target.max_message_bytes, Arc::new(queue), BATCH)
}

#[derive(Debug)]
struct Queue {
    client: Client,
    url: String,
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

impl Queue {
    fn entry(
        &self,
        id: String,
        message: &Message,
    ) -> Result<SendMessageBatchRequestEntry, SinkError> {
        let mut entry = SendMessageBatchRequestEntry::builder()
            .id(id)
            .message_body(payload_text(message)?)
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
impl SendBatch for Queue {
    async fn send_one(&self, message: &Message) -> Result<Receipt, SinkError> {
        let mut request = self
            .client
            .send_message()
            .queue_url(&self.url)
            .message_body(payload_text(message)?)
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
                    .send_message_batch()
                    .queue_url(&self.url)
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
}
