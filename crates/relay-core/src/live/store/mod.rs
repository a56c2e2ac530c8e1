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

mod file;
#[cfg(feature = "gcs")]
mod gcs;
#[cfg(feature = "s3")]
mod s3;

use std::fmt;
use std::path::PathBuf;

pub use file::{FileStore, content_version};
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
        let text = text.trim();
        let object = |rest: &str, scheme: &str| -> Result<(String, String), String> {
            match rest.split_once('/') {
                Some((bucket, key)) if !bucket.is_empty() && !key.is_empty() => {
                    Ok((bucket.to_owned(), key.to_owned()))
                }
                _ => Err(format!(
                    "expected {scheme}://<bucket>/<object>, got {text:?}"
                )),
            }
        };
        if let Some(rest) = text.strip_prefix("s3://") {
            let (bucket, key) = object(rest, "s3")?;
            Ok(Self::S3 { bucket, key })
        } else if let Some(rest) = text.strip_prefix("gs://") {
            let (bucket, object) = object(rest, "gs")?;
            Ok(Self::Gcs { bucket, object })
        } else if text.contains("://") {
            Err(format!(
                "expected a path, s3://<bucket>/<key> or gs://<bucket>/<object>, got {text:?}"
            )
            .into())
        } else if text.is_empty() {
            Err("expected a path, s3://<bucket>/<key> or gs://<bucket>/<object>".into())
        } else {
            Ok(Self::File(PathBuf::from(text)))
        }
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

/// The store could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("{url}: {message}")]
pub struct StoreError {
    /// The document's URL.
    pub url: String,
    /// What went wrong.
    pub message: String,
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

/// Opens the store `url` names.
pub async fn open(url: &RoutesUrl) -> Result<Box<dyn Store>, StoreError> {
    match url {
        RoutesUrl::File(path) => Ok(Box::new(FileStore::new(path.clone()))),
        #[cfg(feature = "s3")]
        RoutesUrl::S3 { bucket, key } => {
            Ok(Box::new(S3Store::new(bucket.clone(), key.clone()).await))
        }
        #[cfg(not(feature = "s3"))]
        RoutesUrl::S3 { .. } => Err(StoreError {
            url: url.to_string(),
            message: "this build leaves out the cargo feature \"s3\"".into(),
        }),
        #[cfg(feature = "gcs")]
        RoutesUrl::Gcs { bucket, object } => Ok(Box::new(
            GcsStore::new(bucket.clone(), object.clone()).await?,
        )),
        #[cfg(not(feature = "gcs"))]
        RoutesUrl::Gcs { .. } => Err(StoreError {
            url: url.to_string(),
            message: "this build leaves out the cargo feature \"gcs\"".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
