//! The archive in a folder on this machine (the default of `make run`): one file per record
//! under `YYYY/MM/DD/HH/`. A record is written to a temporary file in its hour's folder, then
//! linked under its key, which fails when the key exists: a file is never overwritten, and a
//! reader never sees one half written. Records written concurrently are flushed to disk
//! together, by one sync of the folder's file system after the batch (`GroupCommit`), and
//! each writer is answered only after that sync.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::{Archive, ArchiveError, RecordError, Written};
use crate::group_commit::{Batched, Failed, GroupCommit};

/// A folder holding records.
#[derive(Debug, Clone)]
pub struct DirArchive {
    root: PathBuf,
    writer: GroupCommit<Folder>,
}

/// The writer's side: the folder, open, and the files the current batch wrote.
struct Folder {
    root: std::fs::File,
    written: Vec<std::fs::File>,
}

impl Batched for Folder {
    fn begin(&mut self) -> Result<(), String> {
        self.written.clear();
        Ok(())
    }

    /// One `syncfs` of the folder's file system on Linux (the records' data and their links);
    /// elsewhere each record in turn.
    fn commit(&mut self) -> Result<(), String> {
        #[cfg(target_os = "linux")]
        rustix::fs::syncfs(&self.root).map_err(|e| format!("sync: {e}"))?;
        #[cfg(not(target_os = "linux"))]
        for file in &self.written {
            file.sync_all().map_err(|e| format!("sync: {e}"))?;
        }
        self.written.clear();
        Ok(())
    }

    fn abort(&mut self) {
        self.written.clear();
    }
}

impl From<Failed> for ArchiveError {
    fn from(failed: Failed) -> Self {
        Self::Unavailable(failed.0)
    }
}

impl DirArchive {
    /// The archive in `root`, created if missing.
    pub fn open(root: &Path) -> Result<Self, ArchiveError> {
        std::fs::create_dir_all(root)
            .map_err(|e| ArchiveError::Open(format!("cannot create {}: {e}", root.display())))?;
        // Canonical, so that the archive's resource is one id however the folder is named.
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_owned());
        let open = |e: std::io::Error| ArchiveError::Open(format!("{}: {e}", root.display()));
        let folder = Folder {
            root: std::fs::File::open(&root).map_err(open)?,
            written: Vec::new(),
        };
        let writer = GroupCommit::start("relay-archive", folder).map_err(open)?;
        Ok(Self { root, writer })
    }

    /// The file of `key`, refusing keys that would leave the folder.
    fn path(&self, key: &str) -> Result<PathBuf, ArchiveError> {
        let inside = !key.is_empty()
            && key.split('/').all(|part| {
                !part.is_empty() && part != "." && part != ".." && !part.starts_with('.')
            });
        match inside {
            true => Ok(self.root.join(key)),
            false => Err(ArchiveError::Refused(format!(
                "{key:?} is not an archive key"
            ))),
        }
    }
}

fn unavailable(path: &Path, e: std::io::Error) -> ArchiveError {
    ArchiveError::Unavailable(format!("{}: {e}", path.display()))
}

/// Writes `body` under `path`, never over an existing file; the batch's commit syncs it.
fn create(path: &Path, body: &[u8], batch: &mut Folder) -> Result<Written, ArchiveError> {
    let folder = path.parent().expect("a key has a folder");
    // Dot files are not keys: a temporary file is never listed. The hour's folder is made
    // only when it is missing, not checked for every record.
    let temporary = || {
        tempfile::Builder::new()
            .prefix(".record-")
            .tempfile_in(folder)
    };
    let mut temporary = match temporary() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(folder).map_err(|e| unavailable(folder, e))?;
            temporary()
        }
        made => made,
    }
    .map_err(|e| unavailable(folder, e))?;
    temporary
        .write_all(body)
        .map_err(|e| unavailable(temporary.path(), e))?;
    match std::fs::hard_link(temporary.path(), path) {
        Ok(()) => {
            if !cfg!(target_os = "linux") {
                let file = temporary.as_file().try_clone();
                batch.written.push(file.map_err(|e| unavailable(path, e))?);
            }
            Ok(Written::Created)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(Written::Existed),
        Err(e) => Err(unavailable(path, e)),
    }
}

