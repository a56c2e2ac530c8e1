//! Metrics without a network call on the request path. With `RELAY_METRICS=emf` (the default on
//! Lambda) every answer and every sink's publish is one JSON line in CloudWatch's Embedded Metric
//! Format on standard output. CloudWatch Logs turns them into metrics in the `DssRelay`
//! namespace; on Cloud Run, the gcp-relay module's logs-based metrics read the same lines.
//!
//! The request's thread only hands a line to a bounded queue ([`LineQueue`]); one thread of its
//! own writes it to standard output, with the lines that follow within 2 ms. A full queue (standard output not
//! keeping up) drops the line rather than hold the request, and the count is reported as
//! `MetricLinesDropped`. The lines still queued leave when the relay is dropped, and
//! [`flush_stdout`] waits for them: relay-lambda waits at the end of every invocation, since an
//! environment can be frozen, then stopped, once it has answered.
//!
//! Every metric has the `Relay` dimension (the function's or service's name), so that several
//! relays in one account have alarms of their own:
//! - `Answers` (count) and `Latency` (ms) by `Class` (`2xx`, `4xx`, `5xx`), by `Status`, and by
//!   `Status` and `Code` (`published`, `filtered`, `ok` or the error code);
//! - `Publishes` (count) and `PublishLatency` (ms) by `Sink` (the configured name; the line's
//!   `Resource` property says what it delivers to), and by `Sink` and `Result` (`ok`,
//!   `retryable`, `permanent`); `BatchSize`, the number of messages in the destination call that
//!   carried the notification, on acknowledged publishes to sinks the relay batches itself;
//! - `Replays` (count) and `ReplayLatency` (ms) by `Sink`, and by `Sink` and `Result`: the
//!   publishes of `relay replay`, apart from the live ones;
//! - with a ledger: `LedgerCalls` and `LedgerLatency` by `Call` and `Result`; `Duplicates`;
//!   `Undelivered`, an attempt that left a destination without an acknowledgement for a
//!   notification first received over an hour before; `LegacyAcknowledgements` by `Result`,
//!   acknowledgements an earlier release recorded under a destination's old name.

use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::json;
use crate::notification::Origin;
use crate::sink::{Receipt, SinkError};

mod held;
mod queue;

pub use held::Held;
pub use queue::{LineQueue, Stdout, flush_stdout};

/// The CloudWatch namespace of every metric.
pub const NAMESPACE: &str = "DssRelay";

/// Where metric lines go.
pub trait MetricsOut: Send + Sync + fmt::Debug {
    /// Writes one line (without its newline).
    fn write_line(&self, line: &str);

    /// Writes one line it may keep (without its newline); by default [`write_line`]. An output
    /// that queues lines takes this one without a copy.
    ///
    /// [`write_line`]: MetricsOut::write_line
    fn write_owned(&self, line: String) {
        self.write_line(&line);
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
        let status = status.to_string();
        self.emit(
            &[
                &["Relay", "Class"],
                &["Relay", "Status"],
                &["Relay", "Status", "Code"],
            ],
            &[("Answers", "Count"), ("Latency", "Milliseconds")],
            &[
                ("Class", Field::Text(class)),
                ("Status", Field::Text(&status)),
                ("Code", Field::Text(code)),
                ("Answers", Field::Count(1)),
                ("Latency", Field::Number(latency_ms)),
            ],
        );
    }

    /// One sink's publish of one notification: acknowledged (with the size of the batch that
    /// carried it, where known), or failed, and how long the sink took to answer. `Sink` is the
    /// configured name; `Resource`, what it delivers to, rides along as a property. A live
    /// notification counts `Publishes` and `PublishLatency`; one sent again from the archive
    /// (`relay replay`) counts `Replays` and `ReplayLatency` instead, both by `Sink` and by
    /// `Sink` and `Result`.
    pub fn publish(
        &self,
        origin: Origin,
        sink: &str,
        resource: &str,
        result: Result<&Receipt, &SinkError>,
        latency_ms: f64,
    ) {
        if self.out.is_none() {
            return;
        }
        let [count, latency] = match origin {
            Origin::Request => ["Publishes", "PublishLatency"],
            Origin::Archive => ["Replays", "ReplayLatency"],
        };
        let mut values = vec![
            ("Sink", Field::Text(sink)),
            ("Resource", Field::Text(resource)),
            ("Result", Field::Text(result_of(result))),
            (count, Field::Count(1)),
            (latency, Field::Number(latency_ms)),
        ];
        let mut metrics = vec![(count, "Count"), (latency, "Milliseconds")];
        if let Some(size) = result.ok().and_then(|r| r.batch_size) {
            values.push(("BatchSize", Field::Count(size as u64)));
            metrics.push(("BatchSize", "Count"));
        }
        let dimensions: &[&[&str]] = &[&["Relay", "Sink"], &["Relay", "Sink", "Result"]];
        self.emit(dimensions, &metrics, &values);
    }

