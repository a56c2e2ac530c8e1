//! Where the stored routes document lives (`RELAY_ROUTES_URL`), and how it is read and written
//! without losing an update.
//!
//! Every backend reads conditionally (an unchanged document costs one small answer) and writes
//! with compare-and-swap: a write names the version it replaces, or that there was none, and
//! fails with [`WriteError::Conflict`] when someone else wrote first. Writers read again and
//! retry; nothing is overwritten blindly.
//!
//! Backends: a local file (a lock file plus an atomic rename). `s3://` and `gs://` URLs are
//! recognised and refused until their backends exist.

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

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
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
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
            ))
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

    /// Replaces the document at version `expected` (`None`: there is none yet) with `text`, or
    /// removes it when `text` is `None`; returns the new version (`None` after a removal).
    async fn write(
        &self,
        expected: Option<&Version>,
        text: Option<&str>,
    ) -> Result<Option<Version>, WriteError>;
}

/// Opens the store `url` names.
pub fn open(url: &RoutesUrl) -> Result<Box<dyn Store>, StoreError> {
    match url {
        RoutesUrl::File(path) => Ok(Box::new(FileStore::new(path.clone()))),
        RoutesUrl::S3 { .. } | RoutesUrl::Gcs { .. } => Err(StoreError {
            url: url.to_string(),
            message: "this build stores routes in local files only".into(),
        }),
    }
}

/// The version of a document's text: the first 16 hex digits of its SHA-256.
pub fn content_version(text: &str) -> Version {
    let digest = Sha256::digest(text.as_bytes());
    Version(digest[..8].iter().map(|b| format!("{b:02x}")).collect())
}

/// A document in a local file. Reads compare the content's hash; writes hold an exclusive lock
/// on `<path>.lock` while they check the version and rename a complete temporary file over the
/// document, so a reader never sees half a document and no writer loses another's update.
#[derive(Debug, Clone)]
pub struct FileStore {
    path: PathBuf,
}

impl FileStore {
    /// The store at `path`.
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    fn error(&self, message: impl fmt::Display) -> StoreError {
        StoreError {
            url: self.path.display().to_string(),
            message: message.to_string(),
        }
    }

    fn read_now(&self) -> Result<Option<(String, Version)>, StoreError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => {
                let version = content_version(&text);
                Ok(Some((text, version)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.error(e)),
        }
    }

    fn write_now(
        &self,
        expected: Option<&Version>,
        text: Option<&str>,
    ) -> Result<Option<Version>, WriteError> {
        let lock_path = sibling(&self.path, ".lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| self.error(format!("cannot open {}: {e}", lock_path.display())))?;
        lock.lock()
            .map_err(|e| self.error(format!("cannot lock {}: {e}", lock_path.display())))?;
        let current = self.read_now()?.map(|(_, version)| version);
        if current.as_ref() != expected {
            return Err(WriteError::Conflict);
        }
        let Some(text) = text else {
            if current.is_some() {
                std::fs::remove_file(&self.path).map_err(|e| self.error(e))?;
            }
            return Ok(None);
        };
        let temporary = sibling(&self.path, &format!(".{}.tmp", std::process::id()));
        let written = std::fs::File::create(&temporary).and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.sync_all()
        });
        if let Err(e) = written.and_then(|()| std::fs::rename(&temporary, &self.path)) {
            let _ = std::fs::remove_file(&temporary);
            return Err(self.error(e).into());
        }
        // The lock is released when `lock` is dropped, after the rename.
        Ok(Some(content_version(text)))
    }
}

/// `path` with `suffix` appended to its file name.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(suffix);
    path.with_file_name(name)
}

#[async_trait::async_trait]
impl Store for FileStore {
    fn url(&self) -> String {
        self.path.display().to_string()
    }

    async fn read(&self, known: Option<&Version>) -> Result<Fetched, StoreError> {
        let store = self.clone();
        let read = tokio::task::spawn_blocking(move || store.read_now())
            .await
            .map_err(|e| self.error(e))??;
        Ok(match read {
            None => Fetched::Missing,
            Some((_, version)) if Some(&version) == known => Fetched::Unchanged,
            Some((text, version)) => Fetched::Document { text, version },
        })
    }

    async fn write(
        &self,
        expected: Option<&Version>,
        text: Option<&str>,
    ) -> Result<Option<Version>, WriteError> {
        let (store, expected, text) = (self.clone(), expected.cloned(), text.map(str::to_owned));
        tokio::task::spawn_blocking(move || store.write_now(expected.as_ref(), text.as_deref()))
            .await
            .map_err(|e| WriteError::Store(self.error(e)))?
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

    #[tokio::test]
    async fn a_write_names_the_version_it_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(dir.path().join("routes.toml"));
        assert_eq!(store.read(None).await.unwrap(), Fetched::Missing);
        let first = store.write(None, Some("a = 1\n")).await.unwrap().unwrap();
        // A second "create" lost the race.
        assert!(matches!(
            store.write(None, Some("a = 2\n")).await,
            Err(WriteError::Conflict)
        ));
        assert_eq!(store.read(Some(&first)).await.unwrap(), Fetched::Unchanged);
        let second = store
            .write(Some(&first), Some("a = 3\n"))
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(
            store.write(Some(&first), Some("a = 4\n")).await,
            Err(WriteError::Conflict)
        ));
        assert_eq!(
            store.read(Some(&first)).await.unwrap(),
            Fetched::Document {
                text: "a = 3\n".into(),
                version: second.clone()
            }
        );
        assert_eq!(store.write(Some(&second), None).await.unwrap(), None);
        assert_eq!(store.read(Some(&second)).await.unwrap(), Fetched::Missing);
    }
}
