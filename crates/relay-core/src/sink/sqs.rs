//! Amazon SQS: standard and FIFO queues, `SendMessageBatch` for messages in flight together.

super::fifo::fifo_config! {
    /// A `type = "sqs"` sink, or `RELAY_SQS_QUEUE_URL` with `RELAY_SQS_MAX_MESSAGE_BYTES`.
    pub struct SqsConfig {
        /// The queue URL; a name ending in `.fifo` makes it a FIFO queue.
        pub queue_url: QueueUrl,
    }
    type = "sqs", noun = "queue", limit = 1048576
}

impl SqsConfig {
    /// The queue this sink delivers to, as one stable id: its ARN
    /// (`arn:aws:sqs:<region>:<account>:<name>`) when the URL's host names an AWS region, else
    /// the URL with its host in lower case (a local endpoint, whose region is the relay's).
    fn resource_id(&self) -> String {
        let uri: http::Uri = self
            .queue_url
            .as_str()
            .parse()
            .expect("checked when parsed");
        let host = uri.host().unwrap_or_default().to_ascii_lowercase();
        let mut path = uri.path().trim_matches('/').split('/');
        let (account, name) = (
            path.next().unwrap_or_default(),
            path.next().unwrap_or_default(),
        );
        match region_of_host(&host) {
            Some(region) => {
                let partition = match host.ends_with(".amazonaws.com.cn") {
                    true => "aws-cn",
                    false if region.starts_with("us-gov-") => "aws-us-gov",
                    false => "aws",
                };
                format!("arn:{partition}:sqs:{region}:{account}:{name}")
            }
            None => {
                let port = uri.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
                let scheme = uri.scheme_str().unwrap_or("https");
                format!("{scheme}://{host}{port}/{account}/{name}")
            }
        }
    }
}

/// The region an AWS host name carries (`sqs.eu-west-1.amazonaws.com`,
/// `eu-west-1.queue.amazonaws.com`, a VPC endpoint's `vpce-….sqs.eu-west-1.vpce.amazonaws.com`),
/// if any: its first label shaped as a region is (`xx-name-N`, `xx-gov-name-N`).
pub fn region_of_host(host: &str) -> Option<String> {
    if !(host.ends_with(".amazonaws.com") || host.ends_with(".amazonaws.com.cn")) {
        return None;
    }
    let is_region = |label: &&str| {
        let parts: Vec<&str> = label.split('-').collect();
        parts.len() >= 3
            && parts[0].len() == 2
            && parts.iter().all(|p| !p.is_empty())
            && parts[..parts.len() - 1]
                .iter()
                .all(|p| p.bytes().all(|b| b.is_ascii_lowercase()))
            && parts[parts.len() - 1].bytes().all(|b| b.is_ascii_digit())
    };
    host.split('.').find(is_region).map(str::to_owned)
}

crate::text::checked_string!(
    /// An SQS queue URL: `http(s)://host/<account>/<name>`.
    QueueUrl,
    "an SQS queue URL",
    |url| {
        let uri = url.parse::<http::Uri>().ok();
        match uri.filter(|u| matches!(u.scheme_str(), Some("https" | "http")) && u.host().is_some()) {
            Some(u) if u.path().trim_matches('/').split('/').count() == 2 => Ok(()),
            _ => Err(format!(
                "expected a queue URL such as https://sqs.us-east-1.amazonaws.com/123456789012/name, got {url:?}"
            )),
        }
    }
);

#[cfg(feature = "sqs")]
pub use api::client_for_queue;

#[cfg(feature = "sqs")]
mod api {
    use std::sync::Arc;
    use std::time::Duration;

    use aws_sdk_sqs::Client;
    use aws_sdk_sqs::config::Region;

    use super::super::SinkError;
    use super::super::aws::{AwsApi, AwsEntry, AwsSender, BatchReport, entry_failure};
    use super::super::batch::{BatchedSink, Limits};
    use super::region_of_host;
    use super::{SqsConfig, wire};
    use crate::cloud::aws_json::{AwsJson, NO_REGION, Service, client_of, read};

    /// SQS's JSON protocol.
    const SQS: Service = Service {
        service_id: "SQS",
        signing_name: "sqs",
        target_prefix: "AmazonSQS",
        content_type: "application/x-amz-json-1.0",
    };

