//! The clouds a relay reaches, configured once for all of its clients: one [`Cloud`] is built at
//! start and handed to everything that opens a connection (the sinks, the ledger, the archive
//! and its stream, the stored routes, Secrets Manager). On AWS it holds the one SDK
//! configuration (region, credentials, `AWS_ENDPOINT_URL_*`, retries and timeouts within the
//! sink deadline) every AWS client is built from, over one HTTP client; it is loaded at start
//! when anything configured is on AWS, else at its first use (a store that `relay trace` or
//! `relay replay` opens). The Google clients share one credential, built once (`google.rs`).

use std::time::Duration;

#[cfg(any(feature = "dynamodb", feature = "firehose", feature = "sqs"))]
pub(crate) use aws::aws_connector;
#[cfg(feature = "aws")]
pub(crate) use aws::is_throttling;
#[cfg(feature = "aws")]
pub use aws::{aws_http_client, load_aws_config};

#[cfg(any(feature = "dynamodb", feature = "firehose", feature = "sqs"))]
pub(crate) mod aws_json;
#[cfg(any(feature = "dynamodb", feature = "firehose", feature = "sqs"))]
mod sigv4;

/// How long a tool's own load of the AWS configuration may take.
const TOOL_DEADLINE: Duration = Duration::from_secs(5);

/// The clouds' configuration the relay's clients share, loaded once.
#[derive(Debug, Clone)]
pub struct Cloud {
    /// The AWS configuration, loaded at its first use (or at start).
    #[cfg(feature = "aws")]
    aws: std::sync::Arc<tokio::sync::OnceCell<aws_config::SdkConfig>>,
    /// How long a call to AWS may take, retries included.
    #[cfg(feature = "aws")]
    deadline: Duration,
}

impl Default for Cloud {
    /// A tool's: calls within 5 s.
    fn default() -> Self {
        Self::new(TOOL_DEADLINE)
    }
}

impl Cloud {
    /// Nothing loaded yet: each cloud's configuration is loaded at its first use, its calls
    /// bounded by `deadline` (`RELAY_SINK_TIMEOUT_MS` for a relay).
    #[cfg_attr(not(feature = "aws"), allow(unused_variables))]
    pub fn new(deadline: Duration) -> Self {
        Self {
            #[cfg(feature = "aws")]
            aws: Default::default(),
            #[cfg(feature = "aws")]
            deadline,
        }
    }

    /// The AWS configuration, loaded at the first call and shared after it.
    #[cfg(feature = "aws")]
    pub async fn aws(&self) -> &aws_config::SdkConfig {
        (self.aws)
            .get_or_init(|| load_aws_config(self.deadline))
            .await
    }

    /// An S3 client's configuration, each of its calls within `deadline` when one is given.
    /// An endpoint set with `AWS_ENDPOINT_URL` or `AWS_ENDPOINT_URL_S3` (an emulator) is
    /// addressed path-style.
    #[cfg(feature = "s3")]
    pub(crate) async fn s3(&self, deadline: Option<Duration>) -> aws_sdk_s3::Config {
        let custom_endpoint = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]
            .iter()
            .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
        let mut config = aws_sdk_s3::config::Builder::from(self.aws().await);
        if let Some(deadline) = deadline {
            config = config.timeout_config(aws::timeouts(deadline));
        }
        config.force_path_style(custom_endpoint).build()
    }
}

#[cfg(feature = "aws")]
mod aws {
    use std::time::Duration;

    use aws_config::retry::RetryConfig;
    use aws_config::timeout::TimeoutConfig;
    use aws_config::{BehaviorVersion, SdkConfig};
    use aws_smithy_http_client::proxy::ProxyConfig;
    use aws_smithy_http_client::{Connector, ConnectorBuilder, tls};
    use aws_smithy_runtime_api::client::http::{HttpConnectorSettings, SharedHttpClient};

