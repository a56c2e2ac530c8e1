//! The archive (`RELAY_ARCHIVE_URL`): every verified notification's record, written before the
//! relay answers 2xx, so that what reached the relay can be replayed after the DSS gave up.
//!
//! A record ([`Record`]) holds the payload bytes exactly as received, the relay's attributes,
//! the request's path, query and headers (for routes that match `$request`), the receipt time
//! and the dedup key, as one JSON document on one line. Objects list by time, under the hour a
//! record was received in: a record written alone is `PREFIX/YYYY/MM/DD/HH/<dedup key>`
//! ([`object_key`]), and a retry within the same hour finds it there and counts it as written
//! ([`Written::Existed`]); records written together are the lines of one object
//! (`…/HH/batch-<32 hex digits>`, see [`destination`]). A replay lists the hours of its window
//! and nothing else, and reads every object's lines ([`records`]). Objects are only ever
//! created, never overwritten.
//!
//! The archive is a destination like the others ([`destination`], named [`SINK_NAME`]): every
//! verified notification is routed to it besides its routes, filtered ones included, it is
//! written concurrently with them and the ledger records its acknowledgement (the object's key)
//! like theirs.
//!
//! Records are sealed ([`ArchiveKey`]): a line counts as a notification's record only when
//! it opens under the archive's key and holds that notification. Whatever else is found at a
//! record's key (another record, a folder, a link, an object of someone who may write to the
//! bucket) is left alone, and the record is written beside it, under `<key>.<16 hex digits>`
//! that only a holder of the key can tell (`ArchiveKey::name_of`).
//!
//! Stores: a local folder ([`dir`]), S3 (`s3://BUCKET/PREFIX`, cargo feature `s3`) and Cloud
//! Storage (`gs://BUCKET/PREFIX`, cargo feature `gcs`).

pub mod dir;
#[cfg(feature = "firehose")]
mod firehose;
#[cfg(feature = "gcs")]
mod gcs;
#[cfg(feature = "pubsub")]
mod pubsub;
mod record;
#[cfg(feature = "s3")]
mod s3;
mod seal;
mod sink;
mod stream;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use crate::cloud::Cloud;
use crate::text::StoreUrl;

use bytes::Bytes;

pub use dir::DirArchive;
#[cfg(feature = "gcs")]
use gcs::GcsArchive;
pub use record::{KEPT_HEADERS, REFUSED_PREFIX, Record, RecordError, Refused, is_secret_header};
#[cfg(feature = "s3")]
use s3::S3Archive;
pub use seal::ArchiveKey;
pub(crate) use seal::MIN_KEY_BYTES;
pub use sink::{destination, object_limit, records, written_by_relay};
pub(crate) use stream::open_stream;
pub use stream::{RecordStream, StreamUrl};

/// The archive's name among the destinations: in answers, the ledger and `relay trace`. A
/// configured sink may not take it while the archive is on.
pub const SINK_NAME: &str = "archive";

/// How the archive's resource begins: `archive:<url>`, its folder's canonical path for a folder.
pub(crate) const RESOURCE_PREFIX: &str = "archive:";

/// True for a destination the ledger names that is the archive: by its resource, or by the name
/// an earlier release recorded it under.
pub fn is_archive(destination: &str) -> bool {
    destination == SINK_NAME || destination.starts_with(RESOURCE_PREFIX)
}

/// Where the archive lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveUrl {
    /// An S3 bucket, under a prefix (empty or ending in `/`).
    S3 {
        /// The bucket.
        bucket: String,
        /// The key prefix.
        prefix: String,
    },
    /// A Cloud Storage bucket, under a prefix (empty or ending in `/`).
    Gcs {
        /// The bucket.
        bucket: String,
        /// The object name prefix.
        prefix: String,
    },
    /// A folder on this machine.
    Dir(PathBuf),
}

const URL_FORMS: &str = "a folder, s3://<bucket>/<prefix> or gs://<bucket>/<prefix>";

