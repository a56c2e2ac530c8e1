//! The archive as a destination ([`destination`]): every verified notification's [`Record`],
//! sealed, written before the relay answers.
//!
//! Records written while an earlier write is in flight leave together, as one object: one
//! PUT, one file and one sync for the lot. The batching is the SQS sink's
//! ([`BatchedSink`]), with no wait: a lone record leaves at once, and only what queued
//! behind a write shares the next. A record written alone is the object `YYYY/MM/DD/HH/<dedup
//! key>` ([`object_key`]), so that a retry in the same hour finds it there; records written
//! together are the lines of one object, `YYYY/MM/DD/HH/batch-<32 hex digits>`, one sealed
//! record per line, in the hour each was received in. Readers take both alike ([`records`]).

use std::sync::Arc;

use bytes::Bytes;

use super::seal::SEAL_BYTES;
use super::{Archive, ArchiveError, ArchiveKey, RESOURCE_PREFIX, Record, SINK_NAME, Written};
use super::{RecordStream, hour_prefix, object_key};
use crate::sink::batch::{BatchedSink, Limits, SendBatch};
use crate::sink::{Destination, Message, Receipt, Shape, SinkError};

/// The most records one object holds.
pub(crate) const BATCH_RECORDS: usize = 256;

/// The most bytes of records one object holds, unless a single record is larger.
pub(crate) const BATCH_BYTES: usize = 4 * 1024 * 1024;

/// How records leave: one object in flight, and what queued behind it in the next (a lone
/// record at once); as many records waiting as a burst brings (the relay's admission bounds
/// them before this does).
const LIMITS: Limits = Limits {
    max_entries: BATCH_RECORDS,
    max_bytes: BATCH_BYTES,
    max_in_flight: 1,
    max_queued: 65_536,
    linger: std::time::Duration::ZERO,
};

/// The destination named `archive` writing to `archive`, sealing with `key`, known by its
/// resource `archive:<url>`; its messages are records already ([`Record::message`]), never
/// shaped. With a `stream`, records go through that engine, which writes the archive's objects
/// (a record larger than the engine takes is an object of its own). Each record's message id
/// is the key of the object holding it, or the engine's id for it.
pub fn destination(
    archive: Arc<dyn Archive>,
    key: ArchiveKey,
    stream: Option<Arc<dyn RecordStream>>,
) -> Destination {
    let resource = format!("{RESOURCE_PREFIX}{}", archive.url());
    let writer = Arc::new(Writer {
        archive,
        key,
        stream,
    });
    Destination {
        name: SINK_NAME.to_owned(),
        resource,
        sink: Arc::new(BatchedSink::new(SINK_NAME.to_owned(), writer, LIMITS)),
        shape: Shape::default(),
        max_message_bytes: None,
    }
}

/// The records an object holds, each named: the object's key when it holds one, `<key>#<n>`
/// (from 1) for the lines of a batch. Blank lines are skipped, so an empty object holds no
/// record; a line that is not a record is the reader's to refuse.
pub fn records(key: &str, object: &Bytes) -> Vec<(String, Bytes)> {
    let lines: Vec<Bytes> = object
        .split(|&b| b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .map(|line| object.slice_ref(line))
        .collect();
    match lines.len() {
        1 => lines.into_iter().map(|l| (key.to_owned(), l)).collect(),
        _ => (lines.into_iter().enumerate())
            .map(|(i, line)| (format!("{key}#{}", i + 1), line))
            .collect(),
    }
}

/// Whether `key` names an object the relay wrote itself: a record under its dedup key (a DSS or
/// other sender's key, `refused-<hash>`) or a batch (`batch-<32 hex>`). The relay files those
/// under the hour it received their records in; an engine (`RELAY_ARCHIVE_STREAM`) names its
/// objects by when it started them, so that one may hold records of the next hour too.
pub fn written_by_relay(key: &str) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key);
    let hex = |text: &str, digits: usize| {
        text.len() == digits && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let record = name.strip_prefix(super::REFUSED_PREFIX).unwrap_or(name);
    hex(record, 64)
        || name
            .strip_prefix("batch-")
            .is_some_and(|batch| hex(batch, 32))
}

