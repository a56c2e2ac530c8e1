//! The stored routes in an S3 object: conditional GET on the ETag (`If-None-Match`), and
//! conditional PUT (`If-Match` the ETag read, or `If-None-Match: *` to create). A read refuses an
//! object whose `Content-Length` is over the size limit before reading its body, and stops
//! reading a body that runs past it.

use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use aws_smithy_types::error::display::DisplayErrorContext;

use super::{Cloud, DEFAULT_MAX_BYTES, Fetched, Limited, Store, StoreError, Version, WriteError};

/// How long one read or write of the document may take, retries included.
const DEADLINE: Duration = Duration::from_secs(5);

/// An S3 object holding the stored routes.
#[derive(Debug, Clone)]
pub struct S3Store {
    client: Client,
    bucket: String,
    key: String,
    max_bytes: usize,
}

impl S3Store {
    /// The object `key` in `bucket`, its client built from the relay's `cloud` with this
    /// store's own deadline (`Cloud::s3`), refusing documents over [`DEFAULT_MAX_BYTES`].
    pub async fn new(cloud: &Cloud, bucket: String, key: String) -> Self {
        Self {
            client: Client::from_conf(cloud.s3(Some(DEADLINE)).await),
            bucket,
            key,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// The same store, refusing documents over `max_bytes`.
    #[must_use]
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    fn error(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError::Failed {
            url: self.url(),
            message: message.to_string(),
        }
    }
}

#[async_trait::async_trait]
impl Store for S3Store {
    fn url(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.key)
    }

    async fn read(&self, known: Option<&Version>) -> Result<Fetched, StoreError> {
        let mut get = self.client.get_object().bucket(&self.bucket).key(&self.key);
        if let Some(version) = known {
            get = get.if_none_match(&version.0);
        }
        let object = match get.send().await {
            Ok(object) => object,
            Err(e) => {
                return match e.raw_response().map(|r| r.status().as_u16()) {
                    Some(304) => Ok(Fetched::Unchanged),
                    Some(404) => Ok(Fetched::Missing),
                    _ => Err(self.error(DisplayErrorContext(&e))),
                };
            }
        };
        let version = Version(object.e_tag().unwrap_or_default().to_owned());
        let announced = object.content_length().and_then(|n| u64::try_from(n).ok());
        // Refused before the body is read when the object says it is too large; dropping the
        // body closes the connection.
        let mut document = Limited::new(self.url(), self.max_bytes, announced)?;
        let mut body = object.body;
        while let Some(chunk) = body.next().await {
            document.push(&chunk.map_err(|e| self.error(e))?)?;
        }
        Ok(Fetched::Document {
            text: document.text()?,
            version,
        })
    }

    async fn write(&self, expected: Option<&Version>, text: &str) -> Result<Version, WriteError> {
        let put = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(&self.key)
            .content_type("application/toml")
            .body(ByteStream::from(text.as_bytes().to_vec()));
        let put = match expected {
            Some(version) => put.if_match(&version.0),
            None => put.if_none_match("*"),
        };
        match put.send().await {
            Ok(out) => Ok(Version(out.e_tag().unwrap_or_default().to_owned())),
            // 412: the precondition failed; 409: a concurrent conditional write won.
            Err(e) => match e.raw_response().map(|r| r.status().as_u16()) {
                Some(409 | 412) => Err(WriteError::Conflict),
                // If-Match on an object that is gone.
                Some(404) if expected.is_some() => Err(WriteError::Conflict),
                _ => Err(self.error(DisplayErrorContext(&e)).into()),
            },
        }
    }
}
