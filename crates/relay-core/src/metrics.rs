//! Metrics without a network call on the request path. With `RELAY_METRICS=emf` (the default on
//! Lambda) every answer and every sink's publish is one JSON line in CloudWatch's Embedded Metric
//! Format on standard output. CloudWatch Logs turns them into metrics in the `DssRelay`
//! namespace; on Cloud Run, the gcp-relay module's logs-based metrics read the same lines.
//!
//! Every metric has the `Relay` dimension (the function's or service's name), so that several
//! relays in one account have alarms of their own:
//! - `Answers` (count) and `Latency` (ms) by `Class` (`2xx`, `4xx`, `5xx`), by `Status`, and by
//!   `Status` and `Code` (`published`, `filtered`, `ok` or the error code);
//! - `Publishes` (count) and `PublishLatency` (ms) by `Sink`, and by `Sink` and `Result` (`ok`,
//!   `retryable`, `permanent`); `BatchSize`, the number of messages in the destination call that
//!   carried the notification, on acknowledged publishes to sinks the relay batches itself;
//! - `Replays` (count) and `ReplayLatency` (ms) by `Sink`, and by `Sink` and `Result`: the
//!   publishes of `relay replay`, apart from the live ones;
//! - with a ledger: `LedgerCalls` and `LedgerLatency` by `Call` and `Result`; `Duplicates`;
//!   `Undelivered`, an attempt that left a destination without an acknowledgement for a
//!   notification first received over an hour before.

use std::fmt;
use std::io::Write as _;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::sink::{Receipt, SinkError};

/// The CloudWatch namespace of every metric.
pub const NAMESPACE: &str = "DssRelay";

/// Where metric lines go.
pub trait MetricsOut: Send + Sync + fmt::Debug {
    /// Writes one line (without its newline).
    fn write_line(&self, line: &str);
}

/// Standard output, one whole line per write so that lines never interleave.
#[derive(Debug)]
pub struct Stdout;

impl MetricsOut for Stdout {
    fn write_line(&self, line: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(format!("{line}\n").as_bytes());
        let _ = out.flush();
    }
}

/// The relay's metrics: off, or EMF lines to an output.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    out: Option<Arc<dyn MetricsOut>>,
    /// The `Relay` dimension.
    name: Arc<str>,
}

impl Metrics {
    /// No metric lines.
    pub fn off() -> Self {
        Self::default()
    }

    /// EMF lines to `out`, for the relay called `name`.
    pub fn emf(out: Arc<dyn MetricsOut>, name: &str) -> Self {
        Self {
            out: Some(out),
            name: name.into(),
        }
    }

    /// One answer: its status, its code (`published`, `filtered`, `ok` or the error code) and
    /// how long it took.
    pub fn answer(&self, status: u16, code: &str, latency_ms: f64) {
        if self.out.is_none() {
            return;
        }
        let class = match status {
            200..=299 => "2xx",
            400..=499 => "4xx",
            500..=599 => "5xx",
            _ => "other",
        };
        self.emit(
            &[
                &["Relay", "Class"],
                &["Relay", "Status"],
                &["Relay", "Status", "Code"],
            ],
            &[("Answers", "Count"), ("Latency", "Milliseconds")],
            json!({
                "Relay": &*self.name, "Class": class, "Status": status.to_string(), "Code": code,
                "Answers": 1, "Latency": latency_ms,
            }),
        );
    }

    /// One sink's publish of one notification: acknowledged (with the size of the batch that
    /// carried it, where known), or failed, and how long the sink took to answer.
    pub fn publish(&self, sink: &str, result: Result<&Receipt, &SinkError>, latency_ms: f64) {
        if self.out.is_none() {
            return;
        }
        let kind = match result {
            Ok(_) => "ok",
            Err(e) if e.is_retryable() => "retryable",
            Err(_) => "permanent",
        };
        let mut values = json!({
            "Relay": &*self.name, "Sink": sink, "Result": kind,
            "Publishes": 1, "PublishLatency": latency_ms,
        });
        let mut metrics = vec![("Publishes", "Count"), ("PublishLatency", "Milliseconds")];
        if let Some(size) = result.ok().and_then(|r| r.batch_size) {
            values["BatchSize"] = size.into();
            metrics.push(("BatchSize", "Count"));
        }
        self.emit(
            &[&["Relay", "Sink"], &["Relay", "Sink", "Result"]],
            &metrics,
            values,
        );
    }