impl std::str::FromStr for ArchiveUrl {
    type Err = crate::text::InvalidValue;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let refuse = || format!("expected {URL_FORMS}, got {:?}", text.trim());
        let bucket_and_prefix = |bucket: &str, prefix: Option<&str>| -> Option<(String, String)> {
            let prefix = prefix.unwrap_or_default();
            // Bucket names on both clouds: 3 to 63 of [a-z0-9._-], no leading or trailing dot.
            let valid = (3..=63).contains(&bucket.len())
                && bucket
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
            let prefix = prefix.trim_matches('/');
            if !valid || prefix.contains("//") || prefix.contains(['?', '#']) {
                return None;
            }
            let prefix = match prefix.is_empty() {
                true => String::new(),
                false => format!("{prefix}/"),
            };
            Some((bucket.to_owned(), prefix))
        };
        match StoreUrl::parse(text).ok_or_else(refuse)? {
            StoreUrl::Remote { scheme, name, path } if scheme == "s3" || scheme == "gs" => {
                let (bucket, prefix) = bucket_and_prefix(name, path).ok_or_else(refuse)?;
                Ok(match scheme {
                    "s3" => Self::S3 { bucket, prefix },
                    _ => Self::Gcs { bucket, prefix },
                })
            }
            StoreUrl::Local(path) => Ok(Self::Dir(PathBuf::from(path))),
            StoreUrl::Remote { .. } => Err(refuse().into()),
        }
    }
}

crate::text::deserialize_from_text!(ArchiveUrl, URL_FORMS);

impl ArchiveUrl {
    /// The archive as one destination's resource: `archive:<url>`, a folder by its canonical
    /// path (as [`open`] opens it).
    pub fn resource(&self) -> String {
        match self {
            Self::Dir(path) => {
                let path = crate::sink::file::absolute(path);
                format!("{RESOURCE_PREFIX}{}", path.display())
            }
            other => format!("{RESOURCE_PREFIX}{other}"),
        }
    }
}

impl fmt::Display for ArchiveUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            Self::Gcs { bucket, prefix } => write!(f, "gs://{bucket}/{prefix}"),
            Self::Dir(path) => write!(f, "{}", path.display()),
        }
    }
}

/// The key of the object for a notification received at `received_at`, under the archive's
/// prefix: `YYYY/MM/DD/HH/<dedup key>` (UTC).
pub fn object_key(received_at: SystemTime, dedup_key: &str) -> String {
    format!("{}{dedup_key}", hour_prefix(received_at))
}

/// The hour's folder, `YYYY/MM/DD/HH/` (UTC), of a time.
pub fn hour_prefix(at: SystemTime) -> String {
    // 2026-12-02T07:00:00Z
    let text = humantime::format_rfc3339_seconds(at).to_string();
    format!(
        "{}/{}/{}/{}/",
        &text[0..4],
        &text[5..7],
        &text[8..10],
        &text[11..13]
    )
}

/// Every hour's folder from the one holding `since` to the one holding `until`, in order.
pub fn hours(since: SystemTime, until: SystemTime) -> Vec<String> {
    const HOUR: u64 = 3600;
    let secs = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    };
    let (first, last) = (secs(since) / HOUR, secs(until) / HOUR);
    (first..=last)
        .map(|h| hour_prefix(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(h * HOUR)))
        .collect()
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The object is new.
    Created,
    /// An object was already there under that key (an earlier attempt's): it is left alone.
    Existed,
}

/// Why the archive could not answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ArchiveError {
    /// The store could not be reached, throttled the call or timed out: worth retrying.
    #[error("the archive is unavailable: {0}")]
    Unavailable(String),
    /// The store refused the call until an operator acts: a missing bucket, a missing grant.
    #[error("the archive refused the call: {0}")]
    Refused(String),
    /// An object is not a record.
    #[error("{key}: {error}")]
    Corrupt {
        /// The object's key.
        key: String,
        /// What is wrong with it.
        error: RecordError,
    },
    /// The store cannot be opened (a build without its feature, a client that cannot be built).
    #[error("{0}")]
    Open(String),
    /// The object is larger than any record the reader could have written.
    #[error("{key}: larger than {limit} bytes, the largest record a relay writes: not a record")]
    TooLarge {
        /// The object's key.
        key: String,
        /// The limit it passed.
        limit: usize,
    },
}

/// The largest record a relay whose bodies are at most `max_body_bytes` writes: the payload
/// escaped as a JSON string (at most six bytes for one), and room for the rest.
pub(crate) fn record_limit(max_body_bytes: usize) -> usize {
    max_body_bytes.saturating_mul(6).saturating_add(256 * 1024)
}