    /// Loads the standard AWS configuration (`AWS_REGION`, credentials, `AWS_ENDPOINT_URL_*`) once,
    /// with bounded retries that fit inside the sink deadline.
    pub async fn load_aws_config(deadline: Duration) -> SdkConfig {
        let loader = aws_config::defaults(BehaviorVersion::latest())
            .http_client(aws_http_client())
            .retry_config(RetryConfig::standard().with_max_attempts(3))
            .timeout_config(timeouts(deadline));
        // Lambda gives the function's region and role credentials as variables, always: take them
        // as they are, rather than walking the default chains (profile files, SSO, web identity,
        // the instance metadata service) that Lambda never offers.
        let on_lambda = std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some();
        let region = std::env::var("AWS_REGION").ok().filter(|r| !r.is_empty());
        let loader = match (on_lambda, region) {
            (true, Some(region)) if std::env::var_os("AWS_ACCESS_KEY_ID").is_some() => loader
                .region(aws_config::Region::new(region))
                .credentials_provider(
                    aws_config::environment::EnvironmentVariableCredentialsProvider::new(),
                ),
            _ => loader,
        };
        loader.load().await
    }

    /// Timeouts that leave room for a retry within `deadline`, connecting within 1 s.
    pub(crate) fn timeouts(deadline: Duration) -> TimeoutConfig {
        TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(1).min(deadline))
            .operation_attempt_timeout(deadline / 2)
            .operation_timeout(deadline)
            .build()
    }

    /// The HTTP client every AWS client of the relay sends through, its credential providers
    /// included: the SDK's own (hyper, connections pooled per timeout setting, a proxy from
    /// `HTTPS_PROXY` and `NO_PROXY`, the system's roots and `SSL_CERT_FILE`), with rustls on the
    /// provider `AWS_CRYPTO` names. The Google clients keep their own TLS.
    pub fn aws_http_client() -> SharedHttpClient {
        // What the SDK's default client does (aws-smithy-runtime's `default_https_client`, which
        // uses this same constructor) with the crypto provider chosen here.
        aws_smithy_http_client::Builder::new().build_with_connector_fn(|settings, components| {
            connector(settings.cloned(), components.and_then(|c| c.sleep_impl()))
        })
    }

    /// A connector of the same kind, for the relay's own calls (`aws_json.rs`), connecting
    /// within `connect_timeout`.
    #[cfg(any(feature = "dynamodb", feature = "firehose", feature = "sqs"))]
    pub(crate) fn aws_connector(
        connect_timeout: Option<Duration>,
    ) -> aws_smithy_runtime_api::client::http::SharedHttpConnector {
        let mut settings = HttpConnectorSettings::builder();
        settings.set_connect_timeout(connect_timeout);
        let settings = settings.build();
        let sleep = aws_smithy_async::rt::sleep::default_async_sleep();
        aws_smithy_runtime_api::client::http::SharedHttpConnector::new(connector(
            Some(settings),
            sleep,
        ))
    }

    fn connector(
        settings: Option<HttpConnectorSettings>,
        sleep: Option<aws_smithy_async::rt::sleep::SharedAsyncSleep>,
    ) -> Connector {
        let mut connector =
            ConnectorBuilder::default().tls_provider(tls::Provider::Rustls(AWS_CRYPTO));
        connector.set_connector_settings(settings);
        connector.set_sleep_impl(sleep);
        connector.set_proxy_config(Some(ProxyConfig::from_env()));
        connector.build()
    }

    /// The error codes of throttling and of a service that is briefly unavailable, for any AWS
    /// service the relay calls.
    pub(crate) fn is_throttling(code: &str) -> bool {
        code.contains("Throttl")
            || matches!(
                code,
                "RequestThrottled" | "ServiceUnavailable" | "InternalError" | "KMS.ThrottlingException"
                // DynamoDB's (the ledger's), answered with a 400.
                | "ProvisionedThroughputExceededException" | "RequestLimitExceeded"
            )
    }

    /// The AWS clients' TLS cryptography. By default ring: the SDK's own default, aws-lc, is a C
    /// library of about 0.5 MB in the Lambda's binary (150 KB of its zip). With the `aws-lc`
    /// feature (relay-gcf, which links aws-lc for Google's clients anyway; the Lambda built with
    /// `LAMBDA_FEATURES=aws-lc`), aws-lc, which also offers the post-quantum key exchange
    /// X25519MLKEM768 to endpoints that take it; ring's are X25519 and the NIST curves.
    #[cfg(feature = "aws-lc")]
    const AWS_CRYPTO: tls::rustls_provider::CryptoMode = tls::rustls_provider::CryptoMode::AwsLc;
    /// The AWS clients' TLS cryptography (see the `aws-lc` feature's).
    #[cfg(not(feature = "aws-lc"))]
    const AWS_CRYPTO: tls::rustls_provider::CryptoMode = tls::rustls_provider::CryptoMode::Ring;
}
