//! The archive's records through a Pub/Sub topic
//! (`RELAY_ARCHIVE_STREAM=pubsub://projects/P/topics/T`) whose Cloud Storage subscription
//! writes them to the `gs://` archive: each record is one message, its data the sealed line
//! without its newline (the subscription's text format writes each message's data followed by
//! one), published together when queued together. Pub/Sub answers once it holds a message
//! durably; the subscription writes what it received as objects of lines under the archive's
//! prefix and hour.

use bytes::Bytes;
use google_cloud_pubsub::client::Publisher;
use google_cloud_pubsub::model::Message;

use super::ArchiveError;
use super::stream::RecordStream;
use crate::sink::SinkError;
use crate::sink::pubsub::{PubSubTopic, classify, publisher};

/// The largest message data Pub/Sub takes: 10 MB.
const MAX_MESSAGE_BYTES: usize = 10_000_000;

/// A topic taking the archive's records.
#[derive(Debug)]
pub(crate) struct PubSubStream {
    topic: PubSubTopic,
    publisher: Publisher,
}

impl PubSubStream {
    /// Publishes to `topic`, through the emulator at `emulator_host` when there is one.
    pub(crate) async fn new(
        topic: &PubSubTopic,
        emulator_host: Option<&str>,
    ) -> Result<Self, ArchiveError> {
        let publisher = publisher(topic, emulator_host)
            .await
            .map_err(|e| ArchiveError::Open(format!("pubsub://{topic}: {e}")))?;
        Ok(Self {
            topic: topic.clone(),
            publisher,
        })
    }

    /// Where it is, for errors and record ids.
    fn url(&self) -> String {
        format!("pubsub://{}", self.topic)
    }
}

#[async_trait::async_trait]
impl RecordStream for PubSubStream {
    fn max_line_bytes(&self) -> usize {
        MAX_MESSAGE_BYTES
    }

    async fn append(&self, lines: &[Bytes]) -> Vec<Result<String, ArchiveError>> {
        // Every publish starts before any is awaited, so the client sends them together.
        let pending: Vec<_> = (lines.iter())
            .map(|line| {
                let data = line.strip_suffix(b"\n").unwrap_or(line);
                let message = Message::new().set_data(line.slice_ref(data));
                self.publisher.publish(message)
            })
            .collect();
        let mut answers = Vec::with_capacity(pending.len());
        for future in pending {
            answers.push(match future.await {
                Ok(id) => Ok(format!("{}/{id}", self.url())),
                Err(e) => Err(match classify(e) {
                    SinkError::Retryable(e) => {
                        ArchiveError::Unavailable(format!("{}: {e}", self.url()))
                    }
                    SinkError::Permanent(e) => {
                        ArchiveError::Refused(format!("{}: {e}", self.url()))
                    }
                }),
            });
        }
        answers
    }
}
