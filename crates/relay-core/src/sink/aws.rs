//! What the SQS and SNS sinks share (their SDK configuration is the relay's one, from
//! [`Cloud`](crate::cloud::Cloud)): the entries they send (body, String attributes, FIFO ids),
//! the mapping of a batch report to per-message results, and error classification. The SDK
//! call is the only per-service code, behind [`AwsApi`].
// A build with only one of the two (or only `secrets`) leaves some helpers unused.
#![cfg_attr(not(all(feature = "sqs", feature = "sns")), allow(dead_code))]

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use bytes::Bytes;

use super::{Attributes, Message, Receipt, SinkError};

/// One message as SQS and SNS take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AwsEntry {
    /// The entry's id within its batch: its index.
    pub(super) id: String,
    /// The payload, shared with the message, not copied; checked to be UTF-8 (it was parsed
    /// as JSON, so it is): read it with [`body`](Self::body).
    body: Bytes,
    /// String message attributes, shared with the message; the shape has already kept at
    /// most ten.
    pub(super) attributes: Attributes,
    /// FIFO `MessageGroupId`.
    pub(super) group_id: Option<String>,
    /// FIFO `MessageDeduplicationId`.
    pub(super) dedup_id: Option<String>,
    /// The request's trace context as X-Ray's header, SQS's `AWSTraceHeader` (SNS takes it
    /// as an attribute instead).
    pub(super) trace_header: Option<String>,
}

impl AwsEntry {
    pub(super) fn new(id: usize, message: &Message) -> Result<Self, SinkError> {
        std::str::from_utf8(&message.payload).map_err(|e| SinkError::Permanent(Box::new(e)))?;
        Ok(Self {
            id: id.to_string(),
            body: message.payload.clone(),
            attributes: message.attributes.clone(),
            group_id: message.group_id.clone(),
            dedup_id: message.dedup_id.clone(),
            trace_header: message
                .trace
                .as_deref()
                .map(super::TraceContext::xray_header),
        })
    }

    /// The payload's bytes, which [`new`](Self::new) checked are UTF-8.
    pub(super) fn body(&self) -> &[u8] {
        &self.body
    }

    /// The payload as an owned string, for an SDK call that takes one.
    pub(super) fn body_string(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// An entry of `body` as given, for tests of what is built from entries.
    #[cfg(test)]
    pub(super) fn for_tests(id: &str, body: &str, attributes: Attributes) -> Self {
        Self {
            id: id.to_owned(),
            body: Bytes::copy_from_slice(body.as_bytes()),
            attributes,
            group_id: None,
            dedup_id: None,
            trace_header: None,
        }
    }
}

/// What a batch call reported: accepted entries with their message ids, and failed entries.
#[derive(Debug, Default)]
pub(super) struct BatchReport {
    pub(super) accepted: Vec<(String, Option<String>)>,
    pub(super) failed: Vec<(String, SinkError)>,
}

/// One service's publish calls: SQS `SendMessage`/`SendMessageBatch`, SNS `Publish`/`PublishBatch`.
#[async_trait::async_trait]
pub(super) trait AwsApi: Send + Sync + std::fmt::Debug + 'static {
    /// Sends one entry; the message id on success.
    async fn send(&self, entry: AwsEntry) -> Result<Option<String>, SinkError>;
    /// Sends up to ten entries in one call.
    async fn send_batch(&self, entries: Vec<AwsEntry>) -> Result<BatchReport, SinkError>;
    /// One call that publishes nothing (the queue's or topic's attributes), to open the
    /// connection ([`opened`] reads its result).
    async fn warm(&self) -> Result<(), SinkError> {
        Ok(())
    }
}

/// A warming call's result: any answer from the service, a refusal included (a role without
/// the read permission), means the connection and its TLS session are open; only a call that
/// got no answer failed.
pub(crate) fn opened<T, E>(result: Result<T, SdkError<E, HttpResponse>>) -> Result<(), SinkError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match result {
        Ok(_) | Err(SdkError::ServiceError(_)) => Ok(()),
        Err(e) => Err(classify(e)),
    }
}

/// A service's calls as the batcher drives them.
#[derive(Debug)]
pub(super) struct AwsSender<A>(pub(super) A);

