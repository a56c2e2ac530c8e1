//! Amazon SQS: standard and FIFO queues, `SendMessageBatch` for messages in flight together.

use serde::Deserialize;

use super::shape::{ShapeError, fifo_ids};
use super::{AWS_MAX_ATTRIBUTES, ByteLimit, Selection, Shape};
use crate::route::Template;

/// A `type = "sqs"` sink, or `RELAY_SQS_QUEUE_URL` with `RELAY_SQS_MAX_MESSAGE_BYTES`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqsConfig {
    /// The queue URL; a name ending in `.fifo` makes it a FIFO queue.
    pub queue_url: QueueUrl,
    /// Body plus attributes above this get 413 before any call (default 1048576, the SQS
    /// limit; set it lower for a queue with a smaller `MaximumMessageSize`).
    #[serde(default = "SqsConfig::default_max")]
    pub max_message_bytes: ByteLimit,
    /// FIFO queues: the `MessageGroupId` template (default `{subscription_id}`).
    pub message_group_id: Option<Template>,
    /// FIFO queues: the `MessageDeduplicationId` template (default `{$dedup_key}`).
    pub message_deduplication_id: Option<Template>,
}

impl SqsConfig {
    /// The SQS limit for body plus attributes.
    pub const DEFAULT_MAX_MESSAGE_BYTES: ByteLimit = ByteLimit::new(1024 * 1024);

    fn default_max() -> ByteLimit {
        Self::DEFAULT_MAX_MESSAGE_BYTES
    }

    /// A queue with the default limit and FIFO ids.
    pub fn new(queue_url: QueueUrl) -> Self {
        Self {
            queue_url,
            max_message_bytes: Self::DEFAULT_MAX_MESSAGE_BYTES,
            message_group_id: None,
            message_deduplication_id: None,
        }
    }

    /// True for a FIFO queue.
    pub fn is_fifo(&self) -> bool {
        self.queue_url.as_str().ends_with(".fifo")
    }

    pub(super) fn shape(&self, selection: &Selection) -> Result<Shape, ShapeError> {
        let shape = Shape::new(selection, Some(AWS_MAX_ATTRIBUTES))?;
        fifo_ids(
            shape,
            self.is_fifo(),
            self.message_group_id.as_ref(),
            self.message_deduplication_id.as_ref(),
        )
    }
}

crate::text::checked_string!(
    /// An SQS queue URL: `http(s)://host/<account>/<name>`.
    QueueUrl,
    "an SQS queue URL",
    |url| {
        let uri = url.parse::<http::Uri>().ok();
        match uri.filter(|u| matches!(u.scheme_str(), Some("https" | "http")) && u.host().is_some()) {
            Some(u) if u.path().trim_matches('/').split('/').count() == 2 => Ok(()),
            _ => Err(format!(
                "expected a queue URL such as https://sqs.us-east-1.amazonaws.com/123456789012/name, got {url:?}"
            )),
        }
    }
);

#[cfg(feature = "sqs")]
mod api {
    use std::collections::HashMap;
    use std::sync::Arc;

    use aws_sdk_sqs::Client;
    use aws_sdk_sqs::config::Region;
    use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};

    use super::super::SinkError;
    use super::super::aws::{
        AwsApi, AwsSender, BatchReport, Entry, classify, entry_failure, invalid, region_of_host,
    };
    use super::super::batch::{BatchedSink, Limits};
    use super::SqsConfig;

    /// SQS takes at most ten entries and 1 MiB per `SendMessageBatch`.
    const BATCH: Limits = Limits {
        max_entries: 10,
        max_bytes: 1024 * 1024,
        max_in_flight: 8,
        max_queued: 4096,
    };

    impl SqsConfig {
        /// The sink, its client built once from the shared AWS configuration. A queue URL on
        /// an AWS host sets the client's region, so a relay can publish to another region.
        pub(in crate::sink) fn build(&self, sdk: &aws_config::SdkConfig) -> BatchedSink {
            let mut config = aws_sdk_sqs::config::Builder::from(sdk);
            let url = self.queue_url.as_str();
            let host = url
                .parse::<http::Uri>()
                .ok()
                .and_then(|u| u.host().map(str::to_owned));
            if let Some(region) = host.as_deref().and_then(region_of_host) {
                config = config.region(Region::new(region));
            }
            let queue = Queue {
                client: Client::from_conf(config.build()),
                url: url.to_owned(),
            };
            let name = format!("sqs:{}", url.rsplit('/').next().unwrap_or_default());
            BatchedSink::new(name, Arc::new(AwsSender(queue)), BATCH)
        }
    }

    #[derive(Debug)]
    struct Queue {
        client: Client,
        url: String,
    }

    fn attributes(entry: &Entry) -> Result<HashMap<String, MessageAttributeValue>, SinkError> {
        entry
            .attributes
            .iter()
            .map(|(name, value)| {
                let value = MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(value);
                Ok((name.clone(), value.build().map_err(invalid)?))
            })
            .collect()
    }

    #[async_trait::async_trait]
    impl AwsApi for Queue {
        async fn send(&self, entry: Entry) -> Result<Option<String>, SinkError> {
            let output = self
                .client
                .send_message()
                .queue_url(&self.url)
                .set_message_attributes(Some(attributes(&entry)?))
                .set_message_group_id(entry.group_id)
                .set_message_deduplication_id(entry.dedup_id)
                .message_body(entry.body)
                .send()
                .await
                .map_err(classify)?;
            Ok(output.message_id().map(str::to_owned))
        }

        async fn send_batch(&self, entries: Vec<Entry>) -> Result<BatchReport, SinkError> {
            let entries = entries
                .into_iter()
                .map(|entry| {
                    SendMessageBatchRequestEntry::builder()
                        .set_message_attributes(Some(attributes(&entry)?))
                        .set_message_group_id(entry.group_id)
                        .set_message_deduplication_id(entry.dedup_id)
                        .id(entry.id)
                        .message_body(entry.body)
                        .build()
                        .map_err(invalid)
                })
                .collect::<Result<Vec<_>, _>>()?;
            let output = self
                .client
                .send_message_batch()
                .queue_url(&self.url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(classify)?;
            let accepted = output.successful().iter();
            Ok(BatchReport {
                accepted: accepted
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_urls() {
        assert!(
            "https://sqs.eu-west-1.amazonaws.com/123456789012/dss.fifo"
                .parse::<QueueUrl>()
                .is_ok()
        );
        assert!(
            "http://127.0.0.1:5000/123456789012/q"
                .parse::<QueueUrl>()
                .is_ok()
        );
        for bad in [
            "dss-events",
            "https://sqs.eu-west-1.amazonaws.com/q",
            "ftp://h/1/q",
        ] {
            assert!(bad.parse::<QueueUrl>().is_err(), "{bad}");
        }
    }

    #[test]
    fn fifo_queues_get_default_ids_and_standard_ones_refuse_them() {
        let fifo = SqsConfig::new(
            "https://sqs.eu-west-1.amazonaws.com/1/dss.fifo"
                .parse()
                .unwrap(),
        );
        let shape = fifo.shape(&Selection::default()).unwrap();
        assert_eq!(
            shape.group_id.as_ref().map(Template::source),
            Some("{subscription_id}")
        );
        let mut standard =
            SqsConfig::new("https://sqs.eu-west-1.amazonaws.com/1/dss".parse().unwrap());
        standard.message_group_id = Some(Template::parse("{subscription_id}").unwrap());
        assert_eq!(
            standard.shape(&Selection::default()).unwrap_err().field,
            "message_group_id"
        );
    }
}
