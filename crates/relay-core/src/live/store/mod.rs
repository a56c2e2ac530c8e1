//! Where the stored routes document lives (`RELAY_ROUTES_URL`), and how it is read and written
//! without losing an update.
//!
//! Every backend reads conditionally (an unchanged document costs one small answer) and writes
//! with compare-and-swap: a write names the version it replaces, or that there was none, and
//! fails with [`WriteError::Conflict`] when someone else wrote first. Writers read again and
//! retry; nothing is overwritten blindly.
//!
//! Backends: a local file (a lock file plus an atomic rename), S3 (conditional GET and PUT on the
//! ETag) and Cloud Storage (preconditions on the generation), each behind its cargo feature.
//!
//! Every read stops at the size limit (`RELAY_ROUTES_MAX_BYTES`, [`DEFAULT_MAX_BYTES`]): a
//! larger document is [`StoreError::TooLarge`], refused on its announced size when the store
//! gives one, and otherwise as soon as its bytes run past the limit, so no more than the limit
//! is ever buffered.

mod file;
#[cfg(feature = "gcs")]
mod gcs;
#[cfg(feature = "s3")]
mod s3;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::cloud::Cloud;

pub use file::FileStore;
#[cfg(feature = "gcs")]
pub use gcs::GcsStore;
#[cfg(feature = "s3")]
pub use s3::S3Store;

/// Where the document is: a local path, `s3://bucket/key` or `gs://bucket/object`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoutesUrl {
    /// A file on this machine.
    File(PathBuf),
    /// An S3 object.
    S3 {
        /// The bucket.
        bucket: String,
        /// The object key.
        key: String,
    },
    /// A Cloud Storage object.
    Gcs {
        /// The bucket.
        bucket: String,
        /// The object name.
        object: String,
    },
}

impl std::str::FromStr for RoutesUrl {
    type Err = crate::text::InvalidValue;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        const FORMS: &str = "a path, s3://<bucket>/<key> or gs://<bucket>/<object>";
        let shown = text.trim();
        let Some(url) = crate::text::StoreUrl::parse(text) else {
            return Err(format!("expected {FORMS}").into());
        };
        let crate::text::StoreUrl::Remote { scheme, name, path } = url else {
            return Ok(Self::File(PathBuf::from(shown)));
        };
        let (bucket, object) = match (scheme, path) {
            ("s3" | "gs", Some(path)) if !name.is_empty() && !path.is_empty() => {
                (name.to_owned(), path.to_owned())
            }
            ("s3" | "gs", _) => {
                let expected = format!("expected {scheme}://<bucket>/<object>, got {shown:?}");
                return Err(expected.into());
            }
            _ => return Err(format!("expected {FORMS}, got {shown:?}").into()),
        };
        Ok(match scheme {
            "s3" => Self::S3 {
                bucket,
                key: object,
            },
            _ => Self::Gcs { bucket, object },
        })
    }
}

crate::text::deserialize_from_text!(
    RoutesUrl,
    "a path, s3://<bucket>/<key> or gs://<bucket>/<object>"
);

impl fmt::Display for RoutesUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            Self::S3 { bucket, key } => write!(f, "s3://{bucket}/{key}"),
            Self::Gcs { bucket, object } => write!(f, "gs://{bucket}/{object}"),
        }
    }
}

/// One version of the document, as the store names it (a content hash, an ETag, a generation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version(pub String);

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a read found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// The version the reader already has.
    Unchanged,
    /// No document: no stored routes.
    Missing,
    /// A document, with its version.
    Document {
        /// The text.
        text: String,
        /// Its version.
        version: Version,
    },
}

/// The largest stored document read by default (`RELAY_ROUTES_MAX_BYTES`): 4 MiB, room for
/// thousands of routes.
pub const DEFAULT_MAX_BYTES: usize = 4 * 1024 * 1024;