/// The most bytes of records in an object an engine writes (`RELAY_ARCHIVE_STREAM`) that
/// readers take: the aws-relay module has Firehose write at most 5 MiB at a time, and a
/// batch it takes in one call may carry it past that.
const ENGINE_OBJECT_BYTES: usize = 16 * 1024 * 1024;

/// The largest object readers take from an archive whose relays' bodies are at most
/// `max_body_bytes`: one record alone, a batch of the relay's own, or an engine's object.
pub fn object_limit(max_body_bytes: usize) -> usize {
    super::record_limit(max_body_bytes).saturating_add(BATCH_BYTES.max(ENGINE_OBJECT_BYTES))
}

/// Writes records to the archive, sealed with its key.
struct Writer {
    archive: Arc<dyn Archive>,
    key: ArchiveKey,
    stream: Option<Arc<dyn RecordStream>>,
}

/// What became of the records at these indices of a batch.
type Written1 = Vec<(usize, Result<String, ArchiveError>)>;

#[async_trait::async_trait]
impl SendBatch for Writer {
    async fn send_many(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
        let lines: Vec<Bytes> = batch.iter().map(|m| self.line(m)).collect();
        let (streamed, objects): (Vec<usize>, Vec<usize>) = (0..batch.len()).partition(|&i| {
            (self.stream.as_ref()).is_some_and(|s| lines[i].len() <= s.max_line_bytes())
        });
        let (streamed, objects) = futures_util::future::join(
            self.append(&streamed, &lines),
            self.write_objects(&objects, batch, &lines),
        )
        .await;
        let mut receipts: Vec<Option<Result<Receipt, SinkError>>> = Vec::new();
        receipts.resize_with(batch.len(), || None);
        for (i, written) in streamed.into_iter().chain(objects) {
            receipts[i] = Some(
                written
                    .map(|key| Receipt::new(Some(key)))
                    .map_err(|e| sink_error(&e)),
            );
        }
        receipts.into_iter().flatten().collect()
    }

    fn size(&self, message: &Message) -> usize {
        message.payload.len() + SEAL_BYTES + 1
    }

    async fn warm(&self) -> Result<(), SinkError> {
        let warm_stream = async {
            match &self.stream {
                Some(stream) => stream.warm().await,
                None => Ok(()),
            }
        };
        let (archive, stream) = futures_util::future::join(self.archive.warm(), warm_stream).await;
        archive
            .and(stream)
            .map_err(|e| SinkError::Retryable(Box::new(e)))
    }
}

/// An unavailable archive is worth retrying; any other error waits for an operator.
fn sink_error(error: &ArchiveError) -> SinkError {
    match error {
        ArchiveError::Unavailable(e) => SinkError::Retryable(e.clone().into()),
        e => SinkError::Permanent(e.to_string().into()),
    }
}

impl Writer {
    /// `message`'s record, sealed, and a newline.
    fn line(&self, message: &Message) -> Bytes {
        let mut line = self.key.seal(&message.payload);
        line.push(b'\n');
        Bytes::from(line)
    }

    /// Sends the records at `indices` through the stream.
    async fn append(&self, indices: &[usize], lines: &[Bytes]) -> Written1 {
        let Some(stream) = self.stream.as_ref().filter(|_| !indices.is_empty()) else {
            return Vec::new();
        };
        let taken: Vec<Bytes> = indices.iter().map(|&i| lines[i].clone()).collect();
        indices
            .iter()
            .copied()
            .zip(stream.append(&taken).await)
            .collect()
    }

