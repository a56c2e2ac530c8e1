//! Google Pub/Sub through Google's official client, which batches messages in flight together.

use google_cloud_gax::error::rpc::Code;
use google_cloud_pubsub::client::Publisher;
use google_cloud_pubsub::error::PublishError;
use google_cloud_pubsub::model::Message as PubSubMessage;

use super::{Message, Receipt, Sink, SinkError};
use crate::config::PubSubTarget;

/// Publishes to one topic: data = the payload bytes, attributes as they are, and the message's
/// ordering key when its sink has one (`RELAY_PUBSUB_ORDERING`: the bundle UUID).
#[derive(Debug)]
pub struct PubSubSink {
    name: String,
    publisher: Publisher,
    max_message_bytes: usize,
}

impl PubSubSink {
    /// Builds the publisher once: against `PUBSUB_EMULATOR_HOST` with anonymous credentials
    /// when it is set, else against Google with the platform's default credentials.
    pub async fn new(
        target: &PubSubTarget,
    ) -> Result<Self, google_cloud_gax::client_builder::Error> {
        let mut builder = Publisher::builder(target.topic.clone());
        if let Some(host) = &target.emulator_host {
            builder = builder
                .with_endpoint(format!("http://{host}"))
                .with_credentials(
                    google_cloud_auth::credentials::anonymous::Builder::new().build(),
                );
        }
        Ok(Self {
            name: format!(
                "pubsub:{}",
                target.topic.rsplit('/').next().unwrap_or_default()
            ),
            publisher: builder.build().await?,
            max_message_bytes: target.max_message_bytes,
        })
    }
}

#[async_trait::async_trait]
impl Sink for PubSubSink {
    fn name(&self) -> &str {
        &self.name
    }

    fn max_message_bytes(&self) -> Option<usize> {
        Some(self.max_message_bytes)
    }

    async fn publish(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
        // Start every publish before awaiting any, so the client batches them together.
        let pending: Vec<_> = batch
            .iter()
            .map(|message| {
                let mut out = PubSubMessage::new()
                    .set_data(message.payload.clone())
                    .set_attributes(message.attributes.iter());
                if let Some(key) = &message.ordering_key {
                    out = out.set_ordering_key(key.clone());
                }
                self.publisher.publish(out)
            })
            .collect();
        let mut results = Vec::with_capacity(pending.len());
        for (future, message) in pending.into_iter().zip(batch) {
            results.push(match future.await {
                Ok(id) => Ok(Receipt {
                    message_id: Some(id),
                }),
                Err(e) => {
                    if let Some(key) = &message.ordering_key {
                        // A failure pauses its ordering key; the sender's retry must go through.
                        self.publisher.resume_publish(key.clone());
                    }
                    Err(classify(e))
                }
            });
        }
        results
    }
}

/// Missing topics, permissions and invalid arguments need an operator; the rest is retried.
fn classify(error: PublishError) -> SinkError {
    let permanent = match &error {
        PublishError::Rpc(e) => e.status().is_some_and(|s| {
            matches!(
                s.code,
                Code::NotFound
                    | Code::PermissionDenied
                    | Code::InvalidArgument
                    | Code::FailedPrecondition
                    | Code::Unauthenticated
                    | Code::Unimplemented
            )
        }),
        _ => false,
    };
    if permanent {
        SinkError::Permanent(Box::new(error))
    } else {
        SinkError::Retryable(Box::new(error))
    }
}