/// The store could not be read or written. Every message starts with the document's path or URL.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The path names something other than a regular file: a FIFO, a device, a directory, a
    /// socket. It is never read.
    #[error("{url}: {kind}, not a regular file: the stored routes must be a regular file")]
    NotAFile {
        /// The document's path.
        url: String,
        /// What it is instead ("a FIFO", "a directory", ...).
        kind: &'static str,
    },
    /// The document is larger than the size limit; at most the limit and one byte were read.
    #[error(
        "{url}: the document is larger than {limit} bytes (RELAY_ROUTES_MAX_BYTES); it is not read"
    )]
    TooLarge {
        /// The document's path or URL.
        url: String,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The document is not UTF-8 text.
    #[error("{url}: the document is not UTF-8 text")]
    NotText {
        /// The document's path or URL.
        url: String,
    },
    /// The file store's lock file is a symbolic link or not a regular file; writers refuse it.
    #[error(
        "{url}: the lock file {lock} is {kind}, not a regular file: writers refuse it (remove it; the next writer creates it)"
    )]
    LockNotAFile {
        /// The document's path.
        url: String,
        /// The lock file's path.
        lock: String,
        /// What it is ("a symbolic link", ...).
        kind: &'static str,
    },
    /// Another writer held the file store's lock for longer than the lock timeout.
    #[error(
        "{url}: another writer held the lock on {lock} for {waited:?}; gave up (try again; a crashed writer's lock is released with its process)"
    )]
    LockTimeout {
        /// The document's path.
        url: String,
        /// The lock file's path.
        lock: String,
        /// How long the writer waited.
        waited: Duration,
    },
    /// Reading the document took longer than its deadline.
    #[error("{url}: no answer within {after:?}")]
    Timeout {
        /// The document's path or URL.
        url: String,
        /// The deadline.
        after: Duration,
    },
    /// The file system or the service failed, or this build cannot reach the store.
    #[error("{url}: {message}")]
    Failed {
        /// The document's path or URL.
        url: String,
        /// What went wrong.
        message: String,
    },
}

impl StoreError {
    /// The document's path or URL.
    pub fn url(&self) -> &str {
        match self {
            Self::NotAFile { url, .. }
            | Self::TooLarge { url, .. }
            | Self::NotText { url }
            | Self::LockNotAFile { url, .. }
            | Self::LockTimeout { url, .. }
            | Self::Timeout { url, .. }
            | Self::Failed { url, .. } => url,
        }
    }
}

/// A document's bytes as they arrive, never more than the limit and one byte (the object
/// stores' reads).
#[cfg(any(feature = "s3", feature = "gcs"))]
#[derive(Debug)]
struct Limited {
    url: String,
    limit: usize,
    bytes: Vec<u8>,
}

#[cfg(any(feature = "s3", feature = "gcs"))]
impl Limited {
    /// An empty buffer for the document at `url`; `announced` is the size the store gave, when
    /// it gave one: larger than `limit` is refused before any byte is read.
    fn new(url: String, limit: usize, announced: Option<u64>) -> Result<Self, StoreError> {
        let mut buffer = Self {
            url,
            limit,
            bytes: Vec::new(),
        };
        if let Some(size) = announced {
            if size > limit as u64 {
                return Err(buffer.too_large());
            }
            buffer.bytes.reserve(size as usize);
        }
        Ok(buffer)
    }

    fn too_large(&self) -> StoreError {
        StoreError::TooLarge {
            url: self.url.clone(),
            limit: self.limit,
        }
    }

    /// Adds `chunk`; past the limit, the document is refused.
    fn push(&mut self, chunk: &[u8]) -> Result<(), StoreError> {
        if self.bytes.len() + chunk.len() > self.limit {
            return Err(self.too_large());
        }
        self.bytes.extend_from_slice(chunk);
        Ok(())
    }

    /// The document's text.
    fn text(self) -> Result<String, StoreError> {
        String::from_utf8(self.bytes).map_err(|_| StoreError::NotText { url: self.url })
    }
}

/// Why a write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Someone else wrote since the version the writer read: read again and retry.
    #[error("the document changed since it was read")]
    Conflict,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The document's store.
