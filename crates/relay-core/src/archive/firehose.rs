//! The archive's records through an Amazon Data Firehose delivery stream
//! (`RELAY_ARCHIVE_STREAM=firehose://NAME`): `PutRecordBatch` for records queued together,
//! `PutRecord` for one alone. Firehose answers once it holds a record durably, and delivers
//! the records it buffered as one object under the archive's prefix and hour. The calls are
//! written on the wire and sent by [`AwsJson`], each record's data in base64 straight into the
//! body: through the SDK a call cost about 33 µs of CPU per notification at full load, more
//! than the record's sealing and writing; the SDK's crate is kept for its endpoint rules.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde::Deserialize;

use super::ArchiveError;
use super::stream::RecordStream;
use crate::cloud::aws_json::{AwsJson, CallError, NO_REGION, Service, client_of, read};
use crate::json;
use crate::sink::SinkError;

/// Firehose's JSON protocol.
const FIREHOSE: Service = Service {
    service_id: "Firehose",
    signing_name: "firehose",
    target_prefix: "Firehose_20150804",
    content_type: "application/x-amz-json-1.1",
};

/// The largest record Firehose takes: 1,000 KiB.
const MAX_RECORD_BYTES: usize = 1_000 * 1024;

/// A delivery stream taking the archive's records.
#[derive(Debug)]
pub(crate) struct FirehoseStream {
    api: AwsJson,
    name: String,
}

/// A `PutRecord` answer (its record's id) or a `PutRecordBatch` one (each record's).
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Answer {
    record_id: Option<String>,
    #[serde(default)]
    request_responses: Vec<Response>,
}

/// One record's answer in a `PutRecordBatch`.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Response {
    record_id: Option<String>,
    error_code: Option<String>,
    error_message: Option<String>,
}

impl FirehoseStream {
    /// The delivery stream `name`, with the AWS configuration `sdk` (region, credentials,
    /// `AWS_ENDPOINT_URL_FIREHOSE`).
    pub(crate) async fn new(sdk: &aws_config::SdkConfig, name: &str) -> Result<Self, ArchiveError> {
        let open = |e: String| ArchiveError::Open(format!("firehose://{name}: {e}"));
        let region = sdk.region().ok_or_else(|| open(NO_REGION.into()))?;
        let api = client_of!(
            aws_sdk_firehose::config::endpoint,
            sdk,
            region.as_ref(),
            &FIREHOSE
        )
        .await
        .map_err(open)?;
        Ok(Self {
            api,
            name: name.to_owned(),
        })
    }

    /// Where it is, for errors and record ids.
    fn url(&self) -> String {
        format!("firehose://{}", self.name)
    }

    /// A call's failure, for every record it carried.
    fn failure(&self, error: CallError) -> ArchiveError {
        match SinkError::from(error) {
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

    /// A record's answer: its id as the archive names it, or its refusal.
    fn answer(&self, response: Response) -> Result<String, ArchiveError> {
        match (response.error_code, response.record_id) {
            (Some(code), _) => Err(self.entry_failure(&code, response.error_message.as_deref())),
            (None, Some(id)) => Ok(format!("{}/{id}", self.url())),
            (None, None) => Err(ArchiveError::Unavailable(format!(
                "{}: a record was answered without an id",
                self.url()
            ))),
        }
    }

    /// The body of a `PutRecord` (one line) or a `PutRecordBatch`.
    fn body(&self, lines: &[Bytes]) -> Bytes {
        let size: usize = lines.iter().map(|l| l.len() * 4 / 3 + 16).sum();
        let mut out = Vec::with_capacity(size + self.name.len() + 64);
        out.extend_from_slice(b"{\"DeliveryStreamName\":");
        json::string(&mut out, &self.name);
        let record = |out: &mut Vec<u8>, line: &Bytes| {
            out.extend_from_slice(b"{\"Data\":\"");
            let start = out.len();
            out.resize(
                start + base64::encoded_len(line.len(), true).unwrap_or(0),
                0,
            );
            let written = (STANDARD.encode_slice(line, &mut out[start..])).unwrap_or(0);
            out.truncate(start + written);
            out.extend_from_slice(b"\"}");
        };
        match lines {
            [line] => {
                out.extend_from_slice(b",\"Record\":");
                record(&mut out, line);
            }
            _ => {
                out.extend_from_slice(b",\"Records\":");
                json::list(&mut out, *b"[]", lines, record);
            }
        }
        out.push(b'}');
        Bytes::from(out)
    }
}

#[async_trait::async_trait]
impl RecordStream for FirehoseStream {
    fn max_line_bytes(&self) -> usize {
        MAX_RECORD_BYTES
    }

    async fn append(&self, lines: &[Bytes]) -> Vec<Result<String, ArchiveError>> {
        let operation = match lines {
            [_] => "PutRecord",
            _ => "PutRecordBatch",
        };
        let answer = match self.api.call(operation, self.body(lines)).await {
            Ok(answer) => read::<Answer>(&answer),
            Err(e) => Err(e),
        };
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                let error = self.failure(e);
                return lines.iter().map(|_| Err(error.clone())).collect();
            }
        };
        // `PutRecord` answers with its record's id; `PutRecordBatch` with each record's answer.
        let responses = match lines {
            [_] => vec![Response {
                record_id: answer.record_id,
                error_code: None,
                error_message: None,
            }],
            _ => answer.request_responses,
        };
        let mut answers: Vec<Result<String, ArchiveError>> =
            responses.into_iter().map(|r| self.answer(r)).collect();
        answers.resize_with(lines.len(), || {
            Err(ArchiveError::Unavailable(format!(
                "{}: answered for fewer records than sent",
                self.url()
            )))
        });
        answers
    }

