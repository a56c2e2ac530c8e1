//! What the SQS and SNS sinks share: one SDK configuration, error classification, regions.
// A build with only one of the two (or only `secrets`) leaves some helpers unused.
#![cfg_attr(not(all(feature = "sqs", feature = "sns")), allow(dead_code))]

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, SdkConfig};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use super::{Message, Receipt, SinkError};

/// SQS and SNS accept at most ten message attributes.
pub(super) const MAX_ATTRIBUTES: usize = 10;

/// Loads the standard AWS configuration (`AWS_REGION`, credentials, `AWS_ENDPOINT_URL_*`) once,
/// with bounded retries that fit inside the sink deadline.
pub async fn load_aws_config(deadline: Duration) -> SdkConfig {
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(1).min(deadline))
        // Leave room for a retry inside the deadline.
        .operation_attempt_timeout(deadline / 2)
        .operation_timeout(deadline)
        .build();
    aws_config::defaults(BehaviorVersion::latest())
        .retry_config(RetryConfig::standard().with_max_attempts(3))
        .timeout_config(timeouts)
        .load()
        .await
}

/// The region in an AWS host name such as `sqs.eu-west-1.amazonaws.com`, if any.
pub(super) fn region_of_host(host: &str) -> Option<String> {
    let mut labels = host.split('.');
    let (_service, region) = (labels.next()?, labels.next()?);
    (host.ends_with(".amazonaws.com") || host.ends_with(".amazonaws.com.cn"))
        .then(|| region.to_owned())
}

/// Throttling, 5xx, timeouts and connection failures are retryable; a missing queue or topic,
/// access denied and invalid parameters are not.
pub(super) fn classify<E>(error: SdkError<E, HttpResponse>) -> SinkError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let retryable = match &error {
        SdkError::ServiceError(context) => {
            let status = context.raw().status().as_u16();
            let code = context.err().code().unwrap_or_default();
            status >= 500 || status == 429 || is_throttling(code)
        }
        SdkError::ConstructionFailure(_) => false,
        // Timeouts, dispatch (connection) failures and unreadable responses.
        _ => true,
    };
    let detail = DisplayErrorContext(&error).to_string();
    if retryable {
        SinkError::Retryable(detail.into())
    } else {
        SinkError::Permanent(detail.into())
    }
}

/// A per-entry failure of a batch call, from its error code and sender-fault flag.
pub(super) fn entry_failure(code: &str, sender_fault: bool, message: Option<&str>) -> SinkError {
    let detail = format!("{code}: {}", message.unwrap_or("no message"));
    if sender_fault && !is_throttling(code) {
        SinkError::Permanent(detail.into())
    } else {
        SinkError::Retryable(detail.into())
    }
}

fn is_throttling(code: &str) -> bool {
    code.contains("Throttl")
        || matches!(
            code,
            "RequestThrottled" | "ServiceUnavailable" | "InternalError" | "KMS.ThrottlingException"
        )
}

/// The message's attributes (the first [`MAX_ATTRIBUTES`]) as String message attributes, built
/// with the service's own value type.
pub(super) fn string_attributes<V, E>(
    message: &Message,
    build: impl Fn(&str) -> Result<V, E>,
) -> Result<std::collections::HashMap<String, V>, SinkError>
where
    E: std::error::Error + Send + Sync + 'static,
{
    message
        .attributes
        .iter()
        .take(MAX_ATTRIBUTES)
        .map(|(name, value)| {
            let value = build(value).map_err(|e| SinkError::Permanent(Box::new(e)))?;
            Ok((name.to_owned(), value))
        })
        .collect()
}

/// The payload as the text SQS bodies and SNS messages are; it was parsed as JSON, so it is
/// UTF-8.
pub(super) fn payload_text(message: &Message) -> Result<String, SinkError> {
    String::from_utf8(message.payload.to_vec()).map_err(|e| SinkError::Permanent(Box::new(e)))
}

/// What a batch call reported: accepted entries with their message ids, and failed entries.
pub(super) struct BatchReport {
    pub(super) accepted: Vec<(String, Option<String>)>,
    pub(super) failed: Vec<(String, SinkError)>,
}

/// Runs one batch call for `batch`, entry `i` carrying the id `i`, and gives every message
/// its own result: entries that cannot be built fail alone, a failed call fails every entry
/// it carried, and an entry the service did not mention is retried.
pub(super) async fn send_entries<E, Fut>(
    batch: &[Message],
    build: impl Fn(String, &Message) -> Result<E, SinkError>,
    call: impl FnOnce(Vec<E>) -> Fut,
) -> Vec<Result<Receipt, SinkError>>
where
    Fut: Future<Output = Result<BatchReport, SinkError>>,
{
    let mut results: Vec<Option<Result<Receipt, SinkError>>> = Vec::with_capacity(batch.len());
    let mut entries = Vec::with_capacity(batch.len());
    for (i, message) in batch.iter().enumerate() {
        match build(i.to_string(), message) {
            Ok(entry) => {
                entries.push(entry);
                results.push(None);
            }
            Err(e) => results.push(Some(Err(e))),
        }
    }
    if !entries.is_empty() {
        match call(entries).await {
            Ok(report) => {
                let slot = |id: &str| id.parse::<usize>().ok();
                for (id, message_id) in report.accepted {
                    if let Some(r) = slot(&id).and_then(|i| results.get_mut(i)) {
                        *r = Some(Ok(Receipt { message_id }));
                    }
                }
                for (id, error) in report.failed {
                    if let Some(r) = slot(&id).and_then(|i| results.get_mut(i)) {
                        *r = Some(Err(error));
                    }
                }
            }
            Err(error) => {
                for r in results.iter_mut().filter(|r| r.is_none()) {
                    *r = Some(Err(error.replicate()));
                }
            }
        }
    }
    results
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                Err(SinkError::Retryable(
                    "the service did not report on this entry".into(),
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_come_from_aws_hosts_only() {
        assert_eq!(
            region_of_host("sqs.eu-west-1.amazonaws.com").as_deref(),
            Some("eu-west-1")
        );
        assert_eq!(region_of_host("127.0.0.1"), None);
        assert_eq!(region_of_host("sqs.example.org"), None);
    }

    #[test]
    fn batch_entry_failures() {
        assert!(!entry_failure("InvalidParameterValue", true, None).is_retryable());
        assert!(entry_failure("InternalError", false, None).is_retryable());
        assert!(entry_failure("ThrottlingException", true, None).is_retryable());
    }
}