#[async_trait::async_trait]
impl Archive for DirArchive {
    fn url(&self) -> String {
        self.root.display().to_string()
    }

    async fn put(&self, key: &str, body: Bytes) -> Result<Written, ArchiveError> {
        let path = self.path(key)?;
        self.writer
            .call(move |batch: &mut Folder| create(&path, &body, batch))
            .await
    }

    async fn list(&self, folder: &str) -> Result<Vec<String>, ArchiveError> {
        let prefix = folder.trim_end_matches('/').to_owned();
        let path = self.path(&prefix)?;
        tokio::task::spawn_blocking(move || {
            let entries = match std::fs::read_dir(&path) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(unavailable(&path, e)),
            };
            let mut keys = Vec::new();
            for entry in entries {
                let entry = entry.map_err(|e| unavailable(&path, e))?;
                let name = entry.file_name();
                let Some(name) = name.to_str().filter(|n| !n.starts_with('.')) else {
                    continue;
                };
                if entry.file_type().is_ok_and(|t| t.is_file()) {
                    keys.push(format!("{prefix}/{name}"));
                }
            }
            Ok(keys)
        })
        .await
        .map_err(|e| ArchiveError::Unavailable(e.to_string()))?
    }

    async fn read(&self, key: &str, limit: usize) -> Result<Option<Bytes>, ArchiveError> {
        use tokio::io::AsyncReadExt as _;
        let path = self.path(key)?;
        let read = async {
            let file = tokio::fs::File::open(&path).await?;
            if file.metadata().await?.is_dir() {
                return Err(std::io::Error::from(std::io::ErrorKind::IsADirectory));
            }
            let mut bytes = Vec::new();
            let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
            file.take(cap).read_to_end(&mut bytes).await?;
            Ok(bytes)
        };
        match read.await {
            Ok(bytes) if bytes.len() > limit => Err(ArchiveError::TooLarge {
                key: key.to_owned(),
                limit,
            }),
            Ok(bytes) => Ok(Some(Bytes::from(bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            // Not a record, and no retry makes it one.
            Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => Err(ArchiveError::Corrupt {
                key: key.to_owned(),
                error: RecordError::Malformed("a folder, not a file".into()),
            }),
            Err(e) => Err(unavailable(&path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn records_are_created_once_and_listed_by_hour() {
        let dir = tempfile::tempdir().unwrap();
        let archive = DirArchive::open(&dir.path().join("archive")).unwrap();
        let key = "2026/12/02/07/abc";
        let first = archive.put(key, Bytes::from_static(b"one")).await.unwrap();
        let again = archive.put(key, Bytes::from_static(b"two")).await.unwrap();
        assert_eq!((first, again), (Written::Created, Written::Existed));
        assert_eq!(archive.get(key).await.unwrap().unwrap(), "one");
        archive
            .put("2026/12/02/07/def", Bytes::from_static(b"x"))
            .await
            .unwrap();
        let mut listed = archive.list("2026/12/02/07/").await.unwrap();
        listed.sort();
        assert_eq!(listed, ["2026/12/02/07/abc", "2026/12/02/07/def"]);
        assert!(archive.list("2026/12/02/08/").await.unwrap().is_empty());
        assert!(archive.get("2026/12/02/07/none").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn keys_never_leave_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let archive = DirArchive::open(dir.path()).unwrap();
        for key in ["../x", "a/../../x", "/etc/passwd", "", "a//b", "a/.hidden"] {
            let refused = archive.put(key, Bytes::from_static(b"x")).await;
            assert!(matches!(refused, Err(ArchiveError::Refused(_))), "{key:?}");
        }
    }
}
