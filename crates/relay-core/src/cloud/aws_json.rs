//! The relay's own calls to an AWS JSON-protocol API, for the calls on a notification's path
//! where the SDK's own cost dominated: the SQS sink's, the DynamoDB ledger's claim and
//! settlement, the Firehose stream's. Through the SDK a DynamoDB `UpdateItem` cost about 87 µs
//! of CPU on loopback, and an SQS `SendMessageBatch` about 190 (its orchestrator, interceptors,
//! endpoint rules and general signer), against the relay's 50 µs for a whole notification
//! without memory. Here a call is its prepared body, signed ([`sigv4`](super::sigv4)) and sent
//! through the same kind of HTTP connector the SDK clients use (`aws_connector`: TLS, proxy),
//! one per caller, each with its own pool of connections.
//!
//! It keeps the SDK's behaviour where it matters: the credentials of the relay's configuration
//! (refreshed 5 minutes before they expire), at most 3 attempts with the standard retry's
//! backoff (full jitter from 1 s, doubling) for throttling, 5xx and connection failures, each
//! attempt within half the deadline and all of them within it. It does not correct clock skew
//! (an instance's clock off by more than 5 minutes is refused by AWS, as its other calls are).

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_smithy_runtime_api::client::http::{HttpConnector, SharedHttpConnector};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::byte_stream::ByteStream;
use aws_smithy_types::error::display::DisplayErrorContext;
use bytes::Bytes;

use super::sigv4::{Call, Secret, Signer, amz_date};

/// Attempts at most, as the relay's SDK clients (`RetryConfig::standard` with 3).
const MAX_ATTEMPTS: u32 = 3;
/// The standard retry's first backoff, doubled after each attempt, and its largest.
const BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(20);
/// Credentials are fetched again this long before they expire.
const REFRESH_BEFORE: Duration = Duration::from_secs(300);

/// A failed call.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    /// The service answered with an error: its status, its error type (the part after `#`),
    /// its message, and the whole body (DynamoDB puts the item a condition failed on there).
    #[error("{code} ({status}): {message}")]
    Service {
        status: u16,
        code: String,
        message: String,
        body: Bytes,
    },
    /// No answer: refused, reset, timed out, or unreadable.
    #[error("no answer from {endpoint}: {reason}")]
    Unanswered { endpoint: String, reason: String },
    /// The relay's credentials could not be had.
    #[error("no AWS credentials: {0}")]
    Credentials(String),
}

/// An answer's JSON, read as `T`; an answer that is not the protocol's JSON is no answer.
pub(crate) fn read<T: serde::de::DeserializeOwned>(answer: &[u8]) -> Result<T, CallError> {
    serde_json::from_slice(answer).map_err(|e| CallError::Unanswered {
        endpoint: "AWS".into(),
        reason: format!("an answer that is not the protocol's JSON: {e}"),
    })
}

impl CallError {
    /// Throttling, 5xx and no answer: worth another attempt, later.
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            Self::Service { status, code, .. } => {
                *status >= 500 || *status == 429 || super::is_throttling(code)
            }
            Self::Unanswered { .. } | Self::Credentials(_) => true,
        }
    }
}

/// Calls to one AWS JSON-protocol endpoint.
#[derive(Debug)]
pub(crate) struct AwsJson {
    connector: SharedHttpConnector,
    /// `scheme://host[:port]/`.
    endpoint: String,
    /// `host[:port]`, signed and sent as `Host`.
    host: String,
    /// `DynamoDB_20120810`: a call's `x-amz-target` is this, a dot and the operation.
    target_prefix: &'static str,
    /// `application/x-amz-json-1.0`.
    content_type: &'static str,
    signer: Signer,
    provider: Option<SharedCredentialsProvider>,
    credentials: Mutex<Option<Credentials>>,
    attempt_timeout: Option<Duration>,
    deadline: Option<Duration>,
}

/// The endpoint URL configured for the service `service_id` (`DynamoDB`, `Firehose`, `SQS`), as
/// the SDK's clients take it: `AWS_ENDPOINT_URL_<SERVICE>` or the profile's, else
/// `AWS_ENDPOINT_URL`; `None` for the region's own, which the service's endpoint rules name.
pub(crate) fn configured_endpoint(sdk: &aws_config::SdkConfig, service_id: &str) -> Option<String> {
    if sdk.get_origin("endpoint_url").is_client_config() {
        return sdk.endpoint_url().map(str::to_owned);
    }
    (sdk.service_config())
        .and_then(|config| {
            let key = aws_types::service_config::ServiceConfigKey::builder()
                .service_id(service_id)
                .env("AWS_ENDPOINT_URL")
                .profile("endpoint_url")
                .build()
                .ok()?;
            config.load_config(key)
        })
        .or_else(|| sdk.endpoint_url().map(str::to_owned))
}

