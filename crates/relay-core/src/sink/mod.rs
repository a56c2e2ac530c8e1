//! Where notifications leave the relay. A [`Sink`] durably accepts a batch of messages and
//! answers for each one; the relay acknowledges the sender only when every routed sink did.
//!
//! Each destination owns its configuration, its validation and its construction, in its own
//! module: [`file`](mod@file), [`sqs`], [`sns`] and [`pubsub`] (the queue clients behind the cargo
//! features of the same names). [`SinkConfig`] is one `[sinks.<name>]` table, or the sink the
//! variables describe; [`Destination`] is that sink built: its name, its client and its
//! [`Shape`]. This module never reads the relay's configuration; the configuration reads it.

#[cfg(feature = "aws")]
mod aws;
pub(crate) mod batch;
mod fifo;
pub mod file;
mod limit;
pub mod pubsub;
mod resource;
mod shape;
pub mod sns;
pub mod sqs;
mod trace;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use serde::de::Error as _;
use serde::{Deserialize, Serialize};

#[cfg(feature = "dynamodb")]
pub(crate) use aws::classify;
pub use file::{FileSink, FileSinkConfig, FileTarget};
pub use limit::{ByteLimit, MessageLimit};
pub use pubsub::PubSubConfig;
pub use resource::SharedResource;
pub(crate) use resource::check_resources;
pub use shape::{
    Attributes, Format, Selection, Shape, ShapeError, Template, TemplateError, Unshaped,
};
pub use sns::SnsConfig;
pub use sqs::{SqsConfig, region_of_host};
pub use trace::{TraceContext, XRAY_HEADER};

use crate::notification::{Notification, Verified};

/// Boxed error source carried by a [`SinkError`].
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// SQS and SNS accept at most ten message attributes.
pub const AWS_MAX_ATTRIBUTES: usize = 10;

/// One notification on its way to a sink.
#[derive(Debug, Clone)]
pub struct Message {
    /// The exact payload bytes received; forwarded unchanged.
    pub payload: Bytes,
    /// Attributes in priority order.
    pub attributes: Attributes,
    /// The stable deduplication key.
    pub dedup_key: String,
    /// FIFO `MessageGroupId`, set by the destination's [`Shape`] (SQS, SNS).
    pub group_id: Option<String>,
    /// FIFO `MessageDeduplicationId`, set by the destination's [`Shape`] (SQS, SNS).
    pub dedup_id: Option<String>,
    /// Pub/Sub ordering key, when the destination orders messages.
    pub ordering_key: Option<String>,
    /// When the relay received the request.
    pub received_at: SystemTime,
    /// The request's trace context, passed on as each destination takes it (shared between
    /// the destinations' messages).
    pub trace: Option<std::sync::Arc<TraceContext>>,
}

impl Message {
    /// The unshaped message for a verified notification: every relay attribute (the attempt
    /// from `headers`), no ids.
    pub fn new(
        notification: &Notification<Verified>,
        headers: &http::HeaderMap,
        received_at: SystemTime,
    ) -> Self {
        let attempt = shape::notify_attempt(headers);
        Self {
            payload: notification.payload().clone(),
            attributes: Attributes::derive(notification, attempt),
            dedup_key: notification.dedup_key().to_owned(),
            group_id: None,
            dedup_id: None,
            ordering_key: None,
            received_at,
            trace: TraceContext::from_headers(headers).map(std::sync::Arc::new),
        }
    }

    /// The size queue services count against their limit: the body plus every attribute's
    /// name, data type (`String`) and value.
    pub(crate) fn encoded_size(&self) -> usize {
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
    /// How many messages the destination call that carried this one held, where the relay
    /// batched them itself (SQS, SNS).
    pub batch_size: Option<usize>,
}

impl Receipt {
    /// An acknowledgement with the destination's message id, outside any batch of the relay's.
    pub fn new(message_id: Option<String>) -> Self {
        Self {
            message_id,
            batch_size: None,
        }
    }
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
    pub(crate) fn is_retryable(&self) -> bool {
        matches!(self, Self::Retryable(_))
    }

    /// A destination's transform that yielded no body for a message: permanent (retrying runs
    /// the same program over the same document), its own code in the answer.
    pub fn transform(error: crate::transform::RunError) -> Self {
        Self::Permanent(Box::new(error))
    }

    /// The transform's failure, when this is one.
    pub(crate) fn as_transform(&self) -> Option<&crate::transform::RunError> {
        match self {
            Self::Permanent(e) => e.downcast_ref(),
            Self::Retryable(_) => None,
        }
    }

