//! The stored routes in a Cloud Storage object: reads with `ifGenerationNotMatch`, writes with
//! `ifGenerationMatch` (0: only if there is no object yet). The generation is the version. A read
//! refuses an object whose size is over the limit before downloading it, and stops downloading
//! one that runs past it.

use google_cloud_storage::client::Storage;

use super::{DEFAULT_MAX_BYTES, Fetched, Limited, Store, StoreError, Version, WriteError};

/// A Cloud Storage object holding the stored routes.
#[derive(Debug, Clone)]
pub struct GcsStore {
    client: Storage,
    bucket: String,
    object: String,
    max_bytes: usize,
}

impl GcsStore {
    /// The object `object` in `bucket`, refusing documents over [`DEFAULT_MAX_BYTES`]: against
    /// `STORAGE_EMULATOR_HOST` with anonymous credentials when it is set, else against Google
    /// with the platform's default credentials.
    pub async fn new(bucket: String, object: String) -> Result<Self, StoreError> {
        let url = format!("gs://{bucket}/{object}");
        let failed = |e: &dyn std::fmt::Display| StoreError::Failed {
            url: url.clone(),
            message: format!("cannot build the Cloud Storage client: {e}"),
        };
        let builder = match crate::google::emulator("STORAGE_EMULATOR_HOST") {
            Some(endpoint) => (Storage::builder().with_endpoint(endpoint))
                .with_credentials(crate::google::anonymous()),
            None => Storage::builder()
                .with_credentials(crate::google::credentials().map_err(|e| failed(&e))?),
        };
        let client = builder.build().await.map_err(|e| failed(&e))?;
        Ok(Self {
            client,
            bucket,
            object,
            max_bytes: DEFAULT_MAX_BYTES,
        })
    }

    /// The same store, refusing documents over `max_bytes`.
    #[must_use]
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    fn bucket_name(&self) -> String {
        format!("projects/_/buckets/{}", self.bucket)
    }

    fn error(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError::Failed {
            url: self.url(),
            message: message.to_string(),
        }
    }
}

/// A version is a generation, written in decimal.
fn generation(version: &Version) -> Option<i64> {
    version.0.parse().ok()
}

#[async_trait::async_trait]
impl Store for GcsStore {
    fn url(&self) -> String {
        format!("gs://{}/{}", self.bucket, self.object)
    }

    async fn read(&self, known: Option<&Version>) -> Result<Fetched, StoreError> {
        let known = known.and_then(generation);
        let mut read = self.client.read_object(self.bucket_name(), &self.object);
        if let Some(known) = known {
            read = read.set_if_generation_not_match(known);
        }
        let mut response = match read.send().await {
            Ok(response) => response,
            Err(e) => {
                return match e.http_status_code() {
                    Some(304) => Ok(Fetched::Unchanged),
                    // A conditional read of a missing object may fail its precondition.
                    Some(404) => Ok(Fetched::Missing),
                    Some(412) if known.is_some() => Ok(Fetched::Missing),
                    _ => Err(self.error(e)),
                };
            }
        };
        let generation = response.object().generation;
        // Some emulators ignore ifGenerationNotMatch and answer 200.
        if Some(generation) == known {
            return Ok(Fetched::Unchanged);
        }
        // The size the object's metadata gives, when it gives one (an emulator may not).
        let size = response.object().size;
        let announced = u64::try_from(size).ok().filter(|&n| n > 0);
        let mut document = Limited::new(self.url(), self.max_bytes, announced)?;
        while let Some(chunk) = response.next().await {
            document.push(&chunk.map_err(|e| self.error(e))?)?;
        }
        Ok(Fetched::Document {
            text: document.text()?,
            version: Version(generation.to_string()),
        })
    }

    async fn write(&self, expected: Option<&Version>, text: &str) -> Result<Version, WriteError> {
        let expected_generation = match expected {
            Some(version) => generation(version)
                .ok_or_else(|| self.error(format!("{version} is not a generation")))?,
            None => 0,
        };
        // Buffered: one multipart request, with its checksum in the metadata.
        let written = self
            .client
            .write_object(self.bucket_name(), &self.object, text.to_owned())
            .set_if_generation_match(expected_generation)
            .set_content_type("application/toml")
            .send_buffered()
            .await;
        match written {
            Ok(object) => Ok(Version(object.generation.to_string())),
            Err(e) if e.http_status_code() == Some(412) => Err(WriteError::Conflict),
            Err(e) => Err(self.error(e).into()),
        }
    }
}
