//! The archive in a Cloud Storage bucket: writes with `ifGenerationMatch=0` (412 when the
//! object exists: never an overwrite, which `roles/storage.objectCreator` could not do
//! anyway) and reads through google-cloud-storage; listings by hour through the JSON API's
//! `objects.list` (the crate lists over gRPC only), with the same credentials.

use bytes::Bytes;
use google_cloud_auth::credentials::{CacheableResource, Credentials};
use google_cloud_storage::client::Storage;
use serde::Deserialize;

use super::{Archive, ArchiveError, Written};

/// A Cloud Storage bucket holding records under a prefix.
#[derive(Debug, Clone)]
pub(crate) struct GcsArchive {
    storage: Storage,
    /// For listings: the JSON API's endpoint, and the credentials (none for an emulator).
    http: reqwest::Client,
    endpoint: String,
    credentials: Option<Credentials>,
    bucket: String,
    prefix: String,
}

impl GcsArchive {
    /// The archive under `prefix` (empty or ending in `/`) in `bucket`: against
    /// `STORAGE_EMULATOR_HOST` with anonymous credentials when it is set, else against Google
    /// with the platform's default credentials.
    pub(crate) async fn new(bucket: &str, prefix: &str) -> Result<Self, ArchiveError> {
        let emulator = crate::google::emulator("STORAGE_EMULATOR_HOST");
        let open = |e: &dyn std::fmt::Display| {
            ArchiveError::Open(format!("cannot build the Cloud Storage client: {e}"))
        };
        let mut storage = Storage::builder();
        let (endpoint, credentials) = match &emulator {
            Some(endpoint) => {
                storage = (storage.with_endpoint(endpoint.clone()))
                    .with_credentials(crate::google::anonymous());
                (endpoint.clone(), None)
            }
            None => {
                let credentials = crate::google::credentials().map_err(|e| open(&e))?;
                storage = storage.with_credentials(credentials.clone());
                let endpoint = "https://storage.googleapis.com".to_owned();
                (endpoint, Some(credentials))
            }
        };
        let mut http = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30));
        if credentials.is_none() {
            http = http.no_proxy();
        }
        let http = http.build().map_err(|e| open(&e))?;
        Ok(Self {
            storage: storage.build().await.map_err(|e| open(&e))?,
            http,
            endpoint,
            credentials,
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
        })
    }

    fn bucket_name(&self) -> String {
        format!("projects/_/buckets/{}", self.bucket)
    }

    fn failure(&self, e: &google_cloud_storage::Error) -> ArchiveError {
        let message = format!("gs://{}: {e}", self.bucket);
        match e.http_status_code() {
            Some(400 | 401 | 403 | 404) => ArchiveError::Refused(message),
            _ => ArchiveError::Unavailable(message),
        }
    }
}

#[async_trait::async_trait]
impl Archive for GcsArchive {
    fn url(&self) -> String {
        format!("gs://{}/{}", self.bucket, self.prefix)
    }

    async fn put(&self, key: &str, body: Bytes) -> Result<Written, ArchiveError> {
        let written = self
            .storage
            .write_object(self.bucket_name(), format!("{}{key}", self.prefix), body)
            .set_if_generation_match(0)
            .set_content_type("application/json")
            .send_buffered()
            .await;
        match written {
            Ok(_) => Ok(Written::Created),
            Err(e) if e.http_status_code() == Some(412) => Ok(Written::Existed),
            Err(e) => Err(self.failure(&e)),
        }
    }

    async fn list(&self, folder: &str) -> Result<Vec<String>, ArchiveError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Page {
            #[serde(default)]
            items: Vec<Item>,
            #[serde(default)]
            next_page_token: Option<String>,
        }
        #[derive(Deserialize)]
        struct Item {
            name: String,
        }
        let url = format!("{}/storage/v1/b/{}/o", self.endpoint, self.bucket);
        let prefix = format!("{}{folder}", self.prefix);
        let unavailable = |e: &dyn std::fmt::Display| {
            ArchiveError::Unavailable(format!("gs://{}: {e}", self.bucket))
        };
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            // A page of at most 1000 names, as Google gives by default; said here so that
            // an emulator (fake-gcs-server gives everything at once without it) pages too.
            let mut query = vec![
                ("prefix", prefix.as_str()),
                ("maxResults", "1000"),
                ("fields", "items(name),nextPageToken"),
            ];
            if let Some(token) = &token {
                query.push(("pageToken", token));
            }
            let mut request = self.http.get(&url).query(&query);
            if let Some(credentials) = &self.credentials {
                match credentials.headers(http::Extensions::new()).await {
                    Ok(CacheableResource::New { data, .. }) => request = request.headers(data),
                    Ok(CacheableResource::NotModified) => {
                        return Err(unavailable(&"no Google auth headers"));
                    }
                    Err(e) if e.is_transient() => return Err(unavailable(&e)),
                    Err(e) => {
                        return Err(ArchiveError::Refused(format!("gs://{}: {e}", self.bucket)));
                    }
                }
            }
            let response = request.send().await.map_err(|e| unavailable(&e))?;
            let status = response.status().as_u16();
            let body = response.bytes().await.map_err(|e| unavailable(&e))?;
            if status != 200 {
                let message = format!(
                    "gs://{}: listing answered {status}: {}",
                    self.bucket,
                    String::from_utf8_lossy(&body)
                );
                return Err(match status {
                    400..=499 if status != 429 => ArchiveError::Refused(message),
                    _ => ArchiveError::Unavailable(message),
                });
            }
            let page: Page = serde_json::from_slice(&body).map_err(|e| unavailable(&e))?;
            keys.extend(
                page.items
                    .into_iter()
                    .filter_map(|item| item.name.strip_prefix(&self.prefix).map(str::to_owned)),
            );
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(next) => token = Some(next),
                None => return Ok(keys),
            }
        }
    }

    /// A read of an object no record has: the token fetched and the connection open before the
    /// first write; a refusal is an answer too.
    async fn warm(&self) -> Result<(), ArchiveError> {
        match self.read(".relay-warm", 1).await {
            Ok(_) | Err(ArchiveError::Refused(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn read(&self, key: &str, limit: usize) -> Result<Option<Bytes>, ArchiveError> {
        let read = self
            .storage
            .read_object(self.bucket_name(), format!("{}{key}", self.prefix))
            .send()
            .await;
        let mut response = match read {
            Ok(response) => response,
            Err(e) if e.http_status_code() == Some(404) => return Ok(None),
            Err(e) => return Err(self.failure(&e)),
        };
        let mut bytes = Vec::new();
        while let Some(chunk) = response.next().await {
            super::take_chunk(
                &mut bytes,
                &chunk.map_err(|e| self.failure(&e))?,
                key,
                limit,
            )?;
        }
        Ok(Some(Bytes::from(bytes)))
    }
}
