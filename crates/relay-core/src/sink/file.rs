//! The embedded sink: one JSON line per notification, appended to a file or written to stdout,
//! flushed before the relay answers.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tokio::fs::{File, OpenOptions};
use tokio::io::{AsyncSeekExt, AsyncWriteExt};
use tokio::sync::Mutex;

use super::{Message, Receipt, Sink, SinkError};

/// A `type = "file"` sink, or `RELAY_FILE_SINK`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileSinkConfig {
    /// A path, created if missing and appended to, or `-` for standard output.
    pub path: FileTarget,
}

impl super::TargetConfig for FileSinkConfig {
    fn kind(&self) -> &'static str {
        "file"
    }

    fn max_message_bytes(&self) -> Option<usize> {
        None
    }

    fn shape(&self, selection: &super::Selection) -> Result<super::Shape, super::ShapeError> {
        super::Shape::new(selection, None)
    }

    /// The file this sink appends to, as one stable id: `file:<absolute path>` (links resolved
    /// where they exist), or `file:-` for standard output.
    fn resource(&self) -> String {
        match &self.path {
            FileTarget::Stdout => "file:-".into(),
            FileTarget::Path(path) => format!("file:{}", absolute(path).display()),
        }
    }

    fn describe(&self) -> String {
        format!("file {}", self.path)
    }
}

/// `path` made absolute: the file's canonical path when it exists, else its folder's joined
/// with its name (what the file's canonical path will be once it is created), else `path`
/// against the working folder.
pub(crate) fn absolute(path: &std::path::Path) -> PathBuf {
    if let Ok(canonical) = std::fs::canonicalize(path) {
        return canonical;
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    match (std::fs::canonicalize(folder), path.file_name()) {
        (Ok(folder), Some(name)) => folder.join(name),
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_owned()),
    }
}

/// Where the file sink writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileTarget {
    /// Standard output (`-`).
    Stdout,
    /// A file, created if missing and appended to.
    Path(PathBuf),
}

impl fmt::Display for FileTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stdout => f.write_str("-"),
            Self::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

impl std::str::FromStr for FileTarget {
    type Err = crate::text::InvalidValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "" => Err("is empty; give a path, or - for standard output".into()),
            "-" => Ok(Self::Stdout),
            path => Ok(Self::Path(PathBuf::from(path))),
        }
    }
}

crate::text::deserialize_from_text!(FileTarget, "a path, or - for standard output");
crate::text::serialize_as_text!(FileTarget);

#[derive(Debug)]
enum Output {
    Stdout(tokio::io::Stdout),
    File(File),
}

/// Appends `{"received_at", "dedup_key", "attributes", "payload"}` lines. `payload` is the
/// notification text as a JSON string, so `jq -j .payload` gives back the exact bytes received.
#[derive(Debug)]
pub struct FileSink {
    name: String,
    out: Mutex<Output>,
}

#[derive(Serialize)]
struct Line<'a> {
    received_at: String,
    dedup_key: &'a str,
    attributes: serde_json::Map<String, serde_json::Value>,
    payload: &'a str,
}

impl FileSink {
    /// Opens the target once, at start.
    pub async fn open(target: &FileTarget) -> std::io::Result<Self> {
        let out = match target {
            FileTarget::Stdout => Output::Stdout(tokio::io::stdout()),
            FileTarget::Path(path) => Output::File(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .await?,
            ),
        };
        Ok(Self {
            name: format!("file:{target}"),
            out: Mutex::new(out),
        })
    }

    fn render(message: &Message) -> Result<Vec<u8>, SinkError> {
        // The payload was parsed as JSON before it got here, so it is valid UTF-8.
        let payload =
            std::str::from_utf8(&message.payload).map_err(|e| SinkError::Permanent(Box::new(e)))?;
        let line = Line {
            received_at: humantime::format_rfc3339_millis(message.received_at).to_string(),
            dedup_key: &message.dedup_key,
            attributes: message
                .attributes
                .iter()
                .map(|(k, v)| (k.to_owned(), v.into()))
                .collect(),
            payload,
        };
        let mut bytes = serde_json::to_vec(&line).map_err(|e| SinkError::Permanent(Box::new(e)))?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

#[async_trait::async_trait]
impl Sink for FileSink {
    fn name(&self) -> &str {
        &self.name
    }

    async fn publish(&self, message: &Message) -> Result<Receipt, SinkError> {
        // Serialize before taking the lock, so concurrent requests only queue for the write.
        let line = Self::render(message)?;
        let mut out = self.out.lock().await;
        write_line(&mut out, &line)
            .await
            .map_err(|e| SinkError::Retryable(Box::new(e)))
    }
}

/// Writes and flushes one line; the receipt's id is the line's byte offset in the file.
async fn write_line(out: &mut Output, line: &[u8]) -> std::io::Result<Receipt> {
    match out {
        Output::Stdout(stdout) => {
            stdout.write_all(line).await?;
            stdout.flush().await?;
            Ok(Receipt::new(None))
        }
        Output::File(file) => {
            let offset = file.seek(std::io::SeekFrom::End(0)).await?;
            file.write_all(line).await?;
            file.flush().await?;
            Ok(Receipt::new(Some(format!("offset:{offset}"))))
        }
    }
}