/// `bytes` with `chunk` added, unless that passes `limit`.
#[cfg(any(feature = "s3", feature = "gcs"))]
fn take_chunk(
    bytes: &mut Vec<u8>,
    chunk: &[u8],
    key: &str,
    limit: usize,
) -> Result<(), ArchiveError> {
    if bytes.len().saturating_add(chunk.len()) > limit {
        return Err(ArchiveError::TooLarge {
            key: key.to_owned(),
            limit,
        });
    }
    bytes.extend_from_slice(chunk);
    Ok(())
}

/// A store of records, keyed under its prefix. Every key it takes and gives is relative to the
/// prefix.
#[async_trait::async_trait]
pub trait Archive: Send + Sync + fmt::Debug {
    /// Where it lives, for logs.
    fn url(&self) -> String;
    /// Creates the object `key` holding `body`, unless one is already there.
    async fn put(&self, key: &str, body: Bytes) -> Result<Written, ArchiveError>;
    /// The keys under `folder` (an hour's, `YYYY/MM/DD/HH/`), in no particular order.
    async fn list(&self, folder: &str) -> Result<Vec<String>, ArchiveError>;
    /// The object `key`, read as it streams in and refused ([`ArchiveError::TooLarge`]) as
    /// soon as it passes `limit` bytes; `None` when there is none.
    async fn read(&self, key: &str, limit: usize) -> Result<Option<Bytes>, ArchiveError>;
    /// The object `key` whatever its size; `None` when there is none. For tests and tools that
    /// wrote it themselves: the relay and `relay replay` [`read`](Self::read) with a limit.
    async fn get(&self, key: &str) -> Result<Option<Bytes>, ArchiveError> {
        self.read(key, usize::MAX).await
    }
    /// Opens the store's connection before the first write (one call that writes nothing; any
    /// answer will do); nothing to open by default.
    async fn warm(&self) -> Result<(), ArchiveError> {
        Ok(())
    }
}

/// Opens the archive at `url`, its client built from `cloud`.
#[cfg_attr(not(feature = "s3"), allow(unused_variables))]
pub async fn open(url: &ArchiveUrl, cloud: &Cloud) -> Result<Arc<dyn Archive>, ArchiveError> {
    match url {
        ArchiveUrl::Dir(path) => Ok(Arc::new(DirArchive::open(path)?)),
        #[cfg(feature = "s3")]
        ArchiveUrl::S3 { bucket, prefix } => {
            Ok(Arc::new(S3Archive::new(cloud, bucket, prefix).await))
        }
        #[cfg(feature = "gcs")]
        ArchiveUrl::Gcs { bucket, prefix } => Ok(Arc::new(GcsArchive::new(bucket, prefix).await?)),
        #[allow(unreachable_patterns)]
        other => Err(ArchiveError::Open(format!(
            "{other}: this build leaves out the cargo feature for this store"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn urls_parse_to_stores() {
        let s3: ArchiveUrl = "s3://relay-archive/dss/".parse().unwrap();
        assert_eq!(
            s3,
            ArchiveUrl::S3 {
                bucket: "relay-archive".into(),
                prefix: "dss/".into()
            }
        );
        assert_eq!(s3.to_string(), "s3://relay-archive/dss/");
        let gs: ArchiveUrl = "gs://relay-archive".parse().unwrap();
        assert_eq!(
            gs,
            ArchiveUrl::Gcs {
                bucket: "relay-archive".into(),
                prefix: String::new()
            }
        );
        let dir: ArchiveUrl = "target/run/archive".parse().unwrap();
        assert_eq!(dir, ArchiveUrl::Dir("target/run/archive".into()));
        for bad in [
            "",
            "s3://",
            "s3://A_B/x",
            "gs://ab",
            "s3://bucket/a//b",
            "ftp://x/y",
        ] {
            assert!(bad.parse::<ArchiveUrl>().is_err(), "{bad:?} was taken");
        }
    }

    #[test]
    fn keys_list_by_hour_in_utc() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_658_800 + 59 * 60);
        assert_eq!(object_key(at, "abc"), "2025/12/02/07/abc");
        let hours = hours(at - Duration::from_secs(3600), at + Duration::from_secs(60));
        assert_eq!(
            hours,
            ["2025/12/02/06/", "2025/12/02/07/", "2025/12/02/08/"]
        );
    }
}