    /// One replayed notification's publish to one sink (`relay replay`): `Replays` (count) and
    /// `ReplayLatency` (ms) by `Sink`, and by `Sink` and `Result`, apart from the live
    /// `Publishes`.
    pub fn replay(&self, sink: &str, result: Result<&Receipt, &SinkError>, latency_ms: f64) {
        let kind = match result {
            Ok(_) => "ok",
            Err(e) if e.is_retryable() => "retryable",
            Err(_) => "permanent",
        };
        self.emit(
            &[&["Relay", "Sink"], &["Relay", "Sink", "Result"]],
            &[("Replays", "Count"), ("ReplayLatency", "Milliseconds")],
            json!({
                "Relay": &*self.name, "Sink": sink, "Result": kind,
                "Replays": 1, "ReplayLatency": latency_ms,
            }),
        );
    }

    /// One call to the delivery ledger (`claim` or `settle`): its result (`ok`, `busy`: another
    /// attempt holds the destinations, `error`) and how long it took.
    pub fn ledger(&self, call: &str, result: &str, latency_ms: f64) {
        self.emit(
            &[&["Relay", "Call"], &["Relay", "Call", "Result"]],
            &[("LedgerCalls", "Count"), ("LedgerLatency", "Milliseconds")],
            json!({
                "Relay": &*self.name, "Call": call, "Result": result,
                "LedgerCalls": 1, "LedgerLatency": latency_ms,
            }),
        );
    }

    /// An attempt that left a destination without an acknowledgement, for a notification first
    /// received over an hour before: `Undelivered` (count) by `Relay`.
    pub fn undelivered(&self) {
        self.emit(
            &[&["Relay"]],
            &[("Undelivered", "Count")],
            json!({"Relay": &*self.name, "Undelivered": 1}),
        );
    }

    /// A notification every routed destination had acknowledged: answered 202 `duplicate`
    /// without publishing.
    pub fn duplicate(&self) {
        self.emit(
            &[&["Relay"]],
            &[("Duplicates", "Count")],
            json!({"Relay": &*self.name, "Duplicates": 1}),
        );
    }

    fn emit(&self, dimensions: &[&[&str]], metrics: &[(&str, &str)], mut values: Value) {
        let Some(out) = &self.out else { return };
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let metrics: Vec<Value> = metrics
            .iter()
            .map(|(name, unit)| json!({"Name": name, "Unit": unit}))
            .collect();
        values["_aws"] = json!({
            "Timestamp": timestamp as u64,
            "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": dimensions, "Metrics": metrics}],
        });
        out.write_line(&values.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Debug, Default)]
    struct Lines(Mutex<Vec<Value>>);

    impl MetricsOut for Lines {
        fn write_line(&self, line: &str) {
            self.0
                .lock()
                .unwrap()
                .push(serde_json::from_str(line).unwrap());
        }
    }

    fn declared(line: &Value) -> Vec<&str> {
        line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn batch_size_is_declared_only_where_a_batch_carried_the_message() {
        let lines = Arc::new(Lines::default());
        let metrics = Metrics::emf(Arc::clone(&lines) as _, "r");
        let batched = Receipt {
            batch_size: Some(7),
            ..Receipt::new(None)
        };
        metrics.publish("sqs:q", Ok(&batched), 1.0);
        metrics.publish("pubsub:t", Ok(&Receipt::new(None)), 1.0);
        metrics.publish("sqs:q", Err(&SinkError::Retryable("busy".into())), 1.0);
        let lines = lines.0.lock().unwrap();
        assert_eq!(lines[0]["BatchSize"], 7);
        assert_eq!(
            declared(&lines[0]),
            ["Publishes", "PublishLatency", "BatchSize"]
        );
        for line in &lines[1..] {
            assert!(line.get("BatchSize").is_none(), "{line}");
            assert_eq!(declared(line), ["Publishes", "PublishLatency"]);
        }
        assert_eq!(lines[2]["Result"], "retryable");
    }
}
