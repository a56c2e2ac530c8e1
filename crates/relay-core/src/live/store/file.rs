//! The stored routes in a local file: for `make run`, tests, and relays on one machine.

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Fetched, Store, StoreError, Version, WriteError};

/// The version of a document's text: the first 16 hex digits of its SHA-256.
pub fn content_version(text: &str) -> Version {
    let digest = Sha256::digest(text.as_bytes());
    Version(hex::encode(&digest[..8]))
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

    fn write_now(&self, expected: Option<&Version>, text: &str) -> Result<Version, WriteError> {
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
        Ok(content_version(text))
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

    async fn write(&self, expected: Option<&Version>, text: &str) -> Result<Version, WriteError> {
        let (store, expected, text) = (self.clone(), expected.cloned(), text.to_owned());
        tokio::task::spawn_blocking(move || store.write_now(expected.as_ref(), &text))
            .await
            .map_err(|e| WriteError::Store(self.error(e)))?
    }
}