    /// A `PutRecordBatch` of no record: Firehose refuses it, writing nothing, and the
    /// connection is open.
    async fn warm(&self) -> Result<(), ArchiveError> {
        match self.api.warm("PutRecordBatch", self.body(&[])).await {
            Ok(_) => Ok(()),
            Err(e) => Err(ArchiveError::Unavailable(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn stream() -> FirehoseStream {
        let sdk = aws_config::SdkConfig::builder()
            .region(aws_config::Region::new("eu-west-1"))
            .build();
        FirehoseStream::new(&sdk, "relay-archive").await.unwrap()
    }

    #[tokio::test]
    async fn records_go_in_base64_one_alone_or_many_in_a_batch() {
        let stream = stream().await;
        let lines = [
            Bytes::from_static(b"{\"a\":1}\n"),
            Bytes::from(vec![0u8, 255, 10, 34]),
        ];
        let data =
            |record: &serde_json::Value| STANDARD.decode(record["Data"].as_str().unwrap()).unwrap();
        let one: serde_json::Value = serde_json::from_slice(&stream.body(&lines[..1])).unwrap();
        assert_eq!(one["DeliveryStreamName"], "relay-archive");
        assert_eq!(data(&one["Record"]), lines[0]);
        let batch: serde_json::Value = serde_json::from_slice(&stream.body(&lines)).unwrap();
        let records = batch["Records"].as_array().unwrap();
        assert_eq!(records.iter().map(data).collect::<Vec<_>>(), lines);
        let none: serde_json::Value = serde_json::from_slice(&stream.body(&[])).unwrap();
        assert_eq!(none["Records"], serde_json::json!([]));
    }

    #[tokio::test]
    async fn the_endpoint_is_the_region_s_without_a_configured_one() {
        let api = format!("{:?}", stream().await.api);
        assert!(
            api.contains("https://firehose.eu-west-1.amazonaws.com/"),
            "{api}"
        );
    }

    #[tokio::test]
    async fn each_record_s_answer_is_its_id_or_its_refusal() {
        let stream = stream().await;
        let response = |id: Option<&str>, code: Option<&str>| Response {
            record_id: id.map(str::to_owned),
            error_code: code.map(str::to_owned),
            error_message: None,
        };
        assert_eq!(
            stream.answer(response(Some("r1"), None)).unwrap(),
            "firehose://relay-archive/r1"
        );
        for (code, retryable) in [
            ("ServiceUnavailableException", true),
            ("AccessDenied", false),
        ] {
            let error = stream.answer(response(None, Some(code))).unwrap_err();
            assert_eq!(
                matches!(error, ArchiveError::Unavailable(_)),
                retryable,
                "{code}"
            );
        }
        assert!(matches!(
            stream.answer(response(None, None)),
            Err(ArchiveError::Unavailable(_))
        ));
    }
}
