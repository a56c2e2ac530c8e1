//! Where notifications leave the relay. A [`Sink`] durably accepts a batch of messages and
//! answers for each one; the relay acknowledges the sender only when every sink did.

#[cfg(feature = "aws")]
mod aws;
#[cfg(any(feature = "sqs", feature = "sns"))]
mod batch;
mod file;
#[cfg(feature = "pubsub")]
mod pubsub;
#[cfg(feature = "sns")]
mod sns;
#[cfg(feature = "sqs")]
mod sqs;

use std::fmt;
use std::time::SystemTime;

use bytes::Bytes;

#[cfg(feature = "aws")]
pub use aws::load_aws_config;
#[cfg(any(feature = "sqs", feature = "sns"))]
pub use batch::BatchedSink;
pub use file::{FileSink, FileTarget};
#[cfg(feature = "pubsub")]
pub use pubsub::PubSubSink;
#[cfg(feature = "sns")]
pub use sns::sns_sink;
#[cfg(feature = "sqs")]
pub use sqs::sqs_sink;

use crate::notification::{Attributes, Notification, Verified};

/// Boxed error source carried by a [`SinkError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One notification on its way to a sink.
#[derive(Debug, Clone)]
pub struct Message {
    /// The exact payload bytes received; forwarded unchanged.
    pub payload: Bytes,
    /// Attributes in priority order.
    pub attributes: Attributes,
    /// The stable deduplication key (FIFO `MessageDeduplicationId`).
    pub dedup_key: String,
    /// `subscription_id` (FIFO `MessageGroupId`).
    pub subscription_id: String,
    /// `match.bundle_uuid` (Pub/Sub ordering key).
    pub bundle_uuid: String,
    /// When the relay received the request.
    pub received_at: SystemTime,
}

impl Message {
    /// Builds the message for a verified notification.
    pub fn new(
        notification: &Notification<Verified>,
        notify_attempt: Option<&str>,
        received_at: SystemTime,
    ) -> Self {
        Self {
            payload: notification.payload().clone(),
            attributes: Attributes::derive(notification, notify_attempt),
            dedup_key: notification.dedup_key().to_owned(),
            subscription_id: notification.subscription_id().to_owned(),
            bundle_uuid: notification.bundle_uuid().to_owned(),
            received_at,
        }
    }

    /// The size queue services count against their limit: the body plus every attribute's
    /// name, data type (`String`) and value.
    pub fn encoded_size(&self) -> usize {
        self.payload.len()
            + self
                .attributes
                .iter()
                .map(|(name, value)| name.len() + "String".len() + value.len())
                .sum::<usize>()
    }
}

/// A sink's acknowledgement of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The identifier the destination assigned, where it assigns one.
    pub message_id: Option<String>,
}

/// Why a sink did not accept a message.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// Worth retrying: throttling, timeouts, unavailability (the sender gets 503).
    #[error("temporarily unavailable: {0}")]
    Retryable(#[source] BoxError),
    /// Retrying will not help until an operator acts (the sender gets 502).
    #[error("failed: {0}")]
    Permanent(#[source] BoxError),
}

impl SinkError {
    /// True when the sender should retry.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Retryable(_))
    }

    /// The same failure again, for every message of a batch that one error failed.
    pub fn replicate(&self) -> Self {
        let detail: BoxError = match self {
            Self::Retryable(e) | Self::Permanent(e) => e.to_string().into(),
        };
        if self.is_retryable() {
            Self::Retryable(detail)
        } else {
            Self::Permanent(detail)
        }
    }
}

/// A destination that durably accepts notifications (the file sink; SQS, SNS, Pub/Sub).
#[async_trait::async_trait]
pub trait Sink: Send + Sync + fmt::Debug {
    /// Short name for logs and responses, e.g. `file:/var/log/dss.jsonl`.
    fn name(&self) -> &str;

    /// The largest [`Message::encoded_size`] the destination takes; larger notifications are
    /// refused with 413 before any sink is called.
    fn max_message_bytes(&self) -> Option<usize> {
        None
    }

    /// Publishes a batch and returns only once the destination has answered, with one result
    /// per message, in order, so a partly accepted batch fails exactly the rejected messages.
    async fn publish(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>>;
}
