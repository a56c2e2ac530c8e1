//! Metrics without a network call on the request path. With `RELAY_METRICS=emf` (the default on
//! Lambda) every answer and every sink's publish is one line in CloudWatch's Embedded Metric
//! Format on standard output, which CloudWatch Logs turns into metrics in the `DssRelay`
//! namespace. Elsewhere the request log line carries the same fields (`status`, `code`,
//! `latency_ms`), from which logs-based metrics are made.

use std::fmt;
use std::io::Write as _;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

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
}

impl Metrics {
    /// No metric lines.
    pub fn off() -> Self {
        Self { out: None }
    }

    /// EMF lines to `out`.
    pub fn emf(out: Arc<dyn MetricsOut>) -> Self {
        Self { out: Some(out) }
    }

    /// One answer: its status, its code (`published`, `filtered`, `ok` or the error code) and
    /// how long it took.
    pub fn answer(&self, status: u16, code: &str, latency_ms: f64) {
        if self.out.is_none() {
            return;
        }
        self.emit(
            &[&["Status"], &["Status", "Code"]],
            &[("Answers", "Count"), ("Latency", "Milliseconds")],
            json!({"Status": status.to_string(), "Code": code, "Answers": 1, "Latency": latency_ms}),
        );
    }

    /// One sink's publish of one notification: `ok`, `retryable` or `permanent`, and how long
    /// the sink took to answer.
    pub fn publish(&self, sink: &str, result: &str, latency_ms: f64) {
        if self.out.is_none() {
            return;
        }
        self.emit(
            &[&["Sink"], &["Sink", "Result"]],
            &[("Publishes", "Count"), ("PublishLatency", "Milliseconds")],
            json!({"Sink": sink, "Result": result, "Publishes": 1, "PublishLatency": latency_ms}),
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