    /// Writes the records at `indices` as objects: those of one hour together, one alone
    /// under its own key.
    async fn write_objects(
        &self,
        indices: &[usize],
        batch: &[Message],
        lines: &[Bytes],
    ) -> Written1 {
        // Usually one hour; two when a batch spans the hour's turn.
        let mut hours: Vec<(String, Vec<usize>)> = Vec::new();
        for &i in indices {
            let hour = hour_prefix(batch[i].received_at);
            match hours.iter_mut().find(|(h, _)| *h == hour) {
                Some((_, members)) => members.push(i),
                None => hours.push((hour, vec![i])),
            }
        }
        let written = futures_util::future::join_all(hours.iter().map(|(hour, members)| async {
            match members.as_slice() {
                &[i] => {
                    let line = &lines[i];
                    self.write(&batch[i], line.slice(..line.len() - 1)).await
                }
                many => {
                    self.write_lines(hour, many.iter().map(|&i| &lines[i]))
                        .await
                }
            }
        }))
        .await;
        let mut answers = Vec::with_capacity(indices.len());
        for ((_, members), result) in hours.iter().zip(written) {
            answers.extend(members.iter().map(|&i| (i, result.clone())));
        }
        answers
    }

    /// Writes lines of one hour as one new object; its key.
    async fn write_lines<'a>(
        &self,
        hour: &str,
        lines: impl Iterator<Item = &'a Bytes>,
    ) -> Result<String, ArchiveError> {
        let mut body = Vec::new();
        for line in lines {
            body.extend_from_slice(line);
        }
        let mut name = [0u8; 16];
        getrandom::fill(&mut name).map_err(|e| ArchiveError::Unavailable(e.to_string()))?;
        let key = format!("{hour}batch-{}", hex::encode(name));
        match self.archive.put(&key, Bytes::from(body)).await? {
            Written::Created => Ok(key),
            // 128 random bits taken already: someone wrote there on purpose.
            Written::Existed => Err(ArchiveError::Unavailable(format!(
                "{key}: a new batch's name is taken; written under another on the retry"
            ))),
        }
    }

    /// Writes `message`'s record sealed under its notification's key; where an object that is not its
    /// record is found there, beside it. The key written.
    async fn write(&self, message: &Message, sealed: Bytes) -> Result<String, ArchiveError> {
        let key = object_key(message.received_at, &message.dedup_key);
        if self.create(&key, &sealed, &message.payload).await? {
            return Ok(key);
        }
        // A name only the key can tell, one per notification: its retries find their record.
        let beside = format!("{key}.{}", self.key.name_of(&message.dedup_key));
        tracing::warn!(
            key,
            beside,
            "The object at a notification's archive key is not its record; it is left alone, and the record written beside it."
        );
        match self.create(&beside, &sealed, &message.payload).await? {
            true => Ok(beside),
            false => Err(ArchiveError::Refused(format!(
                "{beside}: an object that is not this notification's record is there too"
            ))),
        }
    }

    /// Creates `key`; true when it is new, or holds this notification's record already.
    async fn create(
        &self,
        key: &str,
        sealed: &Bytes,
        document: &[u8],
    ) -> Result<bool, ArchiveError> {
        if self.archive.put(key, sealed.clone()).await? == Written::Created {
            return Ok(true);
        }
        // This notification's earlier record is about as large as this one.
        let limit = sealed.len().saturating_mul(2).saturating_add(64 * 1024);
        let found = match self.archive.read(key, limit).await {
            Ok(Some(found)) => found,
            Err(e @ ArchiveError::Unavailable(_)) => return Err(e),
            // Gone since (a dangling link), a folder, larger than this notification's record.
            Ok(None) | Err(ArchiveError::Corrupt { .. } | ArchiveError::TooLarge { .. }) => {
                return Ok(false);
            }
            // Most likely a missing read grant: said, since it costs the retries in this hour.
            Err(e) => {
                tracing::warn!(key, error = %e, "The object at a notification's archive key cannot be read back, so it is not counted as its record; the relay needs read access to the archive's prefix.");
                return Ok(false);
            }
        };
        let ours = Record::from_bytes(document).map_err(|error| ArchiveError::Corrupt {
            key: key.to_owned(),
            error,
        })?;
        let same = Record::open(&self.key, &found).is_ok_and(|r| r.same_notification(&ours));
        if same {
            tracing::debug!(key, "Already archived by an earlier attempt.");
        }
        Ok(same)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::DirArchive;
    use std::time::{Duration, SystemTime};

    fn record(n: usize, received_at: SystemTime) -> Record {
        let dedup_key = format!("{n:064x}");
        Record {
            received_at,
            dedup_key: dedup_key.clone(),
            attributes: vec![("relay.dedup_key".into(), dedup_key)],
            request: serde_json::json!({"path": "/", "query": {}, "headers": {}}),
            dropped_headers: Vec::new(),
            payload: Bytes::from(format!("{{\"n\": {n},\n\"line\": \"two\"}}")),
            refused: None,
        }
    }

    /// Publishes `written` to `sink` at once: where each record went.
    async fn publish_all(sink: &dyn crate::sink::Sink, written: &[Record]) -> Vec<String> {
        let messages: Vec<Message> = written.iter().map(Record::message).collect();
        let receipts = futures_util::future::join_all(messages.iter().map(|m| sink.publish(m)));
        let receipts = receipts.await.into_iter();
        receipts.map(|r| r.unwrap().message_id.unwrap()).collect()
    }

    #[test]
    fn the_relay_knows_its_own_objects_from_an_engines() {
        let key = "d649e099e93e44b9b1682b362695caccd4e7ad961063788cb05690dec2ac6f38";
        for own in [
            format!("notifications/2026/12/05/14/{key}"),
            format!("2026/12/05/14/refused-{key}"),
            "2026/12/05/14/batch-0123456789abcdef0123456789abcdef".to_owned(),
        ] {
            assert!(written_by_relay(&own), "{own}");
        }
        for engine in [
            "notifications/2026/12/05/14/dss-relay-archive-1-2026-12-05-14-58-01-8f1c2d3e-aaaa",
            "notifications/2026/12/05/14/58_01_3a9c0e4e-7d2b-4b55-9b1e-0c4f6b2d7e10",
            "2026/12/05/14/batch-0123",
            "2026/12/05/14/D649E099E93E44B9B1682B362695CACCD4E7AD961063788CB05690DEC2AC6F38",
        ] {
            assert!(!written_by_relay(engine), "{engine}");
        }
    }

    #[test]
    fn an_object_is_its_lines_named_by_their_object() {
        let one = Bytes::from_static(b"{\"a\": 1}");
        assert_eq!(records("h/k", &one), [("h/k".to_owned(), one.clone())]);
        let batch = Bytes::from_static(b"{\"a\": 1}\n\n{\"b\": 2}\n \n{\"c\": 3}\n");
        let names: Vec<(String, Bytes)> = records("h/batch", &batch);
        assert_eq!(
            names,
            [
                ("h/batch#1".to_owned(), Bytes::from_static(b"{\"a\": 1}")),
                ("h/batch#2".to_owned(), Bytes::from_static(b"{\"b\": 2}")),
                ("h/batch#3".to_owned(), Bytes::from_static(b"{\"c\": 3}")),
            ]
        );
        // Nothing but blank lines, or nothing: no record.
        assert!(records("h/k", &Bytes::from_static(b"\n \n")).is_empty());
        assert!(records("h/k", &Bytes::new()).is_empty());
    }

    /// Records published together leave as one object per hour, each a sealed line that opens
    /// as its record, and each answered with the key of the object holding it; a record
    /// published alone is the object named by its dedup key.
    #[tokio::test]
    async fn records_published_together_share_one_object_per_hour() {
        let dir = tempfile::tempdir().unwrap();
        let archive: Arc<dyn Archive> = Arc::new(DirArchive::open(dir.path()).unwrap());
        let key = ArchiveKey::new(b"records-published-together").unwrap();
        let sink = destination(Arc::clone(&archive), key.clone(), None).sink;
        let hour = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_658_800);
        let written: Vec<Record> = (0..50)
            .map(|n| record(n, hour + Duration::from_secs(3000 + 30 * n as u64)))
            .collect();
        // On this test's one thread, all 50 are queued before the writer runs.
        let objects = publish_all(&*sink, &written).await;
        // 3000 s + 30 s × 20 passes the hour: 20 in the first, 30 in the next.
        let (first, second) = (&objects[0], &objects[20]);
        assert!(first.starts_with("2025/12/02/07/batch-"), "{first}");
        assert!(second.starts_with("2025/12/02/08/batch-"), "{second}");
        assert!(objects[..20].iter().all(|o| o == first), "{objects:?}");
        assert!(objects[20..].iter().all(|o| o == second), "{objects:?}");
        for (object, range) in [(first, 0..20), (second, 20..50)] {
            let bytes = archive.get(object).await.unwrap().unwrap();
            let lines = records(object, &bytes);
            assert_eq!(lines.len(), range.len());
            for ((name, line), expected) in lines.iter().zip(&written[range]) {
                let opened = Record::open(&key, line).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(opened.same_notification(expected), "{name}");
            }
        }
        let alone = record(99, hour);
        let receipt = sink.publish(&alone.message()).await.unwrap();
        let name = object_key(hour, &alone.dedup_key);
        assert_eq!(receipt.message_id.as_deref(), Some(name.as_str()));
        let bytes = archive.get(&name).await.unwrap().unwrap();
        assert!(
            Record::open(&key, &bytes)
                .unwrap()
                .same_notification(&alone)
        );
    }

    /// Records a stream's calls; takes lines of at most 600 bytes.
    #[derive(Debug, Default)]
    struct Recording(std::sync::Mutex<Vec<Vec<Bytes>>>);

    #[async_trait::async_trait]
    impl RecordStream for Recording {
        fn max_line_bytes(&self) -> usize {
            600
        }
        async fn append(&self, lines: &[Bytes]) -> Vec<Result<String, ArchiveError>> {
            let mut calls = self.0.lock().unwrap();
            calls.push(lines.to_vec());
            let call = calls.len();
            (1..=lines.len())
                .map(|i| Ok(format!("{call}/{i}")))
                .collect()
        }
    }

    /// Through a stream, records published together are one call of sealed lines, each
    /// answered with the stream's id; a record larger than the stream takes is an object of its
    /// own in the archive.
    #[tokio::test]
    async fn through_a_stream_records_leave_as_lines_and_a_large_one_as_an_object() {
        let dir = tempfile::tempdir().unwrap();
        let archive: Arc<dyn Archive> = Arc::new(DirArchive::open(dir.path()).unwrap());
        let key = ArchiveKey::new(b"records-through-a-stream").unwrap();
        let stream = Arc::new(Recording::default());
        let streamed: Arc<dyn RecordStream> = Arc::<Recording>::clone(&stream);
        let sink = destination(Arc::clone(&archive), key.clone(), Some(streamed)).sink;
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_658_800);
        let mut written: Vec<Record> = (0..5).map(|n| record(n, at)).collect();
        written[4].payload = Bytes::from(format!("\"{}\"", "x".repeat(800)));
        let ids = publish_all(&*sink, &written).await;
        assert_eq!(ids[..4], ["1/1", "1/2", "1/3", "1/4"]);
        let calls = stream.0.lock().unwrap().clone();
        assert_eq!(calls.len(), 1, "one call for the four that fit");
        for (line, expected) in calls[0].iter().zip(&written) {
            assert_eq!(line.last(), Some(&b'\n'));
            let opened = Record::open(&key, &line[..line.len() - 1]).unwrap();
            assert!(opened.same_notification(expected));
        }
        assert_eq!(ids[4], object_key(at, &written[4].dedup_key));
        let object = archive.get(&ids[4]).await.unwrap().unwrap();
        assert!(
            Record::open(&key, &object)
                .unwrap()
                .same_notification(&written[4])
        );
    }
}