    /// The same failure again, for every message of a batch that one error failed.
    #[cfg(feature = "aws")]
    pub(crate) fn replicate(&self) -> Self {
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
pub trait Sink: Send + Sync + std::fmt::Debug {
    /// Short name for logs and responses, e.g. `sqs:dss-events`.
    fn name(&self) -> &str;

    /// Publishes one message and returns only once the destination has answered. A sink that
    /// batches (SQS, SNS, the archive) shares its calls among the messages in flight together.
    async fn publish(&self, message: &Message) -> Result<Receipt, SinkError>;

    /// Opens the destination's connection (its TLS session too) before the first message, with
    /// one cheap call that publishes nothing; any answer, a refusal included, leaves the
    /// connection open. Nothing to open by default.
    async fn warm(&self) -> Result<(), SinkError> {
        Ok(())
    }
}

/// What a destination's configuration says of itself, each destination in its own module: the
/// [`Target`] it is a variant of asks it.
pub(crate) trait TargetConfig {
    /// Its `type`.
    fn kind(&self) -> &'static str;
    /// Largest [`Message::encoded_size`] it takes, if it has a limit.
    fn max_message_bytes(&self) -> Option<usize>;
    /// The shape of every message it sends, checked against what it takes.
    fn shape(&self, selection: &Selection) -> Result<Shape, ShapeError>;
    /// What it delivers to, as one stable id ([`Target::resource`]).
    fn resource(&self) -> String;
    /// One line for `relay check`.
    fn describe(&self) -> String;
}

/// Where a sink delivers: one variant per destination, each with its own configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Target {
    /// A local file or standard output.
    File(FileSinkConfig),
    /// An SQS queue.
    Sqs(SqsConfig),
    /// An SNS topic.
    Sns(SnsConfig),
    /// A Pub/Sub topic.
    PubSub(PubSubConfig),
}

/// One named sink as configured: a `[sinks.<name>]` table, or the sink a variable describes.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkConfig {
    /// The name routes use (`file`, `sqs`, `sns` and `pubsub` on the variables' path).
    pub name: String,
    /// Where it delivers, with the destination's own settings.
    pub target: Target,
    /// Which relay attributes it sends, and static ones it adds.
    pub selection: Selection,
}

/// A `[sinks.<name>]` table as written (a sink spec): `type`, the destination's keys (each refused when it
/// is not one of that destination's) and the keys every destination takes.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkSpec {
    /// The destination.
    pub target: Target,
    /// `attributes` and `extra_attributes`.
    pub selection: Selection,
}

impl<'de> Deserialize<'de> for SinkSpec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut table = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
        let kind = match table.remove("type") {
            Some(serde_json::Value::String(kind)) => kind,
            Some(_) => return Err(D::Error::custom("type: expected a string")),
            None => return Err(D::Error::missing_field("type")),
        };
        let mut common = serde_json::Map::new();
        for key in Selection::KEYS {
            if let Some(value) = table.remove(key) {
                common.insert(key.to_owned(), value);
            }
        }
        let selection = serde_json::from_value(common.into()).map_err(D::Error::custom)?;
        let own = serde_json::Value::Object(table);
        let target = match kind.as_str() {
            "file" => serde_json::from_value(own).map(Target::File),
            "sqs" => serde_json::from_value(own).map(Target::Sqs),
            "sns" => serde_json::from_value(own).map(Target::Sns),
            "pubsub" => serde_json::from_value(own).map(Target::PubSub),
            other => {
                return Err(D::Error::unknown_variant(
                    other,
                    &["file", "sqs", "sns", "pubsub"],
                ));
            }
        }
        .map_err(|e| D::Error::custom(format!("a {kind} sink: {e}")))?;
        Ok(Self { target, selection })
    }
}

/// The same table back: `type`, the destination's keys (its defaults left out) and the common
/// keys that are set.
impl Serialize for SinkSpec {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Table<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            #[serde(flatten)]
            own: &'a Target,
            #[serde(flatten)]
            selection: &'a Selection,
        }
        let table = Table {
            kind: self.target.kind(),
            own: &self.target,
            selection: &self.selection,
        };
        table.serialize(serializer)
    }
}

impl SinkSpec {
    /// The configured sink this table describes under `name`.
    pub fn named(&self, name: &str) -> SinkConfig {
        SinkConfig {
            name: name.to_owned(),
            target: self.target.clone(),
            selection: self.selection.clone(),
        }
    }
}

/// The tables under `[sinks]`, by name.
pub type SinkSpecs = BTreeMap<String, SinkSpec>;

impl Target {
    /// The destination's own configuration: the one place a new destination adds an arm
    /// besides its `type` (`SinkSpec`'s reading) and its client ([`Target::build`]).
    fn config(&self) -> &dyn TargetConfig {
        match self {
            Self::File(c) => c,
            Self::Sqs(c) => c,
            Self::Sns(c) => c,
            Self::PubSub(c) => c,
        }
    }