#[cfg(any(feature = "sqs", feature = "sns"))]
#[async_trait::async_trait]
impl<A: AwsApi> super::batch::SendBatch for AwsSender<A> {
    async fn send_one(&self, message: &Message) -> Result<Receipt, SinkError> {
        let message_id = self.0.send(AwsEntry::new(0, message)?).await?;
        Ok(Receipt::new(message_id))
    }

    async fn send_many(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
        send_entries(&self.0, batch).await
    }

    async fn warm(&self) -> Result<(), SinkError> {
        self.0.warm().await
    }
}

/// Sends `batch` in one call, entry `i` carrying the id `i`, and gives every message its own
/// result: an entry that cannot be built fails alone, a failed call fails every entry it
/// carried, and an entry the service did not mention is retried.
async fn send_entries(api: &dyn AwsApi, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
    let mut results: Vec<Option<Result<Receipt, SinkError>>> = Vec::with_capacity(batch.len());
    let mut entries = Vec::with_capacity(batch.len());
    for (i, message) in batch.iter().enumerate() {
        match AwsEntry::new(i, message) {
            Ok(entry) => {
                entries.push(entry);
                results.push(None);
            }
            Err(e) => results.push(Some(Err(e))),
        }
    }
    if !entries.is_empty() {
        match api.send_batch(entries).await {
            Ok(report) => {
                let failed = report.failed.into_iter().map(|(id, e)| (id, Err(e)));
                let accepted = report
                    .accepted
                    .into_iter()
                    .map(|(id, message_id)| (id, Ok(Receipt::new(message_id))));
                for (id, result) in accepted.chain(failed) {
                    if let Some(slot) = id.parse::<usize>().ok().and_then(|i| results.get_mut(i)) {
                        *slot = Some(result);
                    }
                }
            }
            Err(error) => {
                for slot in results.iter_mut().filter(|r| r.is_none()) {
                    *slot = Some(Err(error.replicate()));
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

/// Throttling, 5xx, timeouts and connection failures are retryable; a missing queue or topic,
/// access denied and invalid parameters are not. The DynamoDB ledger's SDK calls share it.
pub(crate) fn classify<E>(error: SdkError<E, HttpResponse>) -> SinkError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let retryable = match &error {
        SdkError::ServiceError(context) => {
            let status = context.raw().status().as_u16();
            let code = context.err().code().unwrap_or_default();
            status >= 500 || status == 429 || crate::cloud::is_throttling(code)
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

/// A failed call of the relay's own AWS caller, classified as [`classify`] classifies the
/// SDK's: throttling, 5xx and no answer are retryable, the rest is not.
#[cfg(any(feature = "dynamodb", feature = "firehose", feature = "sqs"))]
impl From<crate::cloud::aws_json::CallError> for SinkError {
    fn from(error: crate::cloud::aws_json::CallError) -> Self {
        match error.is_retryable() {
            true => SinkError::Retryable(error.to_string().into()),
            false => SinkError::Permanent(error.to_string().into()),
        }
    }
}

/// A per-entry failure of a batch call, from its error code and sender-fault flag.
pub(super) fn entry_failure(code: &str, sender_fault: bool, message: Option<&str>) -> SinkError {
    let detail = format!("{code}: {}", message.unwrap_or("no message"));
    if sender_fault && !crate::cloud::is_throttling(code) {
        SinkError::Permanent(detail.into())
    } else {
        SinkError::Retryable(detail.into())
    }
}

/// Turns any SDK builder error into a permanent failure: the entry itself is wrong.
pub(super) fn invalid<E: std::error::Error + Send + Sync + 'static>(error: E) -> SinkError {
    SinkError::Permanent(Box::new(error))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::SystemTime;

    use bytes::Bytes;

    use super::*;
    use crate::sink::Attributes;

    #[test]
    fn batch_entry_failures() {
        assert!(!entry_failure("InvalidParameterValue", true, None).is_retryable());
        assert!(entry_failure("InternalError", false, None).is_retryable());
        assert!(entry_failure("ThrottlingException", true, None).is_retryable());
    }

    /// Answers a batch with a fixed report and records the entries it was given.
    #[derive(Debug, Default)]
    struct Scripted {
        report: Mutex<Option<Result<BatchReport, SinkError>>>,
        seen: Mutex<Vec<AwsEntry>>,
    }

    #[async_trait::async_trait]
    impl AwsApi for Scripted {
        async fn send(&self, entry: AwsEntry) -> Result<Option<String>, SinkError> {
            self.seen.lock().unwrap().push(entry);
            Ok(Some("one".into()))
        }

        async fn send_batch(&self, entries: Vec<AwsEntry>) -> Result<BatchReport, SinkError> {
            self.seen.lock().unwrap().extend(entries);
            self.report.lock().unwrap().take().expect("one call")
        }
    }

    fn message(payload: &'static [u8], group: Option<&str>) -> Message {
        let mut attributes = Attributes::default();
        attributes.push("dss.event_type", "CREATE");
        Message {
            payload: Bytes::from_static(payload),
            attributes,
            dedup_key: "k".into(),
            group_id: group.map(str::to_owned),
            dedup_id: group.map(|_| "k".to_owned()),
            ordering_key: None,
            received_at: SystemTime::UNIX_EPOCH,
            trace: None,
        }
    }

    #[test]
    fn entries_carry_the_body_attributes_and_fifo_ids() {
        let entry = AwsEntry::new(3, &message(b"{\"a\":1}", Some("g"))).unwrap();
        assert_eq!(entry.id, "3");
        assert_eq!(entry.body(), b"{\"a\":1}");
        assert_eq!(
            entry.attributes.iter().collect::<Vec<_>>(),
            [("dss.event_type", "CREATE")]
        );
        assert_eq!(
            (entry.group_id.as_deref(), entry.dedup_id.as_deref()),
            (Some("g"), Some("k"))
        );
        let standard = AwsEntry::new(0, &message(b"{}", None)).unwrap();
        assert_eq!((standard.group_id, standard.dedup_id), (None, None));
        assert!(
            !AwsEntry::new(0, &message(b"\xff", None))
                .unwrap_err()
                .is_retryable()
        );
    }

    #[test]
    fn entries_share_the_payload_and_the_attributes() {
        let message = message(b"{\"a\":1}", None);
        let entry = AwsEntry::new(0, &message).unwrap();
        assert_eq!(entry.body().as_ptr(), message.payload.as_ptr());
        assert_eq!(
            entry.attributes.get("dss.event_type").map(str::as_ptr),
            message.attributes.get("dss.event_type").map(str::as_ptr)
        );
    }

    #[tokio::test]
    async fn a_partial_batch_fails_exactly_the_rejected_entries() {
        let api = Scripted::default();
        *api.report.lock().unwrap() = Some(Ok(BatchReport {
            accepted: vec![
                ("0".into(), Some("m0".into())),
                ("3".into(), Some("m3".into())),
            ],
            failed: vec![(
                "2".into(),
                entry_failure("InvalidParameterValue", true, None),
            )],
        }));
        let batch = [
            message(b"{}", None),
            message(b"\xff", None),
            message(b"{}", None),
            message(b"{}", None),
            message(b"{}", None),
        ];
        let results = send_entries(&api, &batch).await;
        assert_eq!(
            results[0].as_ref().unwrap().message_id.as_deref(),
            Some("m0")
        );
        assert!(
            !results[1].as_ref().unwrap_err().is_retryable(),
            "not UTF-8: never sent"
        );
        assert!(!results[2].as_ref().unwrap_err().is_retryable());
        assert_eq!(
            results[3].as_ref().unwrap().message_id.as_deref(),
            Some("m3")
        );
        assert!(
            results[4].as_ref().unwrap_err().is_retryable(),
            "unreported: retried"
        );
        let ids: Vec<String> = api
            .seen
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.id.clone())
            .collect();
        assert_eq!(ids, ["0", "2", "3", "4"]);
    }

    #[tokio::test]
    async fn a_failed_call_fails_every_entry_it_carried() {
        let api = Scripted::default();
        *api.report.lock().unwrap() = Some(Err(SinkError::Retryable("throttled".into())));
        let results = send_entries(&api, &[message(b"{}", None), message(b"{}", None)]).await;
        assert!(
            results
                .iter()
                .all(|r| r.as_ref().is_err_and(SinkError::is_retryable))
        );
    }
}