    impl SqsConfig {
        /// The sink (`SendMessageBatch` for messages in flight together), its client built once
        /// from the shared AWS configuration. A queue URL on an AWS host names the region
        /// called, so a relay can publish to another region. A partial batch waits at most
        /// `wait` for more messages. Refused without a region for the queue.
        pub(in crate::sink) async fn build(
            &self,
            sdk: &aws_config::SdkConfig,
            wait: Duration,
        ) -> Result<BatchedSink, String> {
            let url = self.queue_url.as_str();
            let queue = Queue {
                api: queue_api(sdk, url).await?,
                url: url.to_owned(),
            };
            let name = format!("sqs:{}", url.rsplit('/').next().unwrap_or_default());
            // SQS takes at most 1 MiB per `SendMessageBatch`.
            let limits = Limits::aws(1024 * 1024, wait);
            Ok(BatchedSink::new(name, Arc::new(AwsSender(queue)), limits))
        }
    }

    /// The region of the queue at `url`: its host's when that is an AWS one, else the
    /// configuration's.
    fn queue_region(sdk: &aws_config::SdkConfig, url: &str) -> Option<String> {
        let host = url.parse::<http::Uri>().ok()?.host()?.to_owned();
        region_of_host(&host).or_else(|| sdk.region().map(ToString::to_string))
    }

    /// The relay's calls to SQS for the queue at `url` (its region's endpoint, or the one
    /// configured: `AWS_ENDPOINT_URL_SQS`, `AWS_ENDPOINT_URL`), written on the wire.
    async fn queue_api(sdk: &aws_config::SdkConfig, url: &str) -> Result<AwsJson, String> {
        let region = queue_region(sdk, url).ok_or(NO_REGION)?;
        client_of!(aws_sdk_sqs::config::endpoint, sdk, &region, &SQS).await
    }

    /// An SQS client of the AWS SDK from the shared configuration, in the region of the queue
    /// at `url` when its host is an AWS one, so the CLI can reach a queue in another region.
    pub fn client_for_queue(sdk: &aws_config::SdkConfig, url: &str) -> Client {
        let mut config = aws_sdk_sqs::config::Builder::from(sdk);
        if let Some(region) = queue_region(sdk, url) {
            config = config.region(Region::new(region));
        }
        Client::from_conf(config.build())
    }

    #[derive(Debug)]
    struct Queue {
        api: AwsJson,
        url: String,
    }

    #[async_trait::async_trait]
    impl AwsApi for Queue {
        /// `GetQueueAttributes` of the queue's ARN: any answer, a refusal included, opens the
        /// connection.
        async fn warm(&self) -> Result<(), SinkError> {
            let body = wire::attributes_body(&self.url);
            self.api.warm("GetQueueAttributes", body).await?;
            Ok(())
        }

        async fn send(&self, entry: AwsEntry) -> Result<Option<String>, SinkError> {
            let answer = (self.api)
                .call("SendMessage", wire::message_body(&self.url, &entry))
                .await?;
            let sent: wire::Sent = read(&answer)?;
            Ok(sent.message_id)
        }

        async fn send_batch(&self, entries: Vec<AwsEntry>) -> Result<BatchReport, SinkError> {
            let answer = (self.api)
                .call("SendMessageBatch", wire::batch_body(&self.url, &entries))
                .await?;
            let report: wire::BatchAnswer = read(&answer)?;
            Ok(BatchReport {
                accepted: (report.successful.into_iter())
                    .map(|ok| (ok.id, ok.message_id))
                    .collect(),
                failed: (report.failed.into_iter())
                    .map(|f| {
                        let error = entry_failure(&f.code, f.sender_fault, f.message.as_deref());
                        (f.id, error)
                    })
                    .collect(),
            })
        }
    }
}

/// SQS's JSON protocol, written and read here: the requests are written by hand because the
/// SDK's serializer escaped message bodies one byte at a time (at full load the largest single
/// cost of a notification), and they are sent by [`AwsJson`](crate::cloud::aws_json::AwsJson)
/// rather than the SDK, whose per-call work cost more than the rest of the batch's path.
#[cfg(feature = "sqs")]
mod wire {
    use bytes::Bytes;
    use serde::Deserialize;