    /// The destination's type, as `type` names it.
    pub fn kind(&self) -> &'static str {
        self.config().kind()
    }

    /// Largest `Message::encoded_size` the destination takes; larger notifications are
    /// refused with 413 before any sink is called.
    pub fn max_message_bytes(&self) -> Option<usize> {
        self.config().max_message_bytes()
    }

    /// The shape of every message this destination sends, checked against what it takes.
    pub fn shape(&self, selection: &Selection) -> Result<Shape, ShapeError> {
        self.config().shape(selection)
    }

    /// The resource the destination delivers to, as one stable id (an ARN, a Google resource
    /// name, a file's absolute path): what the ledger records its acknowledgements under, and
    /// what tells two destinations of one name apart. Two configured destinations never share
    /// one (`check_resources`).
    pub fn resource(&self) -> String {
        self.config().resource()
    }

    /// One line describing the destination, for `relay check`.
    pub fn describe(&self) -> String {
        self.config().describe()
    }
}

/// A sink, built: what routes name, the client, and how it shapes each message.
#[derive(Debug, Clone)]
pub struct Destination {
    /// The configured name.
    pub name: String,
    /// What it delivers to ([`Target::resource`]): the ledger's key for it.
    pub resource: String,
    /// The client, built once.
    pub sink: Arc<dyn Sink>,
    /// Attribute selection and id templates.
    pub shape: Shape,
    /// The destination's message size limit, if it has one.
    pub max_message_bytes: Option<usize>,
}

impl Destination {
    /// Pairs a configured sink with its client.
    pub fn new(config: &SinkConfig, sink: Arc<dyn Sink>) -> Result<Self, ShapeError> {
        Ok(Self {
            name: config.name.clone(),
            resource: config.target.resource(),
            sink,
            shape: config.target.shape(&config.selection)?,
            max_message_bytes: config.target.max_message_bytes(),
        })
    }
}

/// Why a sink could not be built at start.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A file that cannot be opened, a client that cannot be built.
    #[error("{0}")]
    Failed(String),
    /// A destination this build leaves out.
    #[error("needs the cargo feature {0:?}, which this build leaves out")]
    NotBuiltIn(&'static str),
}

/// What building clients needs beyond a sink's own table: the shared AWS configuration, loaded
/// once when an SQS or SNS sink exists, and how long their batches wait for company.
#[derive(Debug, Default, Clone, Copy)]
pub struct Clients<'a> {
    #[cfg(feature = "aws")]
    #[cfg_attr(not(any(feature = "sqs", feature = "sns")), allow(dead_code))]
    aws: Option<(&'a aws_config::SdkConfig, std::time::Duration)>,
    lifetime: std::marker::PhantomData<&'a ()>,
}

impl<'a> Clients<'a> {
    /// Clients for SQS and SNS are built from `sdk`; a partial batch of theirs waits at most
    /// `batch_wait` for more messages (`RELAY_BATCH_WAIT_MS`).
    #[cfg(feature = "aws")]
    pub fn with_aws(sdk: &'a aws_config::SdkConfig, batch_wait: std::time::Duration) -> Self {
        Self {
            aws: Some((sdk, batch_wait)),
            lifetime: std::marker::PhantomData,
        }
    }
}

impl Target {
    /// True for destinations that need the shared AWS configuration.
    #[cfg(feature = "aws")]
    pub(crate) fn uses_aws(&self) -> bool {
        matches!(self, Self::Sqs(_) | Self::Sns(_))
    }

    /// Builds the destination's client, once, at start.
    pub async fn build(&self, clients: Clients<'_>) -> Result<Arc<dyn Sink>, BuildError> {
        #[cfg(not(any(feature = "sqs", feature = "sns")))]
        let _ = clients;
        Ok(match self {
            Self::File(c) => Arc::new(
                FileSink::open(&c.path)
                    .await
                    .map_err(|e| BuildError::Failed(format!("cannot open {}: {e}", c.path)))?,
            ),
            #[cfg(feature = "sqs")]
            Self::Sqs(c) => {
                let (sdk, wait) = clients.aws.expect("loaded for SQS");
                Arc::new(c.build(sdk, wait).await.map_err(BuildError::Failed)?)
            }
            #[cfg(feature = "sns")]
            Self::Sns(c) => {
                let (sdk, wait) = clients.aws.expect("loaded for SNS");
                Arc::new(c.build(sdk, wait))
            }
            #[cfg(feature = "pubsub")]
            Self::PubSub(c) => Arc::new(
                c.build()
                    .await
                    .map_err(|e| BuildError::Failed(format!("cannot build the client: {e}")))?,
            ),
            #[cfg(not(feature = "sqs"))]
            Self::Sqs(_) => return Err(BuildError::NotBuiltIn("sqs")),
            #[cfg(not(feature = "sns"))]
            Self::Sns(_) => return Err(BuildError::NotBuiltIn("sns")),
            #[cfg(not(feature = "pubsub"))]
            Self::PubSub(_) => return Err(BuildError::NotBuiltIn("pubsub")),
        })
    }
}
