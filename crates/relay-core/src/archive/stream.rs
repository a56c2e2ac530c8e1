//! An engine that writes the archive's objects for the relay (`RELAY_ARCHIVE_STREAM`): the
//! relay hands it each sealed record as one line, and the engine batches the lines into
//! objects under the archive's prefix and hour, as the relay's own batches are
//! ([`records`](super::records) reads both alike). The relay's answer still waits for the
//! engine to accept each record durably.
//!
//! - `firehose://<delivery stream>`: Amazon Data Firehose, delivering to the `s3://` archive
//!   (cargo feature `firehose`). Its objects are `PREFIX/YYYY/MM/DD/HH/<stream>-…`, by the hour
//!   in which Firehose received the oldest record of each.
//! - `pubsub://projects/<project>/topics/<topic>`: a Pub/Sub topic whose Cloud Storage
//!   subscription writes the `gs://` archive (cargo feature `pubsub`). Its objects are
//!   `PREFIX/YYYY/MM/DD/HH/mm_ss_<id>`, by the time the subscription started each.
//!
//! Either engine fills an object for minutes after naming it: readers list the hours around
//! their window too.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use super::{ArchiveError, ArchiveUrl};
use crate::cloud::Cloud;
use crate::sink::pubsub::PubSubTopic;

/// Where the archive's records are written through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamUrl {
    /// An Amazon Data Firehose delivery stream, by name.
    Firehose {
        /// The delivery stream's name.
        name: String,
    },
    /// A Pub/Sub topic with a Cloud Storage subscription.
    PubSub {
        /// The topic.
        topic: PubSubTopic,
        /// `PUBSUB_EMULATOR_HOST`, set by the configuration: publish to that emulator instead.
        emulator_host: Option<String>,
    },
}

const STREAM_FORMS: &str =
    "firehose://<delivery stream name> or pubsub://projects/<project>/topics/<topic>";

impl std::str::FromStr for StreamUrl {
    type Err = crate::text::InvalidValue;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        // Delivery stream names: 1 to 64 of [a-zA-Z0-9_.-].
        let valid = |name: &str| {
            (1..=64).contains(&name.len())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        };
        let refuse = || format!("expected {STREAM_FORMS}, got {text:?}").into();
        if let Some(topic) = text.strip_prefix("pubsub://") {
            let topic = topic.parse().map_err(|_| refuse())?;
            return Ok(Self::PubSub {
                topic,
                emulator_host: None,
            });
        }
        match text.strip_prefix("firehose://") {
            Some(name) if valid(name) => Ok(Self::Firehose {
                name: name.to_owned(),
            }),
            _ => Err(refuse()),
        }
    }
}

crate::text::deserialize_from_text!(StreamUrl, STREAM_FORMS);

impl fmt::Display for StreamUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Firehose { name } => write!(f, "firehose://{name}"),
            Self::PubSub { topic, .. } => write!(f, "pubsub://{topic}"),
        }
    }
}

impl StreamUrl {
    /// Why this engine cannot write to `archive`, if it cannot: Firehose delivers to S3, a
    /// Cloud Storage subscription to Cloud Storage.
    pub fn refuses(&self, archive: &ArchiveUrl) -> Option<String> {
        let delivers_to = match (self, archive) {
            (Self::Firehose { .. }, ArchiveUrl::S3 { .. }) => return None,
            (Self::PubSub { .. }, ArchiveUrl::Gcs { .. }) => return None,
            (Self::Firehose { .. }, _) => "an s3://",
            (Self::PubSub { .. }, _) => "a gs://",
        };
        Some(format!(
            "{self} delivers to {delivers_to} archive; RELAY_ARCHIVE_URL is {archive}"
        ))
    }
}

/// An engine taking the archive's records.
#[async_trait::async_trait]
pub trait RecordStream: Send + Sync + fmt::Debug {
    /// The largest line it takes; a larger record is written as an object of its own.
    fn max_line_bytes(&self) -> usize;
    /// Writes each line (a sealed record and its newline), answering each, in order, with the
    /// engine's id for it or why it was not taken.
    async fn append(&self, lines: &[Bytes]) -> Vec<Result<String, ArchiveError>>;
    /// Opens its connection before the first record; any answer will do.
    async fn warm(&self) -> Result<(), ArchiveError> {
        Ok(())
    }
}

/// Opens the engine at `url`, its client built from `cloud`.
#[cfg_attr(not(feature = "firehose"), allow(unused_variables))]
pub(crate) async fn open_stream(
    url: &StreamUrl,
    cloud: &Cloud,
) -> Result<Arc<dyn RecordStream>, ArchiveError> {
    match url {
        #[cfg(feature = "firehose")]
        StreamUrl::Firehose { name } => Ok(Arc::new(
            super::firehose::FirehoseStream::new(cloud.aws().await, name).await?,
        )),
        #[cfg(feature = "pubsub")]
        StreamUrl::PubSub {
            topic,
            emulator_host,
        } => Ok(Arc::new(
            super::pubsub::PubSubStream::new(topic, emulator_host.as_deref()).await?,
        )),
        #[allow(unreachable_patterns)]
        other => Err(ArchiveError::Open(format!(
            "{other}: this build leaves out the cargo feature for this engine"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_urls_parse_and_name_their_archive() {
        let url: StreamUrl = "firehose://dss-relay-archive".parse().unwrap();
        assert_eq!(url.to_string(), "firehose://dss-relay-archive");
        let s3: ArchiveUrl = "s3://bucket-name/notifications".parse().unwrap();
        assert_eq!(url.refuses(&s3), None);
        let folder: ArchiveUrl = "target/run/archive".parse().unwrap();
        assert!(url.refuses(&folder).unwrap().contains("s3://"));
        let gs: ArchiveUrl = "gs://bucket-name/notifications".parse().unwrap();
        assert!(url.refuses(&gs).unwrap().contains("s3://"));
        let topic = "pubsub://projects/hca-relay/topics/dss-relay-archive";
        let url: StreamUrl = topic.parse().unwrap();
        assert_eq!(url.to_string(), topic);
        assert_eq!(url.refuses(&gs), None);
        assert!(url.refuses(&s3).unwrap().contains("gs://"));
        assert!(url.refuses(&folder).unwrap().contains("gs://"));
        for bad in [
            "",
            "firehose://",
            "firehose://a/b",
            "kinesis://x",
            "firehose://a b",
            "pubsub://",
            "pubsub://dss-relay-archive",
            "pubsub://projects/p/subscriptions/sub",
        ] {
            assert!(bad.parse::<StreamUrl>().is_err(), "{bad:?} was taken");
        }
    }
}