    use super::super::aws::AwsEntry;
    use crate::json;

    /// A `SendMessage` answer.
    #[derive(Deserialize)]
    #[serde(rename_all = "PascalCase")]
    pub(super) struct Sent {
        pub(super) message_id: Option<String>,
    }

    /// A `SendMessageBatch` answer: the entries taken and the ones refused.
    #[derive(Deserialize)]
    #[serde(rename_all = "PascalCase")]
    pub(super) struct BatchAnswer {
        #[serde(default)]
        pub(super) successful: Vec<Taken>,
        #[serde(default)]
        pub(super) failed: Vec<Refused>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "PascalCase")]
    pub(super) struct Taken {
        pub(super) id: String,
        pub(super) message_id: Option<String>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "PascalCase")]
    pub(super) struct Refused {
        pub(super) id: String,
        pub(super) code: String,
        #[serde(default)]
        pub(super) sender_fault: bool,
        pub(super) message: Option<String>,
    }

    /// The request body for `entries`:
    /// `{"QueueUrl": …, "Entries": [{"Id", "MessageBody", "MessageAttributes",
    /// "MessageSystemAttributes", "MessageGroupId", "MessageDeduplicationId"}, …]}`, each
    /// attribute `{"DataType": "String", "StringValue": …}`, the system one `AWSTraceHeader`.
    pub(super) fn batch_body(queue_url: &str, entries: &[AwsEntry]) -> Bytes {
        let size = entries.iter().map(|e| e.body().len() + 512).sum::<usize>();
        let mut out = Vec::with_capacity(size + queue_url.len() + 32);
        out.extend_from_slice(b"{\"QueueUrl\":");
        json::string(&mut out, queue_url);
        out.extend_from_slice(b",\"Entries\":");
        json::list(&mut out, *b"[]", entries, |out, entry| {
            out.extend_from_slice(b"{\"Id\":");
            json::string(out, &entry.id);
            message(out, entry);
            out.push(b'}');
        });
        out.push(b'}');
        Bytes::from(out)
    }

    /// The body of a `SendMessage` of `entry`: a batch entry's fields without its id.
    pub(super) fn message_body(queue_url: &str, entry: &AwsEntry) -> Bytes {
        let mut out = Vec::with_capacity(entry.body().len() + queue_url.len() + 512);
        out.extend_from_slice(b"{\"QueueUrl\":");
        json::string(&mut out, queue_url);
        message(&mut out, entry);
        out.push(b'}');
        Bytes::from(out)
    }

    /// The body of a `GetQueueAttributes` of the queue's ARN.
    pub(super) fn attributes_body(queue_url: &str) -> Bytes {
        let mut out = b"{\"QueueUrl\":".to_vec();
        json::string(&mut out, queue_url);
        out.extend_from_slice(b",\"AttributeNames\":[\"QueueArn\"]}");
        Bytes::from(out)
    }

    /// A message's fields, each after a comma: its body, attributes, trace header and FIFO ids.
    fn message(out: &mut Vec<u8>, entry: &AwsEntry) {
        out.extend_from_slice(b",\"MessageBody\":");
        json::utf8(out, entry.body());
        if !entry.attributes.is_empty() {
            out.extend_from_slice(b",\"MessageAttributes\":");
            json::list(
                out,
                *b"{}",
                entry.attributes.iter(),
                |out, (name, value)| {
                    json::string(out, name);
                    out.extend_from_slice(b":{\"DataType\":\"String\",\"StringValue\":");
                    json::string(out, value);
                    out.push(b'}');
                },
            );
        }
        if let Some(header) = &entry.trace_header {
            out.extend_from_slice(b",\"MessageSystemAttributes\":{\"AWSTraceHeader\":");
            out.extend_from_slice(b"{\"DataType\":\"String\",\"StringValue\":");
            json::string(out, header);
            out.extend_from_slice(b"}}");
        }
        for (key, value) in [
            (&b",\"MessageGroupId\":"[..], &entry.group_id),
            (&b",\"MessageDeduplicationId\":"[..], &entry.dedup_id),
        ] {
            if let Some(value) = value {
                out.extend_from_slice(key);
                json::string(out, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::{Selection, TargetConfig, Template};

    #[test]
    fn queue_urls() {
        assert!(
            "https://sqs.eu-west-1.amazonaws.com/123456789012/dss.fifo"
                .parse::<QueueUrl>()
                .is_ok()
        );
        assert!(
            "http://127.0.0.1:5000/123456789012/q"
                .parse::<QueueUrl>()
                .is_ok()
        );
        for bad in [
            "dss-events",
            "https://sqs.eu-west-1.amazonaws.com/q",
            "ftp://h/1/q",
        ] {
            assert!(bad.parse::<QueueUrl>().is_err(), "{bad}");
        }
    }

    #[test]
    fn fifo_queues_get_default_ids_and_standard_ones_refuse_them() {
        let fifo = SqsConfig::new(
            "https://sqs.eu-west-1.amazonaws.com/1/dss.fifo"
                .parse()
                .unwrap(),
        );
        let shape = fifo.shape(&Selection::default()).unwrap();
        assert_eq!(
            shape.group_id.as_ref().map(Template::source),
            Some("{subscription_id}")
        );
        let mut standard =
            SqsConfig::new("https://sqs.eu-west-1.amazonaws.com/1/dss".parse().unwrap());
        standard.message_group_id = Some(Template::parse("{subscription_id}").unwrap());
        assert_eq!(
            standard.shape(&Selection::default()).unwrap_err().field,
            "message_group_id"
        );
    }

    #[cfg(feature = "sqs")]
    #[test]
    fn the_batch_body_carries_every_entry_as_the_json_protocol_defines_it() {
        use super::super::aws::AwsEntry;
        let tricky = "{\"quote\": \"\\\"\", \"tab\": \"\t\", \"é\": \"\u{1F600}\"}\n";
        let mut attributes = crate::sink::Attributes::default();
        attributes.push("dss.event_type", "CREATE");
        let mut first = AwsEntry::for_tests("0", tricky, attributes);
        first.group_id = Some("sub-1".into());
        first.dedup_id = Some("k".into());
        let xray = "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1";
        first.trace_header = Some(xray.into());
        let entries = [first, AwsEntry::for_tests("1", "{}", Default::default())];
        let url = "https://sqs.eu-west-1.amazonaws.com/1/dss.fifo";
        let body = wire::batch_body(url, &entries);
        let parsed: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            parsed,
            serde_json::json!({
                "QueueUrl": url,
                "Entries": [
                    {
                        "Id": "0",
                        "MessageBody": tricky,
                        "MessageAttributes": {
                            "dss.event_type": {"DataType": "String", "StringValue": "CREATE"}
                        },
                        "MessageSystemAttributes": {
                            "AWSTraceHeader": {"DataType": "String", "StringValue": xray}
                        },
                        "MessageGroupId": "sub-1",
                        "MessageDeduplicationId": "k"
                    },
                    {"Id": "1", "MessageBody": "{}"}
                ]
            })
        );
        // A message sent alone carries the same fields, without an id.
        let alone: serde_json::Value =
            serde_json::from_slice(&wire::message_body(url, &entries[0])).unwrap();
        let mut expected = parsed["Entries"][0].clone();
        expected.as_object_mut().unwrap().remove("Id");
        expected["QueueUrl"] = url.into();
        assert_eq!(alone, expected);
    }

    #[test]
    fn batch_answers_read_each_entry_s_fate() {
        let answer = br#"{"Successful":[{"Id":"0","MessageId":"m-0","MD5OfMessageBody":"x"}],
            "Failed":[{"Id":"1","SenderFault":true,"Code":"InvalidParameterValue","Message":"no"}]}"#;
        let report: wire::BatchAnswer = serde_json::from_slice(answer).unwrap();
        assert_eq!(report.successful[0].id, "0");
        assert_eq!(report.successful[0].message_id.as_deref(), Some("m-0"));
        let refused = &report.failed[0];
        assert_eq!(
            (
                refused.id.as_str(),
                refused.code.as_str(),
                refused.sender_fault
            ),
            ("1", "InvalidParameterValue", true)
        );
        let empty: wire::BatchAnswer = serde_json::from_slice(b"{}").unwrap();
        assert!(empty.successful.is_empty() && empty.failed.is_empty());
    }
}
