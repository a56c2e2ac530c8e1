//! The archive's records through an Amazon Data Firehose delivery stream
//! (`RELAY_ARCHIVE_STREAM=firehose://NAME`): `PutRecordBatch` for records queued together,
//! `PutRecord` for one alone. Firehose answers once it holds a record durably, and delivers
//! the records it buffered as one object under the archive's prefix and hour.

use aws_sdk_firehose::Client;
use aws_sdk_firehose::primitives::Blob;
use aws_sdk_firehose::types::Record;
use aws_smithy_types::error::display::DisplayErrorContext;
use bytes::Bytes;

use super::ArchiveError;
use super::stream::RecordStream;
use crate::sink::SinkError;

/// The largest record Firehose takes: 1,000 KiB.
const MAX_RECORD_BYTES: usize = 1_000 * 1024;

/// A delivery stream taking the archive's records.
#[derive(Debug, Clone)]
pub(crate) struct FirehoseStream {
    client: Client,
    name: String,
}

impl FirehoseStream {
    /// The delivery stream `name`, with the AWS configuration `sdk`.
    pub(crate) fn new(sdk: &aws_config::SdkConfig, name: &str) -> Self {
        Self {
            client: Client::new(sdk),
            name: name.to_owned(),
        }
    }

    /// A call's failure, for every record it carried.
    fn failure<E>(
        &self,
        error: aws_sdk_firehose::error::SdkError<E, aws_sdk_firehose::config::http::HttpResponse>,
    ) -> ArchiveError
    where
        E: aws_sdk_firehose::error::ProvideErrorMetadata
            + std::error::Error
            + Send
            + Sync
            + 'static,
    {
        match crate::sink::classify(error) {
            SinkError::Retryable(e) => ArchiveError::Unavailable(format!("{}: {e}", self.url())),
            SinkError::Permanent(e) => ArchiveError::Refused(format!("{}: {e}", self.url())),
        }
    }

    /// One record's refusal in a batch: Firehose's own trouble is worth retrying.
    fn entry_failure(&self, code: &str, message: Option<&str>) -> ArchiveError {
        let detail = format!(
            "{}: {code}: {}",
            self.url(),
            message.unwrap_or("no message")
        );
        match code {
            "ServiceUnavailableException" | "InternalFailure" | "ThrottlingException" => {
                ArchiveError::Unavailable(detail)
            }
            _ => ArchiveError::Refused(detail),
        }
    }
}

#[async_trait::async_trait]
impl RecordStream for FirehoseStream {
    fn url(&self) -> String {
        format!("firehose://{}", self.name)
    }

    fn max_line_bytes(&self) -> usize {
        MAX_RECORD_BYTES
    }

    async fn append(&self, lines: &[Bytes]) -> Vec<Result<String, ArchiveError>> {
        let record = |line: &Bytes| {
            Record::builder()
                .data(Blob::new(line.to_vec()))
                .build()
                .expect("a record with data")
        };
        if let [line] = lines {
            let put = self.client.put_record().delivery_stream_name(&self.name);
            return vec![match put.record(record(line)).send().await {
                Ok(out) => Ok(format!("{}/{}", self.url(), out.record_id())),
                Err(e) => Err(self.failure(e)),
            }];
        }
        let put = (self.client.put_record_batch())
            .delivery_stream_name(&self.name)
            .set_records(Some(lines.iter().map(record).collect()));
        let out = match put.send().await {
            Ok(out) => out,
            Err(e) => {
                let error = self.failure(e);
                return lines.iter().map(|_| Err(error.clone())).collect();
            }
        };
        let mut answers: Vec<Result<String, ArchiveError>> = (out.request_responses().iter())
            .map(|entry| match (entry.error_code(), entry.record_id()) {
                (Some(code), _) => Err(self.entry_failure(code, entry.error_message())),
                (None, Some(id)) => Ok(format!("{}/{id}", self.url())),
                (None, None) => Err(ArchiveError::Unavailable(format!(
                    "{}: a record was answered without an id",
                    self.url()
                ))),
            })
            .collect();
        answers.resize_with(lines.len(), || {
            Err(ArchiveError::Unavailable(format!(
                "{}: answered for fewer records than sent",
                self.url()
            )))
        });
        answers
    }

    /// A `PutRecordBatch` of no record: Firehose refuses it, writing nothing, and the
    /// connection is open. (`DescribeDeliveryStream` would do too, but its answer's parser
    /// weighs as much as the rest of this client: 79 KB of the Lambda's zip.)
    async fn warm(&self) -> Result<(), ArchiveError> {
        let put = self
            .client
            .put_record_batch()
            .delivery_stream_name(&self.name);
        match put.set_records(Some(Vec::new())).send().await {
            Ok(_) | Err(aws_sdk_firehose::error::SdkError::ServiceError(_)) => Ok(()),
            Err(e) => Err(ArchiveError::Unavailable(
                DisplayErrorContext(&e).to_string(),
            )),
        }
    }
}