#[async_trait::async_trait]
pub trait Store: Send + Sync + fmt::Debug {
    /// Where it is, for messages.
    fn url(&self) -> String;

    /// Reads the document; [`Fetched::Unchanged`] when its version is `known`.
    async fn read(&self, known: Option<&Version>) -> Result<Fetched, StoreError>;

    /// Replaces the document at version `expected` (`None`: there is none yet) with `text`;
    /// returns the new version. (Documents are never deleted: an empty one holds no routes.)
    async fn write(&self, expected: Option<&Version>, text: &str) -> Result<Version, WriteError>;
}

/// Opens the store `url` names; reads refuse documents over `max_bytes`.
#[cfg_attr(not(feature = "s3"), allow(unused_variables))]
pub async fn open(
    url: &RoutesUrl,
    max_bytes: usize,
    cloud: &Cloud,
) -> Result<Box<dyn Store>, StoreError> {
    match url {
        RoutesUrl::File(path) => Ok(Box::new(
            FileStore::new(path.clone()).with_max_bytes(max_bytes),
        )),
        #[cfg(feature = "s3")]
        RoutesUrl::S3 { bucket, key } => Ok(Box::new(
            S3Store::new(cloud, bucket.clone(), key.clone())
                .await
                .with_max_bytes(max_bytes),
        )),
        #[cfg(not(feature = "s3"))]
        RoutesUrl::S3 { .. } => Err(StoreError::Failed {
            url: url.to_string(),
            message: "this build leaves out the cargo feature \"s3\"".into(),
        }),
        #[cfg(feature = "gcs")]
        RoutesUrl::Gcs { bucket, object } => Ok(Box::new(
            GcsStore::new(bucket.clone(), object.clone())
                .await?
                .with_max_bytes(max_bytes),
        )),
        #[cfg(not(feature = "gcs"))]
        RoutesUrl::Gcs { .. } => Err(StoreError::Failed {
            url: url.to_string(),
            message: "this build leaves out the cargo feature \"gcs\"".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(any(feature = "s3", feature = "gcs"))]
    #[test]
    fn a_document_is_buffered_up_to_its_limit_and_no_further() {
        let url = || "s3://b/routes.toml".to_owned();
        assert!(matches!(
            Limited::new(url(), 4, Some(5)),
            Err(StoreError::TooLarge { limit: 4, .. })
        ));
        let mut unannounced = Limited::new(url(), 4, None).unwrap();
        unannounced.push(b"ab").unwrap();
        unannounced.push(b"cd").unwrap();
        let error = unannounced.push(b"e").unwrap_err();
        assert!(
            error.to_string().starts_with("s3://b/routes.toml: "),
            "{error}"
        );
        assert_eq!(unannounced.bytes.len(), 4, "nothing past the limit is kept");
        let mut announced = Limited::new(url(), 4, Some(2)).unwrap();
        announced.push(b"ab").unwrap();
        assert_eq!(announced.text().unwrap(), "ab");
        let mut binary = Limited::new(url(), 4, None).unwrap();
        binary.push(b"\xff").unwrap();
        assert!(matches!(binary.text(), Err(StoreError::NotText { .. })));
    }

    #[test]
    fn urls_name_a_path_or_an_object() {
        assert_eq!(
            "s3://routes/relay/routes.toml".parse(),
            Ok(RoutesUrl::S3 {
                bucket: "routes".into(),
                key: "relay/routes.toml".into()
            })
        );
        assert_eq!(
            "gs://b/o.toml".parse(),
            Ok(RoutesUrl::Gcs {
                bucket: "b".into(),
                object: "o.toml".into()
            })
        );
        assert_eq!(
            "/etc/relay/routes.toml".parse(),
            Ok(RoutesUrl::File("/etc/relay/routes.toml".into()))
        );
        for bad in ["s3://bucket", "gs:///o", "https://example.org/routes", ""] {
            assert!(bad.parse::<RoutesUrl>().is_err(), "{bad}");
        }
    }
}