/// What a service's calls need without a region: the relay's configuration names none.
pub(crate) const NO_REGION: &str = "no AWS region is configured (AWS_REGION)";

/// The calls to `$service` (a [`Service`]) in `$region` with the configuration `$sdk`, at the
/// endpoint the rules of its SDK crate (`$rules`, such as `aws_sdk_dynamodb::config::endpoint`)
/// name for that region and the configured endpoint ([`configured_endpoint`]), FIPS and dual
/// stack as `$sdk` says, and any further parameter (`account_id_endpoint_mode = "disabled"`): a
/// future of `Result<AwsJson, String>`.
macro_rules! client_of {
    ($rules:path, $sdk:expr, $region:expr, $service:expr $(, $param:ident = $value:expr)*) => {
        async {
            use $rules::{DefaultResolver, Params, ResolveEndpoint};
            let (sdk, region, service): (&aws_config::SdkConfig, &str, &$crate::cloud::aws_json::Service) =
                ($sdk, $region, $service);
            let no_endpoint = |e: &dyn std::fmt::Display| {
                format!("no {} endpoint for {region}: {e}", service.service_id)
            };
            let params = Params::builder()
                .region(region)
                .use_fips(sdk.use_fips().unwrap_or(false))
                .use_dual_stack(sdk.use_dual_stack().unwrap_or(false))
                .set_endpoint($crate::cloud::aws_json::configured_endpoint(sdk, service.service_id))
                $(.$param($value))*
                .build()
                .map_err(|e| no_endpoint(&e))?;
            let endpoint = (DefaultResolver::new().resolve_endpoint(&params).await)
                .map_err(|e| no_endpoint(&e))?;
            $crate::cloud::aws_json::AwsJson::new(sdk, (endpoint.url(), region), service)
        }
    };
}
pub(crate) use client_of;

/// An AWS JSON-protocol service: its id (in `AWS_ENDPOINT_URL_<ID>`), the name it signs for,
/// its target prefix (a call's `x-amz-target` is this, a dot and the operation) and its content
/// type.
pub(crate) struct Service {
    pub(crate) service_id: &'static str,
    pub(crate) signing_name: &'static str,
    pub(crate) target_prefix: &'static str,
    pub(crate) content_type: &'static str,
}

impl AwsJson {
    /// Calls to `service` at `endpoint`, signed for `region`, with the credentials and
    /// timeouts of `sdk`.
    pub(crate) fn new(
        sdk: &aws_config::SdkConfig,
        (endpoint, region): (&str, &str),
        service: &Service,
    ) -> Result<Self, String> {
        let uri: http::Uri = (endpoint.parse())
            .map_err(|e| format!("the endpoint {endpoint:?} is not a URL: {e}"))?;
        let host = (uri.authority())
            .ok_or_else(|| format!("the endpoint {endpoint:?} names no host"))?
            .to_string();
        let scheme = uri.scheme_str().unwrap_or("https");
        let timeouts = sdk.timeout_config();
        Ok(Self {
            connector: super::aws_connector(timeouts.and_then(|t| t.connect_timeout())),
            endpoint: format!("{scheme}://{host}/"),
            host,
            target_prefix: service.target_prefix,
            content_type: service.content_type,
            signer: Signer::new(region, service.signing_name),
            provider: sdk.credentials_provider(),
            credentials: Mutex::new(None),
            attempt_timeout: timeouts.and_then(|t| t.operation_attempt_timeout()),
            deadline: timeouts.and_then(|t| t.operation_timeout()),
        })
    }

    /// Calls `operation` with the JSON `body`: the answer's body, or why there is none. Retried
    /// as the type's summary says.
    pub(crate) async fn call(&self, operation: &str, body: Bytes) -> Result<Bytes, CallError> {
        let attempts = async {
            let mut attempt = 0;
            loop {
                match self.try_once(operation, &body).await {
                    Err(e) if e.is_retryable() && attempt + 1 < MAX_ATTEMPTS => {
                        let wait = backoff(attempt);
                        tracing::debug!(endpoint = %self.endpoint, operation, attempt, error = %e, wait_ms = wait.as_millis() as u64, "AWS call to be retried.");
                        tokio::time::sleep(wait).await;
                        attempt += 1;
                    }
                    answer => return answer,
                }
            }
        };
        within(self.deadline, attempts, || self.unanswered("out of time")).await
    }

