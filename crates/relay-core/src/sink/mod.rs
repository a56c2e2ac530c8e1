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
    /// The stable deduplication key.
    pub dedup_key: String,
    /// FIFO `MessageGroupId` (default: `subscription_id`).
    pub group_id: String,
    /// FIFO `MessageDeduplicationId` (default: the stable deduplication key).
    pub dedup_id: String,
    /// Pub/Sub ordering key, when the sink orders messages.
    pub ordering_key: Option<String>,
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
            group_id: notification.subscription_id().to_owned(),
            dedup_id: notification.dedup_key().to_owned(),
            ordering_key: None,
            received_at,
        }
    }

    /// The message as one sink shapes it: attribute selection, static attributes, and its
    /// group, deduplication and ordering templates over the notification.
    pub fn shaped(
        &self,
        options: &crate::config::SinkOptions,
        notification: &Notification<Verified>,
    ) -> Result<Self, crate::route::TemplateError> {
        let mut message = self.clone();
        if let Some(names) = &options.attributes {
            message
                .attributes
                .retain(|name| names.iter().any(|n| n == name));
        }
        for (name, value) in &options.extra_attributes {
            message.attributes.push(name, value);
        }
        let (document, key) = (notification.document(), notification.dedup_key());
        if let Some(t) = &options.message_group_id {
            message.group_id = t.render(document, key)?;
        }
        if let Some(t) = &options.message_deduplication_id {
            message.dedup_id = t.render(document, key)?;
        }
        if let Some(t) = &options.ordering_key {
            message.ordering_key = Some(t.render(document, key)?);
        }
        Ok(message)
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

/// Why the relay could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A sink could not be built: a file that cannot be opened, a client without credentials.
    #[error("sink {sink:?}: {message}")]
    Sink {
        /// The sink's name.
        sink: String,
        /// What went wrong.
        message: String,
    },
    /// A sink is configured that this build does not include.
    #[error("sink {sink:?} needs the cargo feature {feature:?}, which this build leaves out")]
    NotBuiltIn {
        /// The sink's name.
        sink: String,
        /// The cargo feature that provides it.
        feature: &'static str,
    },
    /// The HMAC keys could not be read from `RELAY_HMAC_KEYS_SECRET_ARN`.
    #[error("RELAY_HMAC_KEYS_SECRET_ARN: {0}")]
    Secret(String),
}

/// Builds every configured sink, in order, each client once. `aws` is the shared AWS
/// configuration, loaded when an SQS or SNS sink exists.
pub async fn build(
    sinks: &[crate::config::SinkConfig],
    #[cfg(feature = "aws")]
    #[cfg_attr(not(any(feature = "sqs", feature = "sns")), allow(unused_variables))]
    aws: Option<&aws_config::SdkConfig>,
) -> Result<Vec<std::sync::Arc<dyn Sink>>, StartError> {
    use crate::config::Target;
    let mut built: Vec<std::sync::Arc<dyn Sink>> = Vec::with_capacity(sinks.len());
    for sink in sinks {
        let fail = |message: String| StartError::Sink {
            sink: sink.name.clone(),
            message,
        };
        #[allow(unused_variables)]
        let missing = |feature| StartError::NotBuiltIn {
            sink: sink.name.clone(),
            feature,
        };
        built.push(match &sink.target {
            Target::File(target) => std::sync::Arc::new(
                FileSink::open(target)
                    .await
                    .map_err(|e| fail(format!("cannot open {target}: {e}")))?,
            ),
            #[cfg(feature = "sqs")]
            Target::Sqs(target) => {
                std::sync::Arc::new(sqs_sink(aws.expect("loaded for SQS"), target))
            }
            #[cfg(feature = "sns")]
            Target::Sns(target) => {
                std::sync::Arc::new(sns_sink(aws.expect("loaded for SNS"), target))
            }
            #[cfg(feature = "pubsub")]
            Target::PubSub(target) => std::sync::Arc::new(
                PubSubSink::new(target)
                    .await
                    .map_err(|e| fail(format!("cannot build the client: {e}")))?,
            ),
            #[cfg(not(feature = "sqs"))]
            Target::Sqs(_) => return Err(missing("sqs")),
            #[cfg(not(feature = "sns"))]
            Target::Sns(_) => return Err(missing("sns")),
            #[cfg(not(feature = "pubsub"))]
            Target::PubSub(_) => return Err(missing("pubsub")),
        });
    }
    Ok(built)
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