    /// One call to the delivery ledger (`claim` or `settle`): its result (`ok`, `busy`: another
    /// attempt holds the destinations, `error`) and how long it took.
    pub fn ledger(&self, call: &str, result: &str, latency_ms: f64) {
        self.emit(
            &[&["Relay", "Call"], &["Relay", "Call", "Result"]],
            &[("LedgerCalls", "Count"), ("LedgerLatency", "Milliseconds")],
            &[
                ("Call", Field::Text(call)),
                ("Result", Field::Text(result)),
                ("LedgerCalls", Field::Count(1)),
                ("LedgerLatency", Field::Number(latency_ms)),
            ],
        );
    }

    /// An attempt that left a destination without an acknowledgement, for a notification first
    /// received over an hour before: `Undelivered` (count) by `Relay`.
    pub fn undelivered(&self) {
        self.emit(
            &[&["Relay"]],
            &[("Undelivered", "Count")],
            &[("Undelivered", Field::Count(1))],
        );
    }

    /// A request that verified and was then refused (400 or 415), and whether it was kept in
    /// the archive: `VerifiedRefused` (count) by `Relay`, with `Code` and `Kept` as properties.
    /// Only a holder of the key can send one, so one is worth an alarm.
    pub fn verified_refused(&self, code: &str, kept: bool) {
        self.emit(
            &[&["Relay"]],
            &[("VerifiedRefused", "Count")],
            &[
                ("Code", Field::Text(code)),
                ("Kept", Field::Text(if kept { "true" } else { "false" })),
                ("VerifiedRefused", Field::Count(1)),
            ],
        );
    }

    /// A destination whose acknowledgement an earlier release recorded under its old name
    /// (`sqs:<queue>`): `carried`, the name stood for this destination alone and the
    /// acknowledgement now counts under its resource; `ambiguous`, the name stands for several
    /// destinations and this one is published to again. `LegacyAcknowledgements` by `Result`.
    pub fn legacy(&self, result: &str) {
        self.emit(
            &[&["Relay", "Result"]],
            &[("LegacyAcknowledgements", "Count")],
            &[
                ("Result", Field::Text(result)),
                ("LegacyAcknowledgements", Field::Count(1)),
            ],
        );
    }

    /// A notification every routed destination had acknowledged: answered 202 `duplicate`
    /// without publishing.
    pub fn duplicate(&self) {
        self.emit(
            &[&["Relay"]],
            &[("Duplicates", "Count")],
            &[("Duplicates", Field::Count(1))],
        );
    }

