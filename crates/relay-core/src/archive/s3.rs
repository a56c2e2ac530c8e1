//! The archive in an S3 bucket: `PutObject` with `If-None-Match: *` (412 when the key exists:
//! never an overwrite, and the bucket policy may require it), `ListObjectsV2` by hour,
//! `GetObject`.

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use aws_smithy_types::error::display::DisplayErrorContext;
use bytes::Bytes;

use super::{Archive, ArchiveError, Written};
use crate::cloud::Cloud;

/// An S3 bucket holding records under a prefix.
#[derive(Debug, Clone)]
pub(crate) struct S3Archive {
    client: Client,
    bucket: String,
    prefix: String,
}

impl S3Archive {
    /// The archive under `prefix` (empty or ending in `/`) in `bucket`, its client built from
    /// `cloud` ([`Cloud::s3`]).
    pub(crate) async fn new(cloud: &Cloud, bucket: &str, prefix: &str) -> Self {
        Self {
            client: Client::from_conf(cloud.s3(None).await),
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
        }
    }

    fn failure<E>(&self, e: &aws_sdk_s3::error::SdkError<E>) -> ArchiveError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let status = e.raw_response().map(|r| r.status().as_u16());
        let message = format!("s3://{}: {}", self.bucket, DisplayErrorContext(e));
        match status {
            // Denied, a missing bucket, a bad request: an operator must act.
            Some(400 | 401 | 403 | 404 | 405) => ArchiveError::Refused(message),
            _ => ArchiveError::Unavailable(message),
        }
    }
}

#[async_trait::async_trait]
impl Archive for S3Archive {
    async fn warm(&self) -> Result<(), ArchiveError> {
        // A role that may only put objects is refused here; the refusal is an answer, and the
        // connection is open.
        match self.client.head_bucket().bucket(&self.bucket).send().await {
            Ok(_) | Err(aws_sdk_s3::error::SdkError::ServiceError(_)) => Ok(()),
            Err(e) => Err(ArchiveError::Unavailable(
                DisplayErrorContext(&e).to_string(),
            )),
        }
    }

    fn url(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }

    async fn put(&self, key: &str, body: Bytes) -> Result<Written, ArchiveError> {
        let put = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(format!("{}{key}", self.prefix))
            .content_type("application/json")
            .if_none_match("*")
            .body(ByteStream::from(body))
            .send()
            .await;
        match put {
            Ok(_) => Ok(Written::Created),
            Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 412) => {
                Ok(Written::Existed)
            }
            Err(e) => Err(self.failure(&e)),
        }
    }

    async fn list(&self, folder: &str) -> Result<Vec<String>, ArchiveError> {
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(format!("{}{folder}", self.prefix))
            .into_paginator()
            .send();
        let mut keys = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.failure(&e))?;
            for object in page.contents() {
                if let Some(key) = object.key().and_then(|k| k.strip_prefix(&self.prefix)) {
                    keys.push(key.to_owned());
                }
            }
        }
        Ok(keys)
    }

    async fn read(&self, key: &str, limit: usize) -> Result<Option<Bytes>, ArchiveError> {
        let got = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(format!("{}{key}", self.prefix))
            .send()
            .await;
        let object = match got {
            Ok(object) => object,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => return Ok(None),
            Err(e) => return Err(self.failure(&e)),
        };
        let length = object.content_length().map_or(0, |n| n.max(0) as u64);
        if length > u64::try_from(limit).unwrap_or(u64::MAX) {
            return Err(ArchiveError::TooLarge {
                key: key.to_owned(),
                limit,
            });
        }
        let mut body = object.body;
        let mut bytes = Vec::new();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| {
                ArchiveError::Unavailable(format!("s3://{}/{key}: {e}", self.bucket))
            })?;
            super::take_chunk(&mut bytes, &chunk, key, limit)?;
        }
        Ok(Some(Bytes::from(bytes)))
    }
}
