//! Google Pub/Sub through Google's official client, which batches messages in flight together.

use serde::{Deserialize, Serialize};

use super::shape::{Format, Template};
use super::{MessageLimit, Selection, Shape, ShapeError};

/// A `type = "pubsub"` sink, or `RELAY_PUBSUB_TOPIC` with `RELAY_PUBSUB_ORDERING` and
/// `RELAY_PUBSUB_MAX_MESSAGE_BYTES`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PubSubConfig {
    /// `projects/<project>/topics/<topic>`.
    pub topic: PubSubTopic,
    /// Data plus attributes above this get 413 before any call (default 10000000, the Pub/Sub
    /// limit).
    #[serde(default, skip_serializing_if = "MessageLimit::is_default")]
    pub max_message_bytes: MessageLimit<10_000_000>,
    /// The ordering key template (default: no ordering key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<Template>,
    /// `cloudevents`: send CloudEvents in binary mode (docs/destinations.md); default `raw`.
    #[serde(default, skip_serializing_if = "Format::is_raw")]
    pub format: Format,
    /// `PUBSUB_EMULATOR_HOST` (`host:port`): talk to that emulator with anonymous credentials
    /// instead of Google with the platform's default credentials. Not a key of the table.
    #[serde(skip)]
    pub emulator_host: Option<String>,
}

impl PubSubConfig {
    /// A topic with the default limit and no ordering key.
    pub fn new(topic: PubSubTopic) -> Self {
        Self {
            topic,
            max_message_bytes: MessageLimit::default(),
            ordering_key: None,
            format: Format::Raw,
            emulator_host: None,
        }
    }
}

impl super::TargetConfig for PubSubConfig {
    fn kind(&self) -> &'static str {
        "pubsub"
    }

    fn max_message_bytes(&self) -> Option<usize> {
        Some(self.max_message_bytes.get())
    }

    /// The topic this sink publishes to, as one stable id: Google's full resource name,
    /// `//pubsub.googleapis.com/projects/<project>/topics/<topic>` (an emulator's topic too).
    fn resource(&self) -> String {
        format!("//pubsub.googleapis.com/{}", self.topic)
    }

    fn shape(&self, selection: &Selection) -> Result<Shape, ShapeError> {
        let trace = super::shape::TraceAttributes {
            traceparent: "googclient_traceparent",
            tracestate: Some("googclient_tracestate"),
        };
        let mut shape = (Shape::new(selection, None)?.with_trace(trace))
            .with_format(self.format, super::shape::Mode::Binary);
        shape.ordering_key = self.ordering_key.clone();
        Ok(shape)
    }

    fn describe(&self) -> String {
        let via = self
            .emulator_host
            .as_deref()
            .map(|h| format!(", emulator {h}"))
            .unwrap_or_default();
        format!(
            "pubsub {} (max {} bytes{via})",
            self.topic, self.max_message_bytes
        )
    }
}

crate::text::checked_string!(
    /// A Pub/Sub topic name: `projects/<project>/topics/<topic>`.
    PubSubTopic,
    "a Pub/Sub topic name",
    |topic| match topic.split('/').collect::<Vec<_>>().as_slice() {
        ["projects", project, "topics", name] if !project.is_empty() && name.len() >= 3 => Ok(()),
        _ => Err(format!("expected projects/<project>/topics/<topic>, the topic at least 3 characters, got {topic:?}")),
    }
);

#[cfg(feature = "pubsub")]
pub use client::PubSubSink;
#[cfg(feature = "pubsub")]
pub(crate) use client::{classify, publisher};

#[cfg(feature = "pubsub")]
mod client {
    use google_cloud_gax::error::rpc::Code;
    use google_cloud_pubsub::client::Publisher;
    use google_cloud_pubsub::error::PublishError;
    use google_cloud_pubsub::model::Message as PubSubMessage;

    use super::super::{Message, Receipt, Sink, SinkError};
    use super::PubSubConfig;

    /// Publishes to one topic: data = the payload bytes, attributes as they are, and the message's
    /// ordering key when its destination has one.
    #[derive(Debug)]
    pub struct PubSubSink {
        name: String,
        publisher: Publisher,
        /// False against an emulator, which takes no token.
        authenticated: bool,
    }

    impl PubSubSink {
        /// Builds the publisher once: against `PUBSUB_EMULATOR_HOST` with anonymous credentials
        /// when it is set, else against Google with the platform's default credentials.
        pub async fn new(
            target: &PubSubConfig,
        ) -> Result<Self, google_cloud_gax::client_builder::Error> {
            Ok(Self {
                name: format!(
                    "pubsub:{}",
                    target.topic.as_str().rsplit('/').next().unwrap_or_default()
                ),
                publisher: publisher(&target.topic, target.emulator_host.as_deref()).await?,
                authenticated: target.emulator_host.is_none(),
            })
        }
    }

    /// A publisher to `topic`: against the emulator at `emulator_host` with anonymous
    /// credentials, else against Google with the platform's default credentials.
    pub(crate) async fn publisher(
        topic: &super::PubSubTopic,
        emulator_host: Option<&str>,
    ) -> Result<Publisher, google_cloud_gax::client_builder::Error> {
        let builder = Publisher::builder(topic.to_string());
        let builder = match emulator_host {
            Some(host) => (builder.with_endpoint(format!("http://{host}")))
                .with_credentials(crate::google::anonymous()),
            None => {
                let credentials = crate::google::credentials()
                    .map_err(google_cloud_gax::client_builder::Error::cred)?;
                builder.with_credentials(credentials)
            }
        };
        builder.build().await
    }

    #[async_trait::async_trait]
    impl Sink for PubSubSink {
        fn name(&self) -> &str {
            &self.name
        }

        /// The client batches the messages published together by concurrent requests.
        /// Fetches the shared Google token the publisher sends: its client offers no call that
        /// publishes nothing on its own connection, which the first publish opens.
        async fn warm(&self) -> Result<(), SinkError> {
            if !self.authenticated {
                return Ok(());
            }
            let credentials =
                crate::google::credentials().map_err(|e| SinkError::Retryable(Box::new(e)))?;
            match credentials.headers(http::Extensions::new()).await {
                Ok(_) => Ok(()),
                Err(e) => Err(SinkError::Retryable(Box::new(e))),
            }
        }

        async fn publish(&self, message: &Message) -> Result<Receipt, SinkError> {
            let mut out = PubSubMessage::new()
                .set_data(message.payload.clone())
                .set_attributes(message.attributes.iter());
            if let Some(key) = &message.ordering_key {
                out = out.set_ordering_key(key.clone());
            }
            match self.publisher.publish(out).await {
                Ok(id) => Ok(Receipt::new(Some(id))),
                Err(e) => {
                    if let Some(key) = &message.ordering_key {
                        // A failure pauses its ordering key; the sender's retry must go through.
                        self.publisher.resume_publish(key.clone());
                    }
                    Err(classify(e))
                }
            }
        }
    }

    /// Missing topics, permissions and invalid arguments need an operator; the rest is retried.
    pub(crate) fn classify(error: PublishError) -> SinkError {
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
}

impl PubSubConfig {
    /// The sink, its publisher built once.
    #[cfg(feature = "pubsub")]
    pub(super) async fn build(
        &self,
    ) -> Result<PubSubSink, google_cloud_gax::client_builder::Error> {
        PubSubSink::new(self).await
    }
}