    /// Writes one line (see [`line`]).
    fn emit(&self, dimensions: &[&[&str]], metrics: &[(&str, &str)], values: &[(&str, Field<'_>)]) {
        let Some(out) = &self.out else { return };
        out.write_owned(line(&self.name, dimensions, metrics, values));
    }
}

/// `ok`, `retryable` or `permanent`.
fn result_of(result: Result<&Receipt, &SinkError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(e) if e.is_retryable() => "retryable",
        Err(_) => "permanent",
    }
}

/// A member's value in a metric line.
#[derive(Debug, Clone, Copy)]
enum Field<'a> {
    Text(&'a str),
    Count(u64),
    /// Written as serde_json writes it (`null` when not finite).
    Number(f64),
}

/// One EMF line of the relay called `relay`: `{"Relay": …, <values>, "_aws": {"Timestamp": …,
/// "CloudWatchMetrics": [{"Namespace", "Dimensions", "Metrics"}]}}`, its text written directly
/// rather than built as a JSON document first (a dozen allocations fewer a line).
fn line(
    relay: &str,
    dimensions: &[&[&str]],
    metrics: &[(&str, &str)],
    values: &[(&str, Field<'_>)],
) -> String {
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut out = Vec::with_capacity(384);
    out.extend_from_slice(b"{\"Relay\":");
    json::string(&mut out, relay);
    for (name, value) in values {
        out.push(b',');
        json::string(&mut out, name);
        out.push(b':');
        match value {
            Field::Text(value) => json::string(&mut out, value),
            Field::Count(n) => out.extend_from_slice(n.to_string().as_bytes()),
            Field::Number(x) => {
                let _ = serde_json::to_writer(&mut out, x);
            }
        }
    }
    out.extend_from_slice(b",\"_aws\":{\"Timestamp\":");
    out.extend_from_slice(timestamp.to_string().as_bytes());
    out.extend_from_slice(b",\"CloudWatchMetrics\":[{\"Namespace\":");
    json::string(&mut out, NAMESPACE);
    out.extend_from_slice(b",\"Dimensions\":");
    json::list(&mut out, *b"[]", dimensions, |out, set| {
        json::list(out, *b"[]", *set, |out, dimension| {
            json::string(out, dimension)
        });
    });
    out.extend_from_slice(b",\"Metrics\":");
    json::list(&mut out, *b"[]", metrics, |out, (name, unit)| {
        out.extend_from_slice(b"{\"Name\":");
        json::string(out, name);
        out.extend_from_slice(b",\"Unit\":");
        json::string(out, unit);
        out.push(b'}');
    });
    out.extend_from_slice(b"}]}}");
    // Only JSON text went in, so it is UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::io::Write;
    use std::sync::{Mutex, mpsc};
    use std::time::{Duration, Instant};

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

    /// Output that holds every write until the gate opens, saying when one is waiting.
    struct Gated {
        gate: mpsc::Receiver<()>,
        waiting: mpsc::Sender<()>,
        written: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Gated {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let _ = self.waiting.send(());
            // Returns at once for good once the gate's sender is dropped.
            let _ = self.gate.recv();
            self.written.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_full_queue_never_blocks_and_counts_what_it_drops() {
        let (open, gate) = mpsc::channel();
        let (waiting, writing) = mpsc::channel();
        let written = Arc::new(Mutex::new(Vec::new()));
        let out = Gated {
            gate,
            waiting,
            written: Arc::clone(&written),
        };
        let queue = LineQueue::spawn(out, 4);
        let line = |i: u32| json!({"Relay": "r", "Answers": i}).to_string();
        queue.write_owned(line(0));
        // The writer holds line 0 in a write that does not return: the queue fills up.
        writing.recv_timeout(Duration::from_secs(5)).unwrap();
        let started = Instant::now();
        for i in 1..=1000 {
            queue.write_line(&line(i));
        }
        assert!(started.elapsed() < Duration::from_secs(1), "never blocked");
        assert_eq!(queue.dropped(), 996, "four lines fit in the queue");
        drop(open);
        assert!(queue.flush_blocking(Duration::from_secs(5)));
        let text = String::from_utf8(written.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let answers: Vec<u64> = lines.iter().filter_map(|l| l["Answers"].as_u64()).collect();
        assert_eq!(answers, [0, 1, 2, 3, 4]);
        let report: Vec<&Value> = lines
            .iter()
            .filter(|l| l.get("MetricLinesDropped").is_some())
            .collect();
        assert_eq!(report.len(), 1, "{text}");
        assert_eq!(report[0]["MetricLinesDropped"], 996);
        assert_eq!(report[0]["Relay"], "r");
        assert_eq!(declared(report[0]), ["MetricLinesDropped"]);
        assert_eq!(queue.dropped(), 0, "reported once");
    }

    /// Output that counts its writes.
    struct Counted(Arc<Mutex<(usize, Vec<u8>)>>);

    impl Write for Counted {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let mut seen = self.0.lock().unwrap();
            seen.0 += 1;
            seen.1.extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_that_trickle_in_leave_together() {
        let seen = Arc::new(Mutex::new((0, Vec::new())));
        let queue = LineQueue::spawn(Counted(Arc::clone(&seen)), 4096);
        let started = Instant::now();
        for i in 0..200 {
            queue.write_owned(format!("{{\"n\":{i}}}"));
            std::thread::sleep(Duration::from_micros(100));
        }
        assert!(queue.flush_blocking(Duration::from_secs(5)));
        let windows = started.elapsed().as_micros() / queue::GATHER.as_micros();
        let seen = seen.lock().unwrap();
        assert_eq!(String::from_utf8_lossy(&seen.1).lines().count(), 200);
        // At most one write (one wake-up) per gathering window, not one per line.
        assert!(
            seen.0 as u128 <= windows + 2,
            "{} writes in {windows} windows",
            seen.0
        );
    }

    #[tokio::test]
    async fn a_flush_right_after_a_line_does_not_wait_out_the_gathering_window() {
        // The window is far longer than the flush's timeout: a flush that waited it out (its
        // wake-up taken by the channel's own receive) would time out.
        let seen = Arc::new(Mutex::new((0, Vec::new())));
        let queue =
            LineQueue::spawn_gathering(Counted(Arc::clone(&seen)), 64, Duration::from_secs(30));
        for i in 0..300 {
            queue.write_owned(format!("{{\"n\":{i}}}"));
            let flushed = match i % 2 {
                0 => queue.flush(Duration::from_secs(10)).await,
                _ => queue.flush_blocking(Duration::from_secs(10)),
            };
            assert!(flushed, "line {i} waited for the window");
        }
        let seen = seen.lock().unwrap();
        assert_eq!(String::from_utf8_lossy(&seen.1).lines().count(), 300);
    }

    #[tokio::test]
    async fn a_flush_waits_for_the_lines_queued_before_it() {
        let written = Arc::new(Mutex::new(Vec::new()));
        let (open, gate) = mpsc::channel();
        let (waiting, _writing) = mpsc::channel();
        let out = Gated {
            gate,
            waiting,
            written: Arc::clone(&written),
        };
        let queue = LineQueue::spawn(out, 16);
        queue.write_line("{}");
        assert!(!queue.flush(Duration::from_millis(50)).await, "held");
        drop(open);
        assert!(queue.flush(Duration::from_secs(5)).await);
        assert_eq!(&*written.lock().unwrap(), b"{}\n");
    }

    #[test]
    fn lines_are_the_embedded_metric_format() {
        let lines = Arc::new(Lines::default());
        let metrics = Metrics::emf(Arc::clone(&lines) as _, "r\"1");
        metrics.answer(503, "sink_unavailable", 1.5);
        metrics.duplicate();
        let mut lines = lines.0.lock().unwrap();
        let timestamp = lines[0]["_aws"]["Timestamp"].as_u64().unwrap();
        assert!(timestamp > 1_700_000_000_000, "{timestamp}");
        lines[0]["_aws"]["Timestamp"] = 0.into();
        assert_eq!(
            lines[0],
            json!({
                "Relay": "r\"1", "Class": "5xx", "Status": "503", "Code": "sink_unavailable",
                "Answers": 1, "Latency": 1.5,
                "_aws": {"Timestamp": 0, "CloudWatchMetrics": [{
                    "Namespace": "DssRelay",
                    "Dimensions": [["Relay", "Class"], ["Relay", "Status"], ["Relay", "Status", "Code"]],
                    "Metrics": [
                        {"Name": "Answers", "Unit": "Count"},
                        {"Name": "Latency", "Unit": "Milliseconds"}
                    ]
                }]}
            })
        );
        assert_eq!(lines[1]["Duplicates"], 1);
        assert_eq!(
            lines[1]["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Relay"]])
        );
    }

    #[test]
    fn batch_size_is_declared_only_where_a_batch_carried_the_message() {
        let lines = Arc::new(Lines::default());
        let metrics = Metrics::emf(Arc::clone(&lines) as _, "r");
        let batched = Receipt {
            batch_size: Some(7),
            ..Receipt::new(None)
        };
        let (none, busy) = (Receipt::new(None), SinkError::Retryable("busy".into()));
        let t = "//pubsub.googleapis.com/projects/p/topics/t";
        let q = "arn:aws:sqs:us-east-1:1:q";
        for (sink, resource, result) in [
            ("q", q, Ok(&batched)),
            ("t", t, Ok(&none)),
            ("q", q, Err(&busy)),
        ] {
            metrics.publish(Origin::Request, sink, resource, result, 1.0);
        }
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
        assert_eq!(
            (lines[1]["Sink"].as_str(), lines[1]["Resource"].as_str()),
            (Some("t"), Some(t))
        );
    }
}