    /// A call made to open the connection before the first notification: any answer will do,
    /// a refusal included (a role without the read permission); `None` for a refusal.
    pub(crate) async fn warm(
        &self,
        operation: &str,
        body: Bytes,
    ) -> Result<Option<Bytes>, CallError> {
        match self.call(operation, body).await {
            Ok(answer) => Ok(Some(answer)),
            Err(CallError::Service { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn try_once(&self, operation: &str, body: &Bytes) -> Result<Bytes, CallError> {
        let credentials = self.credentials().await?;
        let target = format!("{}.{operation}", self.target_prefix);
        let secret = Secret {
            access_key_id: credentials.access_key_id(),
            secret_access_key: credentials.secret_access_key(),
            session_token: credentials.session_token(),
        };
        let call = Call {
            host: &self.host,
            content_type: self.content_type,
            target: &target,
            body,
        };
        let amz_date = amz_date(SystemTime::now());
        let authorization = self.signer.sign(&secret, &call, &amz_date);
        let mut request = HttpRequest::new(SdkBody::from(body.clone()));
        request.set_method("POST").expect("POST is a method");
        request
            .set_uri(self.endpoint.as_str())
            .map_err(|e| self.unanswered(&e.to_string()))?;
        let headers = request.headers_mut();
        headers.insert("content-type", self.content_type);
        headers.insert("host", self.host.clone());
        headers.insert("x-amz-date", amz_date);
        headers.insert("x-amz-target", target);
        if let Some(token) = secret.session_token {
            headers.insert("x-amz-security-token", token.to_owned());
        }
        headers.insert("authorization", authorization);
        let exchange = async {
            let response = (self.connector.call(request).await)
                .map_err(|e| self.unanswered(&DisplayErrorContext(&e).to_string()))?;
            let status = response.status().as_u16();
            let error_type = response
                .headers()
                .get("x-amzn-errortype")
                .map(str::to_owned);
            let body = (ByteStream::new(response.into_body()).collect().await)
                .map_err(|e| self.unanswered(&DisplayErrorContext(&e).to_string()))?
                .into_bytes();
            Ok((status, error_type, body))
        };
        let (status, error_type, body) = within(self.attempt_timeout, exchange, || {
            self.unanswered("attempt timed out")
        })
        .await?;
        match status {
            200..=299 => Ok(body),
            _ => Err(service_error(status, error_type.as_deref(), body)),
        }
    }

    /// The relay's credentials, kept until 5 minutes before they expire.
    async fn credentials(&self) -> Result<Credentials, CallError> {
        let fresh = |c: &Credentials| {
            c.expiry()
                .is_none_or(|at| at > SystemTime::now() + REFRESH_BEFORE)
        };
        if let Some(kept) = (self.credentials.lock().unwrap_or_else(|p| p.into_inner()))
            .as_ref()
            .filter(|c| fresh(c))
        {
            return Ok(kept.clone());
        }
        let provider = (self.provider.as_ref())
            .ok_or_else(|| CallError::Credentials("none configured".into()))?;
        let credentials = (provider.provide_credentials().await)
            .map_err(|e| CallError::Credentials(DisplayErrorContext(&e).to_string()))?;
        *self.credentials.lock().unwrap_or_else(|p| p.into_inner()) = Some(credentials.clone());
        Ok(credentials)
    }

    fn unanswered(&self, reason: &str) -> CallError {
        CallError::Unanswered {
            endpoint: self.endpoint.clone(),
            reason: reason.to_owned(),
        }
    }
}

/// `work`, or `late()` when it takes longer than `limit`.
async fn within<T>(
    limit: Option<Duration>,
    work: impl Future<Output = Result<T, CallError>>,
    late: impl FnOnce() -> CallError,
) -> Result<T, CallError> {
    match limit {
        Some(limit) => (tokio::time::timeout(limit, work).await).unwrap_or_else(|_| Err(late())),
        None => work.await,
    }
}

/// The wait before attempt `attempt + 1`: full jitter over 1 s doubled per attempt, at most
/// 20 s.
fn backoff(attempt: u32) -> Duration {
    let ceiling = BACKOFF
        .saturating_mul(1 << attempt.min(16))
        .min(MAX_BACKOFF);
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).unwrap_or_default();
    ceiling.mul_f64(f64::from(u32::from_le_bytes(random)) / f64::from(u32::MAX))
}

/// An error answer: its type from `x-amzn-errortype` or the body's `__type` (the part after `#`,
/// before any `:`), and its message.
fn service_error(status: u16, error_type: Option<&str>, body: Bytes) -> CallError {
    #[derive(serde::Deserialize, Default)]
    struct Answer {
        #[serde(rename = "__type")]
        kind: Option<String>,
        #[serde(alias = "Message")]
        message: Option<String>,
    }
    let answer: Answer = serde_json::from_slice(&body).unwrap_or_default();
    let kind = error_type
        .map(str::to_owned)
        .or(answer.kind)
        .unwrap_or_else(|| format!("HTTP {status}"));
    let code = kind.rsplit('#').next().unwrap_or(&kind);
    let code = code.split(':').next().unwrap_or(code).to_owned();
    CallError::Service {
        status,
        code,
        message: answer.message.unwrap_or_default(),
        body,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use aws_credential_types::provider::future;

    use super::*;

    /// Credentials expiring `lifetime` from now (never without one), counting each fetch.
    #[derive(Debug)]
    struct Counting {
        lifetime: Option<Duration>,
        fetched: Arc<AtomicUsize>,
    }

    impl ProvideCredentials for Counting {
        fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            let n = self.fetched.fetch_add(1, Ordering::SeqCst);
            let expiry = self.lifetime.map(|l| SystemTime::now() + l);
            future::ProvideCredentials::ready(Ok(Credentials::new(
                format!("AKID{n}"),
                "secret",
                None,
                expiry,
                "test",
            )))
        }
    }

    #[tokio::test]
    async fn credentials_are_kept_until_five_minutes_before_they_expire() {
        for (lifetime, fetches) in [
            (None, 1),
            (Some(Duration::from_secs(3600)), 1),
            (Some(Duration::from_secs(200)), 3),
        ] {
            let fetched = Arc::new(AtomicUsize::new(0));
            let provider = Counting {
                lifetime,
                fetched: Arc::clone(&fetched),
            };
            let sdk = aws_config::SdkConfig::builder()
                .credentials_provider(SharedCredentialsProvider::new(provider))
                .build();
            let service = Service {
                service_id: "DynamoDB",
                signing_name: "dynamodb",
                target_prefix: "DynamoDB_20120810",
                content_type: "application/x-amz-json-1.0",
            };
            let api = AwsJson::new(&sdk, ("http://127.0.0.1:1", "eu-west-1"), &service).unwrap();
            for _ in 0..3 {
                api.credentials().await.unwrap();
            }
            assert_eq!(fetched.load(Ordering::SeqCst), fetches, "{lifetime:?}");
        }
    }

    #[test]
    fn error_answers_name_their_type_and_whether_to_retry() {
        let cases = [
            (
                400,
                None,
                r#"{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}"#,
                "ConditionalCheckFailedException",
                false,
            ),
            (
                400,
                Some("ProvisionedThroughputExceededException:http://internal.amazon.com/"),
                "{}",
                "ProvisionedThroughputExceededException",
                true,
            ),
            (
                400,
                None,
                r#"{"__type":"com.amazon.coral.validate#ValidationException","Message":"bad"}"#,
                "ValidationException",
                false,
            ),
            (503, None, "not json", "HTTP 503", true),
            (429, None, "", "HTTP 429", true),
        ];
        for (status, header, body, code, retryable) in cases {
            let error = service_error(status, header, Bytes::from(body));
            let CallError::Service { code: got, .. } = &error else {
                panic!("{error:?}")
            };
            assert_eq!(
                (got.as_str(), error.is_retryable()),
                (code, retryable),
                "{body}"
            );
        }
    }

    #[test]
    fn backoff_is_jittered_under_a_doubling_ceiling() {
        for attempt in 0..6 {
            let ceiling = Duration::from_secs(1 << attempt).min(MAX_BACKOFF);
            assert!((0..20).map(|_| backoff(attempt)).all(|d| d <= ceiling));
        }
        let spread: std::collections::BTreeSet<_> = (0..20).map(|_| backoff(2)).collect();
        assert!(spread.len() > 1, "jittered: {spread:?}");
    }
}
