//! The stored routes in a local file: for `make run`, tests, and relays on one machine.
//!
//! Only a regular file is read (a symbolic link to one is followed): the path is opened without
//! blocking and checked on the opened file, so a FIFO, a device or a directory is refused and
//! never waited on. Reads stop at the size limit, run off the async threads under a deadline,
//! and an unchanged file (same device, inode, length, modification and change times as when it
//! was read last) is neither read nor hashed again.
//!
//! Writes hold an exclusive lock on `<path>.lock` (a regular file, never a symbolic link; given
//! up after the lock timeout) while they check the version and rename a complete temporary file
//! over the document. The temporary file is created exclusively, under a random name, in the
//! document's directory, so nothing planted there can redirect the write.

use std::fs::{File, FileType, Metadata, OpenOptions};
use std::io::{ErrorKind, Read as _, Write as _};
use std::os::unix::fs::{FileTypeExt, MetadataExt as _, OpenOptionsExt as _, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::{DEFAULT_MAX_BYTES, Fetched, Store, StoreError, Version, WriteError};

/// How long a read of the document may take before the refresh gives up on it.
const READ_DEADLINE: Duration = Duration::from_secs(5);

/// How long a writer waits for another writer's lock by default.
pub(crate) const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a waiting writer tries the lock again.
const LOCK_RETRY: Duration = Duration::from_millis(20);

/// The version of a document's text: the first 16 hex digits of its SHA-256.
pub(crate) fn content_version(text: &str) -> Version {
    let digest = Sha256::digest(text.as_bytes());
    Version(hex::encode(&digest[..8]))
}

/// A document in a local file. Reads compare the file's metadata, then the content's hash;
/// writes hold an exclusive lock on `<path>.lock` while they check the version and rename a
/// complete temporary file over the document, so a reader never sees half a document and no
/// writer loses another's update.
#[derive(Debug, Clone)]
pub struct FileStore {
    path: PathBuf,
    max_bytes: usize,
    lock_timeout: Duration,
    /// The file as it was when it was read last, and the version of what it held.
    last: Arc<Mutex<Option<(Stamp, Version)>>>,
}

/// What identifies one state of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// Whether a file type is of one kind.
type IsKind = fn(&FileType) -> bool;

/// What a file is, when it is not a regular file.
fn not_regular(meta: &Metadata) -> Option<&'static str> {
    let kind = meta.file_type();
    if kind.is_file() {
        return None;
    }
    let kinds: [(IsKind, &'static str); 6] = [
        (FileTypeExt::is_fifo, "a FIFO"),
        (FileType::is_dir, "a directory"),
        (FileTypeExt::is_char_device, "a character device"),
        (FileTypeExt::is_block_device, "a block device"),
        (FileTypeExt::is_socket, "a socket"),
        (FileType::is_symlink, "a symbolic link"),
    ];
    Some(
        kinds
            .iter()
            .find(|(is, _)| is(&kind))
            .map_or("something else", |&(_, name)| name),
    )
}

/// What one read of the file found.
enum Current {
    /// No file.
    Missing,
    /// The file has not changed since it was read last, at this version.
    Same(Version),
    /// The file's text and its version.
    Read(String, Version),
}

impl FileStore {
    /// The store at `path`, refusing documents over [`DEFAULT_MAX_BYTES`], waiting
    /// `DEFAULT_LOCK_TIMEOUT` at most for another writer.
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            max_bytes: DEFAULT_MAX_BYTES,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            last: Arc::default(),
        }
    }

    /// The same store, refusing documents over `max_bytes`.
    #[must_use]
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// The same store, giving up on another writer's lock after `timeout`.
    #[must_use]
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    fn url(&self) -> String {
        self.path.display().to_string()
    }

    fn failed(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError::Failed {
            url: self.url(),
            message: message.to_string(),
        }
    }

    fn not_a_file(&self, kind: &'static str) -> StoreError {
        StoreError::NotAFile {
            url: self.url(),
            kind,
        }
    }

    /// The document now. When it is unchanged since the last read and held `known` then, it is
    /// not read again: [`Current::Same`].
    fn read_now(&self, known: Option<&Version>) -> Result<Current, StoreError> {
        // The path's metadata first: something that is not a regular file is not even opened,
        // and an unchanged file is not read.
        let meta = match std::fs::metadata(&self.path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Current::Missing),
            Err(e) => return Err(self.failed(e)),
        };
        if let Some(kind) = not_regular(&meta) {
            return Err(self.not_a_file(kind));
        }
        if let Some(version) = self.unchanged(&meta, known) {
            return Ok(Current::Same(version));
        }
        if meta.len() > self.max_bytes as u64 {
            return Err(self.too_large());
        }
        // Opened without blocking (a FIFO swapped in since would block an ordinary open), then
        // checked again on what was opened.
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Current::Missing),
            Err(e) => return Err(self.failed(e)),
        };
        let meta = file.metadata().map_err(|e| self.failed(e))?;
        if let Some(kind) = not_regular(&meta) {
            return Err(self.not_a_file(kind));
        }
        if let Some(version) = self.unchanged(&meta, known) {
            return Ok(Current::Same(version));
        }
        let limit = self.max_bytes as u64;
        let mut bytes = Vec::with_capacity(meta.len().min(limit) as usize);
        file.take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| self.failed(e))?;
        if bytes.len() as u64 > limit {
            return Err(self.too_large());
        }
        let text = String::from_utf8(bytes).map_err(|_| StoreError::NotText { url: self.url() })?;
        let version = content_version(&text);
        *self.last.lock().expect("not poisoned") = Some((Stamp::of(&meta), version.clone()));
        Ok(Current::Read(text, version))
    }

    /// The version last read, when the file is as it was then and that version is `known`.
    fn unchanged(&self, meta: &Metadata, known: Option<&Version>) -> Option<Version> {
        let last = self.last.lock().expect("not poisoned");
        let (stamp, version) = last.as_ref()?;
        (*stamp == Stamp::of(meta) && Some(version) == known).then(|| version.clone())
    }

    fn too_large(&self) -> StoreError {
        StoreError::TooLarge {
            url: self.url(),
            limit: self.max_bytes,
        }
    }

    /// Takes the writers' lock on `<path>.lock`, waiting at most the lock timeout.
    fn lock(&self) -> Result<File, StoreError> {
        let path = sibling(&self.path, ".lock");
        let refused = |kind| StoreError::LockNotAFile {
            url: self.url(),
            lock: path.display().to_string(),
            kind,
        };
        let cannot =
            |e: std::io::Error| self.failed(format!("cannot lock {}: {e}", path.display()));
        match std::fs::symlink_metadata(&path) {
            Ok(meta) => {
                if let Some(kind) = not_regular(&meta) {
                    return Err(refused(kind));
                }
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(cannot(e)),
        }
        // O_NOFOLLOW: a symbolic link planted since is refused too, never followed or created.
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => refused("a symbolic link"),
                _ => cannot(e),
            })?;
        let meta = lock.metadata().map_err(cannot)?;
        if let Some(kind) = not_regular(&meta) {
            return Err(refused(kind));
        }
        let started = Instant::now();
        loop {
            match lock.try_lock() {
                Ok(()) => return Ok(lock),
                Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < self.lock_timeout => {
                    std::thread::sleep(LOCK_RETRY);
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(StoreError::LockTimeout {
                        url: self.url(),
                        lock: path.display().to_string(),
                        waited: self.lock_timeout,
                    });
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(cannot(e)),
            }
        }
    }

    fn write_now(&self, expected: Option<&Version>, text: &str) -> Result<Version, WriteError> {
        // The lock is released when `_lock` is dropped, after the rename.
        let _lock = self.lock()?;
        let current = match self.read_now(expected)? {
            Current::Missing => None,
            Current::Same(version) | Current::Read(_, version) => Some(version),
        };
        if current.as_ref() != expected {
            return Err(WriteError::Conflict);
        }
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let mut prefix = self.path.file_name().unwrap_or_default().to_owned();
        prefix.push(".");
        // Created with O_EXCL under a random name: a file or link planted in the directory is
        // never opened. Readable by the relays, writable by the writer only (the umask applies;
        // writers replace the document, they never write into it).
        let mut temporary = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".tmp")
            .permissions(std::fs::Permissions::from_mode(0o644))
            .tempfile_in(dir)
            .map_err(|e| {
                self.failed(format!(
                    "cannot create a temporary file in {}: {e}",
                    dir.display()
                ))
            })?;
        temporary
            .write_all(text.as_bytes())
            .and_then(|()| temporary.as_file().sync_all())
            .map_err(|e| {
                self.failed(format!("cannot write {}: {e}", temporary.path().display()))
            })?;
        // Renamed over the document; on failure the temporary file is removed when dropped.
        let written = temporary
            .persist(&self.path)
            .map_err(|e| self.failed(e.error))?;
        // The rename itself reaches the disk with the directory.
        if let Ok(dir) = File::open(dir) {
            let _ = dir.sync_all();
        }
        let version = content_version(text);
        if let Ok(meta) = written.metadata() {
            *self.last.lock().expect("not poisoned") = Some((Stamp::of(&meta), version.clone()));
        }
        Ok(version)
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
        FileStore::url(self)
    }

    async fn read(&self, known: Option<&Version>) -> Result<Fetched, StoreError> {
        let (store, known_now) = (self.clone(), known.cloned());
        let reading = tokio::task::spawn_blocking(move || store.read_now(known_now.as_ref()));
        let read = tokio::time::timeout(READ_DEADLINE, reading)
            .await
            .map_err(|_| StoreError::Timeout {
                url: self.url(),
                after: READ_DEADLINE,
            })?
            .map_err(|e| self.failed(e))??;
        Ok(match read {
            Current::Missing => Fetched::Missing,
            Current::Same(_) => Fetched::Unchanged,
            Current::Read(_, version) if Some(&version) == known => Fetched::Unchanged,
            Current::Read(text, version) => Fetched::Document { text, version },
        })
    }

    async fn write(&self, expected: Option<&Version>, text: &str) -> Result<Version, WriteError> {
        let (store, expected, text) = (self.clone(), expected.cloned(), text.to_owned());
        tokio::task::spawn_blocking(move || store.write_now(expected.as_ref(), &text))
            .await
            .map_err(|e| WriteError::Store(self.failed(e)))?
    }
}
