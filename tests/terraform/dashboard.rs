//! The relay modules' dashboards, held to what is actually emitted: every widget of the
//! CloudWatch dashboard (aws-relay) and of the Cloud Monitoring dashboard (gcp-relay) reads a
//! metric the relay writes, with dimensions it writes, or one the platform emits.
//!
//! What the relay writes is not a list kept here: relay-core's own `Metrics` writes its lines
//! (every kind of answer, publish, ledger call and duplicate) into a buffer, and the test reads
//! the metrics, dimension sets and values those lines declare. The platform's metrics are a
//! short allowlist ([`AWS_PLATFORM`], [`GCP_PLATFORM`]). The dashboards' bodies are read from
//! the HCL of `jsonencode(…)` (widgets in `local.dashboard_widgets`), with what Terraform would
//! interpolate left as `${…}`.
//!
//! Each check returns its problems; `a_widget_reading_what_nobody_emits_is_caught` breaks the
//! dashboards in the ways a widget goes blank and expects a problem from each.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hcl::Expression;
use hcl::template::{Element, Template};
use relay_core::metrics::{LineQueue, Metrics, MetricsOut, NAMESPACE};
use relay_core::notification::Origin;
use relay_core::{Receipt, SinkError};
use serde_json::Value;

use crate::model::{self, Config, attr, literal_string, nested, object_key, references};

/// AWS metrics the dashboard may read besides the relay's: (namespace, metric, dimensions).
const AWS_PLATFORM: [(&str, &str, &[&str]); 6] = [
    ("AWS/Lambda", "ConcurrentExecutions", &["FunctionName"]),
    ("AWS/Lambda", "Throttles", &["FunctionName"]),
    ("AWS/Lambda", "Errors", &["FunctionName"]),
    ("AWS/Lambda", "Duration", &["FunctionName"]),
    ("AWS/Lambda", "Invocations", &["FunctionName"]),
    (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        &["QueueName"],
    ),
];

/// What an AWS dimension's value must be written as: the relay's name (the function's name) or
/// the module's dead-letter queue.
const AWS_DIMENSION_VALUES: [(&str, &[&str]); 3] = [
    (
        "Relay",
        &["${var.name}", "${aws_lambda_function.this.function_name}"],
    ),
    (
        "FunctionName",
        &["${var.name}", "${aws_lambda_function.this.function_name}"],
    ),
    (
        "QueueName",
        &[
            "${one(aws_sqs_queue.dlq[*].name)}",
            "${aws_sqs_queue.dlq[0].name}",
        ],
    ),
];

/// Google Cloud metrics the dashboard may read besides the logs-based ones: (metric type, its
/// monitored resource type, its metric labels).
const GCP_PLATFORM: [(&str, &str, &[&str]); 3] = [
    (
        "run.googleapis.com/container/instance_count",
        "cloud_run_revision",
        &["state"],
    ),
    (
        "run.googleapis.com/request_count",
        "cloud_run_revision",
        &["response_code", "response_code_class", "route"],
    ),
    (
        "pubsub.googleapis.com/subscription/num_undelivered_messages",
        "pubsub_subscription",
        &[],
    ),
];

/// The labels of the monitored resources the dashboard reads.
const GCP_RESOURCE_LABELS: [(&str, &[&str]); 2] = [
    (
        "cloud_run_revision",
        &[
            "project_id",
            "service_name",
            "revision_name",
            "location",
            "configuration_name",
        ],
    ),
    ("pubsub_subscription", &["project_id", "subscription_id"]),
];

/// The metric type prefix of logs-based metrics.
const USER_METRIC: &str = "logging.googleapis.com/user/";

/// What each dashboard must show (issue: answers by class and code, latency, publish latency
/// and batch size per destination, duplicates and ledger latency, undelivered notifications,
/// dropped metric lines, replays on AWS, dead letters, the platform's concurrency or
/// instances): AWS metric names, and GCP metrics (logs-based metric resources and platform
/// metric types).
const AWS_NEEDED: [&str; 14] = [
    "Answers",
    "Latency",
    "PublishLatency",
    "BatchSize",
    "Duplicates",
    "LedgerLatency",
    "Undelivered",
    "Replays",
    "MetricLinesDropped",
    "ApproximateNumberOfMessagesVisible",
    "ConcurrentExecutions",
    "Throttles",
    "Errors",
    "Duration",
];
const GCP_NEEDED: [&str; 11] = [
    "answers",
    "answer_latency",
    "publish_latency",
    "batch_size",
    "duplicates",
    "ledger_latency",
    "undelivered",
    "metric_lines_dropped",
    "pubsub.googleapis.com/subscription/num_undelivered_messages",
    "run.googleapis.com/container/instance_count",
    "run.googleapis.com/request_count",
];

////////////////////////////////////////////////////////////////////////////////////////////////
// Tests
////////////////////////////////////////////////////////////////////////////////////////////////

/// Every widget of the CloudWatch dashboard reads a `DssRelay` metric the relay writes, with a
/// dimension set it declares (SEARCH schemas included) and the relay's name as `Relay`, or one of
/// the Lambda and SQS metrics of [`AWS_PLATFORM`] of the module's function and dead-letter queue.
#[test]
fn every_cloudwatch_widget_reads_an_emitted_metric() {
    let config = model::module("aws-relay");
    let read = aws_dashboard(&config);
    assert!(read.problems.is_empty(), "{:#?}", read.problems);
}

/// Every widget of the Cloud Monitoring dashboard reads a logs-based metric of the module, with
/// labels it has, whose filter, value and labels are fields the relay writes on the lines it
/// selects; or one of the Cloud Run and Pub/Sub metrics of [`GCP_PLATFORM`], with their labels.
#[test]
fn every_cloud_monitoring_widget_reads_an_emitted_metric() {
    let config = model::module("gcp-relay");
    let read = gcp_dashboard(&config);
    assert!(read.problems.is_empty(), "{:#?}", read.problems);
}

/// Both dashboards show answers, latencies, publishes, duplicates, the ledger, dead letters and
/// the platform's capacity; each is created unless `dashboard_enabled = false` (default true),
/// and its module outputs where to find it.
#[test]
fn each_dashboard_shows_what_an_operator_needs() {
    for (name, resource, needed) in [
        ("aws-relay", "aws_cloudwatch_dashboard", &AWS_NEEDED[..]),
        ("gcp-relay", "google_monitoring_dashboard", &GCP_NEEDED[..]),
    ] {
        let config = model::module(name);
        let read = match name {
            "aws-relay" => aws_dashboard(&config),
            _ => gcp_dashboard(&config),
        };
        for metric in needed {
            assert!(
                read.metrics.contains(*metric),
                "{name}: the dashboard shows no {metric} (it reads {:?})",
                read.metrics
            );
        }
        let count = attr(config.resource(resource, "this").body(), "count")
            .map(ToString::to_string)
            .unwrap_or_default();
        assert_eq!(
            count.trim(),
            "var.dashboard_enabled ? 1 : 0",
            "{name}: {resource}.this"
        );
        let variable = config.variables()["dashboard_enabled"];
        let default = attr(variable.body(), "default").map(ToString::to_string);
        assert_eq!(default.as_deref().map(str::trim), Some("true"), "{name}");
        assert!(
            config.outputs().contains_key("dashboard_url"),
            "{name}: no dashboard_url output"
        );
    }
}

/// A module without its dashboard is a problem, and so is each way a widget silently shows
/// nothing: a metric or a label the relay never writes, a dimension set it never declares, a value it never gives, a platform metric that
/// does not exist, a logs-based metric reading a field the relay does not write.
#[test]
fn a_widget_reading_what_nobody_emits_is_caught() {
    let mutations: [(&str, &str, &str, &str); 10] = [
        // No dashboard at all (before the modules had one).
        (
            "aws-relay",
            "dashboard.tf",
            r#"resource "aws_cloudwatch_dashboard" "this""#,
            r#"resource "terraform_data" "no_dashboard""#,
        ),
        (
            "gcp-relay",
            "dashboard.tf",
            r#"resource "google_monitoring_dashboard" "this""#,
            r#"resource "terraform_data" "no_dashboard""#,
        ),
        (
            "aws-relay",
            "dashboard.tf",
            r#"["DssRelay", "Duplicates", "Relay", var.name]"#,
            r#"["DssRelay", "Retries", "Relay", var.name]"#,
        ),
        (
            "aws-relay",
            "dashboard.tf",
            r#"{DssRelay,Relay,Sink} MetricName=\"BatchSize\""#,
            r#"{DssRelay,Relay,Code} MetricName=\"BatchSize\""#,
        ),
        (
            "aws-relay",
            "dashboard.tf",
            r#""Class", "5xx""#,
            r#""Class", "500""#,
        ),
        (
            "aws-relay",
            "dashboard.tf",
            r#""AWS/Lambda", "Throttles""#,
            r#""AWS/Lambda", "Throttled""#,
        ),
        (
            "aws-relay",
            "dashboard.tf",
            r#"MetricName=\"PublishLatency\" Relay=\"${var.name}\"'"#,
            r#"MetricName=\"PublishLatency\"'"#,
        ),
        (
            "gcp-relay",
            "dashboard.tf",
            r#"groupByFields      = ["metric.label.\"sink\""]"#,
            r#"groupByFields      = ["metric.label.\"destination\""]"#,
        ),
        (
            "gcp-relay",
            "dashboard.tf",
            "run.googleapis.com/request_count",
            "run.googleapis.com/request_counts",
        ),
        (
            "gcp-relay",
            "dashboard.tf",
            "EXTRACT(jsonPayload.LedgerLatency)",
            "EXTRACT(jsonPayload.LedgerMs)",
        ),
    ];
    for (module, file, from, to) in mutations {
        let dir = model::terraform_dir().join("modules").join(module);
        let edit = |name: &str, text: String| {
            if name != file {
                return text;
            }
            assert!(text.contains(from), "{module}/{file} no longer has {from}");
            text.replacen(from, to, 1)
        };
        let config = Config::load_edited(&dir, &edit);
        let read = match module {
            "aws-relay" => aws_dashboard(&config),
            _ => gcp_dashboard(&config),
        };
        assert!(
            !read.problems.is_empty(),
            "{module}: {from} -> {to} went unnoticed"
        );
    }
}

////////////////////////////////////////////////////////////////////////////////////////////////
// What the relay writes
////////////////////////////////////////////////////////////////////////////////////////////////

#[derive(Debug, Default)]
struct Lines(Mutex<Vec<Value>>);

impl MetricsOut for Lines {
    fn write_line(&self, line: &str) {
        let value = serde_json::from_str(line).expect("a metric line is JSON");
        self.0.lock().expect("lines").push(value);
    }
}

/// One metric the relay declares: its dimension sets, and the values each dimension took.
#[derive(Debug, Default)]
struct Emitted {
    dimension_sets: BTreeSet<BTreeSet<String>>,
    values: BTreeMap<String, BTreeSet<String>>,
}

/// Standard output that does not keep up: its first write waits until `open` says so.
struct Stalled {
    written: Arc<Mutex<Vec<u8>>>,
    open: Option<Receiver<()>>,
}

impl Write for Stalled {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Some(open) = self.open.take() {
            let _ = open.recv();
        }
        self.written
            .lock()
            .expect("written")
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The line relay-core's line queue writes when it dropped lines (`MetricLinesDropped`): a
/// queue of one line over a standard output whose first write waits, sent more lines than that.
fn dropped_lines_line() -> Value {
    let written = Arc::new(Mutex::new(Vec::new()));
    let (open, gate) = channel();
    let out = Stalled {
        written: Arc::clone(&written),
        open: Some(gate),
    };
    let queue = Arc::new(LineQueue::spawn(out, 1));
    let metrics = Metrics::emf(Arc::clone(&queue) as _, "relay");
    for _ in 0..8 {
        metrics.duplicate();
    }
    open.send(()).expect("the writer waits");
    assert!(
        queue.flush_blocking(Duration::from_secs(10)),
        "the line queue flushes"
    );
    let text = String::from_utf8(written.lock().expect("written").clone()).expect("UTF-8 lines");
    text.lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("a metric line is JSON"))
        .find(|line| line.get("MetricLinesDropped").is_some())
        .expect("a queue of one line drops some of eight, and says so")
}

/// The relay's metric lines, one of each kind relay-core writes: answers of each class, publishes
/// batched, unbatched and failed both ways, every ledger call and result, a duplicate, an
/// undelivered notification, a verified request refused, replays, and dropped lines.
fn relay_lines() -> Vec<Value> {
    let lines = Arc::new(Lines::default());
    let metrics = Metrics::emf(Arc::clone(&lines) as _, "relay");
    for (status, code) in [
        (202, "published"),
        (202, "filtered"),
        (202, "duplicate"),
        (401, "bad_signature"),
        (502, "sink_failed"),
        (503, "sink_unavailable"),
    ] {
        metrics.answer(status, code, 1.0);
    }
    let (batched, single) = (
        Receipt {
            batch_size: Some(3),
            ..Receipt::new(None)
        },
        Receipt::new(None),
    );
    let busy = SinkError::Retryable("busy".into());
    let denied = SinkError::Permanent("denied".into());
    let (q, t) = (
        "arn:aws:sqs:us-east-1:1:q",
        "//pubsub.googleapis.com/projects/p/topics/t",
    );
    let published = [("q", q, Ok(&batched)), ("t", t, Ok(&single))];
    for (sink, resource, result) in published
        .into_iter()
        .chain([("q", q, Err(&busy)), ("q", q, Err(&denied))])
    {
        metrics.publish(Origin::Request, sink, resource, result, 1.0);
    }
    for (call, result) in [
        ("claim", "ok"),
        ("claim", "busy"),
        ("claim", "error"),
        ("settle", "ok"),
        ("settle", "error"),
    ] {
        metrics.ledger(call, result, 1.0);
    }
    metrics.duplicate();
    metrics.undelivered();
    metrics.verified_refused("missing_payload_field", true);
    for result in [Ok(&single), Err(&busy)] {
        metrics.publish(Origin::Archive, "q", q, result, 1.0);
    }
    let mut lines = lines.0.lock().expect("lines").clone();
    assert!(!lines.is_empty(), "relay-core wrote no metric line");
    lines.push(dropped_lines_line());
    lines
}

/// Metric name → what the relay declares of it, in the `DssRelay` namespace.
fn emitted() -> BTreeMap<String, Emitted> {
    let mut out: BTreeMap<String, Emitted> = BTreeMap::new();
    for line in relay_lines() {
        for declaration in line["_aws"]["CloudWatchMetrics"].as_array().expect("EMF") {
            assert_eq!(declaration["Namespace"], NAMESPACE);
            let sets: Vec<BTreeSet<String>> = declaration["Dimensions"]
                .as_array()
                .expect("Dimensions")
                .iter()
                .map(|set| strings(set).into_iter().collect())
                .collect();
            for metric in declaration["Metrics"].as_array().expect("Metrics") {
                let name = metric["Name"].as_str().expect("Name").to_owned();
                let entry = out.entry(name).or_default();
                for set in &sets {
                    entry.dimension_sets.insert(set.clone());
                    for dimension in set {
                        if let Some(value) = line[dimension.as_str()].as_str() {
                            let values = entry.values.entry(dimension.clone()).or_default();
                            values.insert(value.to_owned());
                        }
                    }
                }
            }
        }
    }
    out
}

/// The fields of the relay's metric lines, one set per line (without `_aws`).
fn line_fields() -> Vec<BTreeSet<String>> {
    relay_lines()
        .iter()
        .map(|line| {
            let object = line.as_object().expect("a line is an object");
            object.keys().filter(|k| *k != "_aws").cloned().collect()
        })
        .collect()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            let texts = items.iter().filter_map(Value::as_str);
            texts.map(str::to_owned).collect()
        })
        .unwrap_or_default()
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Reading a dashboard's HCL
////////////////////////////////////////////////////////////////////////////////////////////////

/// What a dashboard reads (metric names, logs-based metric resources, platform metric types),
/// and what is wrong with it.
#[derive(Debug, Default)]
struct Read {
    metrics: BTreeSet<String>,
    problems: Vec<String>,
}

impl Read {
    /// A dashboard that could not be read, and why.
    fn unread(problem: String) -> Self {
        Self {
            problems: vec![problem],
            ..Self::default()
        }
    }
}

/// The argument of `jsonencode(…)` of a dashboard resource's `attribute`, and every local it
/// reads, directly or through other locals: where its widgets are written.
fn body_expressions<'a>(
    config: &'a Config,
    resource: &str,
    attribute: &str,
) -> Result<Vec<&'a Expression>, String> {
    let resources = config.resources(resource);
    let [(_, block)] = resources.as_slice() else {
        return Err(format!("{}: expected one {resource}", config.name));
    };
    let body = attr(block.body(), attribute);
    let Some(Expression::FuncCall(call)) = body else {
        return Err(format!(
            "{}: {attribute} must be jsonencode(…)",
            config.name
        ));
    };
    let ([argument], "jsonencode") = (call.args.as_slice(), call.name.name.as_str()) else {
        return Err(format!(
            "{}: {attribute} must be jsonencode(…)",
            config.name
        ));
    };
    let locals = config.locals();
    let mut found = vec![argument];
    let mut seen = BTreeSet::new();
    let mut i = 0;
    while let Some(expr) = found.get(i).copied() {
        for name in references(expr, "local") {
            if let Some(value) = locals.get(name.as_str())
                && seen.insert(name)
            {
                found.push(value);
            }
        }
        i += 1;
    }
    Ok(found)
}

/// Every object expression anywhere in `roots` that has all of `keys`.
fn objects_with<'a>(roots: &[&'a Expression], keys: &[&str]) -> Vec<&'a Expression> {
    let mut out: Vec<&'a Expression> = Vec::new();
    for root in roots {
        collect(root, &mut |e| {
            if keys.iter().all(|k| field(e, k).is_some()) {
                out.push(e);
            }
        });
    }
    out
}

/// Like `model::walk`, with the lifetimes of the expressions kept.
fn collect<'a>(expr: &'a Expression, f: &mut dyn FnMut(&'a Expression)) {
    f(expr);
    match expr {
        Expression::Array(items) => items.iter().for_each(|e| collect(e, f)),
        Expression::Object(object) => object.values().for_each(|e| collect(e, f)),
        Expression::FuncCall(call) => call.args.iter().for_each(|e| collect(e, f)),
        Expression::Parenthesis(inner) => collect(inner, f),
        Expression::Conditional(c) => {
            collect(&c.true_expr, f);
            collect(&c.false_expr, f);
        }
        Expression::ForExpr(fe) => {
            collect(&fe.collection_expr, f);
            collect(&fe.value_expr, f);
        }
        _ => {}
    }
}

/// The value of `key` in an object expression.
fn field<'a>(expr: &'a Expression, key: &str) -> Option<&'a Expression> {
    let Expression::Object(object) = expr else {
        return None;
    };
    object
        .iter()
        .find(|(k, _)| object_key(k) == key)
        .map(|(_, v)| v)
}

/// The string an expression gives, with what Terraform interpolates written `${expression}`
/// (without spaces or double quotes, so that the result can be scanned as a filter); `None`
/// for lists, objects and null.
fn text(expr: &Expression) -> Option<String> {
    let placeholder = |e: &Expression| {
        let source: String = e.to_string().split_whitespace().collect();
        format!("${{{}}}", source.replace('"', "'"))
    };
    match expr {
        Expression::String(s) => Some(s.clone()),
        Expression::Number(n) => Some(n.to_string()),
        Expression::Bool(b) => Some(b.to_string()),
        Expression::TemplateExpr(t) => {
            let template = Template::from_expr(t).ok()?;
            let mut out = String::new();
            for element in template.elements() {
                match element {
                    Element::Literal(s) => out.push_str(s),
                    Element::Interpolation(i) => out.push_str(&placeholder(&i.expr)),
                    Element::Directive(_) => out.push_str("${directive}"),
                }
            }
            Some(out)
        }
        Expression::Array(_) | Expression::Object(_) | Expression::Null => None,
        other => Some(placeholder(other)),
    }
}

/// Whether a value is written literally (nothing interpolated).
fn is_literal(value: &str) -> bool {
    !value.contains("${")
}

////////////////////////////////////////////////////////////////////////////////////////////////
// CloudWatch
////////////////////////////////////////////////////////////////////////////////////////////////

fn aws_dashboard(config: &Config) -> Read {
    let emitted = emitted();
    let roots = match body_expressions(config, "aws_cloudwatch_dashboard", "dashboard_body") {
        Ok(roots) => roots,
        Err(problem) => return Read::unread(problem),
    };
    let mut read = Read::default();
    let widgets = objects_with(&roots, &["type", "properties"]);
    if widgets.is_empty() {
        read.problems.push(format!("{}: no widget", config.name));
    }
    for widget in widgets {
        let properties = field(widget, "properties").expect("properties");
        let title = field(properties, "title")
            .and_then(text)
            .unwrap_or_else(|| "(untitled)".to_owned());
        let here = format!("{}: widget {title:?}", config.name);
        let kind = field(widget, "type").and_then(literal_string);
        match kind.as_deref() {
            Some("text") => continue,
            Some("metric") => {}
            other => {
                read.problems
                    .push(format!("{here}: type {other:?} cannot be checked"));
                continue;
            }
        }
        let Some(Expression::Array(rows)) = field(properties, "metrics") else {
            read.problems
                .push(format!("{here}: metrics must be a list of rows"));
            continue;
        };
        if rows.is_empty() {
            read.problems.push(format!("{here}: no metric"));
        }
        for row in rows {
            let Expression::Array(items) = row else {
                read.problems.push(format!("{here}: a row is not a list"));
                continue;
            };
            aws_row(items, &emitted, &here, &mut read);
        }
    }
    read
}

/// One row of a metric widget: `[namespace, metric, dimension, value, …, {options}]`, or
/// `[{expression = "…SEARCH('{namespace,dimension,…} MetricName=\"…\" …', …)…"}]`.
fn aws_row(items: &[Expression], emitted: &BTreeMap<String, Emitted>, here: &str, read: &mut Read) {
    if let Some(first @ Expression::Object(_)) = items.first() {
        let Some(expression) = field(first, "expression").and_then(text) else {
            read.problems
                .push(format!("{here}: a row's options come without a metric"));
            return;
        };
        let searches: Vec<&str> = expression.split("SEARCH(").skip(1).collect();
        if searches.is_empty() {
            read.problems.push(format!(
                "{here}: expression {expression:?} names no metric (SEARCH)"
            ));
        }
        for search in searches {
            aws_search(search, emitted, here, read);
        }
        return;
    }
    let texts: Vec<String> = items
        .iter()
        .take_while(|e| !matches!(e, Expression::Object(_)))
        .map(|e| text(e).unwrap_or_default())
        .collect();
    let [namespace, metric, dimensions @ ..] = texts.as_slice() else {
        read.problems
            .push(format!("{here}: a row needs a namespace and a metric"));
        return;
    };
    if dimensions.len() % 2 != 0 {
        read.problems.push(format!(
            "{here}: {metric}: dimensions come in name, value pairs"
        ));
        return;
    }
    let pairs: Vec<(String, String)> = dimensions
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    aws_metric(namespace, metric, &pairs, emitted, here, read);
}

/// A SEARCH expression's query, from just after `SEARCH(`: `'{namespace,dimension,…}
/// MetricName="…" dimension="value" …'`. The schema names the exact dimension set.
fn aws_search(search: &str, emitted: &BTreeMap<String, Emitted>, here: &str, read: &mut Read) {
    let query = search
        .trim_start()
        .strip_prefix('\'')
        .and_then(|q| q.split('\'').next());
    let Some(query) = query else {
        read.problems
            .push(format!("{here}: SEARCH({search}: no quoted query"));
        return;
    };
    let schema = query
        .trim_start()
        .strip_prefix('{')
        .and_then(|s| s.split_once('}'));
    let Some((schema, terms)) = schema else {
        read.problems.push(format!(
            "{here}: SEARCH '{query}' has no {{namespace,dimension,…}} schema"
        ));
        return;
    };
    let mut names = schema.split(',').map(str::trim);
    let namespace = names.next().unwrap_or_default();
    let schema_dimensions: Vec<&str> = names.collect();
    let mut metric = None;
    let mut given: BTreeMap<String, String> = BTreeMap::new();
    for term in terms.split_whitespace() {
        let Some((key, value)) = term.split_once('=') else {
            read.problems.push(format!(
                "{here}: SEARCH '{query}': term {term:?} is not key=\"value\""
            ));
            continue;
        };
        let value = value.trim_matches('"').to_owned();
        if key == "MetricName" {
            metric = Some(value);
        } else {
            given.insert(key.to_owned(), value);
        }
    }
    let Some(metric) = metric else {
        read.problems
            .push(format!("{here}: SEARCH '{query}' names no MetricName"));
        return;
    };
    for key in given.keys() {
        if !schema_dimensions.contains(&key.as_str()) {
            read.problems.push(format!(
                "{here}: SEARCH '{query}': {key} is not a dimension of its schema"
            ));
        }
    }
    let pairs: Vec<(String, String)> = schema_dimensions
        .iter()
        .map(|d| {
            let value = given
                .get(*d)
                .cloned()
                .unwrap_or_else(|| "${any}".to_owned());
            ((*d).to_owned(), value)
        })
        .collect();
    aws_metric(namespace, &metric, &pairs, emitted, here, read);
}

/// One metric with its dimension (name, value) pairs: a `${any}` value is any value (a SEARCH
/// over that dimension).
fn aws_metric(
    namespace: &str,
    metric: &str,
    pairs: &[(String, String)],
    emitted: &BTreeMap<String, Emitted>,
    here: &str,
    read: &mut Read,
) {
    let names: BTreeSet<String> = pairs.iter().map(|(n, _)| n.clone()).collect();
    read.metrics.insert(metric.to_owned());
    let here = format!("{here}: {namespace} {metric} {names:?}");
    if namespace == NAMESPACE {
        let Some(declared) = emitted.get(metric) else {
            read.problems.push(format!(
                "{here}: the relay writes no {metric} (it writes {:?})",
                emitted.keys().collect::<Vec<_>>()
            ));
            return;
        };
        if !declared.dimension_sets.contains(&names) {
            read.problems.push(format!(
                "{here}: the relay declares {metric} with {:?} only",
                declared.dimension_sets
            ));
        }
        for (name, value) in pairs {
            if name == "Relay" || value == "${any}" || !is_literal(value) {
                continue;
            }
            let values = declared.values.get(name).cloned().unwrap_or_default();
            if !values.contains(value) {
                read.problems.push(format!(
                    "{here}: the relay never writes {name} = {value:?} (it writes {values:?})"
                ));
            }
        }
        if !names.contains("Relay") {
            read.problems.push(format!(
                "{here}: without Relay it mixes every relay's metrics"
            ));
        }
    } else {
        let known = AWS_PLATFORM
            .iter()
            .find(|(ns, name, _)| *ns == namespace && *name == metric);
        let Some((_, _, dimensions)) = known else {
            read.problems.push(format!(
                "{here}: not a metric of the relay or of the platform"
            ));
            return;
        };
        let expected: BTreeSet<String> = dimensions.iter().map(|d| (*d).to_owned()).collect();
        if names != expected {
            read.problems.push(format!(
                "{here}: {namespace} {metric} has dimensions {expected:?}"
            ));
        }
    }
    for (name, value) in pairs {
        if let Some((_, allowed)) = AWS_DIMENSION_VALUES.iter().find(|(d, _)| d == name)
            && !allowed.contains(&value.as_str())
        {
            read.problems.push(format!(
                "{here}: {name} must be one of {allowed:?}, not {value:?}"
            ));
        }
    }
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Cloud Monitoring
////////////////////////////////////////////////////////////////////////////////////////////////

fn gcp_dashboard(config: &Config) -> Read {
    let roots = match body_expressions(config, "google_monitoring_dashboard", "dashboard_json") {
        Ok(roots) => roots,
        Err(problem) => return Read::unread(problem),
    };
    let mut read = Read::default();
    let fields = line_fields();
    for unreadable in [
        "timeSeriesQueryLanguage",
        "prometheusQuery",
        "timeSeriesFilterRatio",
    ] {
        if !objects_with(&roots, &[unreadable]).is_empty() {
            read.problems
                .push(format!("{}: {unreadable} cannot be checked", config.name));
        }
    }
    let widgets = objects_with(&roots, &["title"]);
    if widgets.is_empty() {
        read.problems.push(format!("{}: no widget", config.name));
    }
    for widget in widgets {
        let title = field(widget, "title").and_then(text).unwrap_or_default();
        let here = format!("{}: widget {title:?}", config.name);
        let queries = objects_with(&[widget], &["timeSeriesQuery"]);
        if queries.is_empty() && field(widget, "text").is_none() {
            read.problems.push(format!("{here}: reads no time series"));
        }
        for query in objects_with(&[widget], &["timeSeriesFilter"]) {
            let filter = field(query, "timeSeriesFilter").expect("timeSeriesFilter");
            gcp_filter(config, filter, &fields, &here, &mut read);
        }
    }
    read
}

/// One `timeSeriesFilter`: its filter's metric and resource types and labels, and the labels of
/// its aggregations' `groupByFields`.
fn gcp_filter(
    config: &Config,
    filter: &Expression,
    fields: &[BTreeSet<String>],
    here: &str,
    read: &mut Read,
) {
    let Some(text_filter) = field(filter, "filter").and_then(text) else {
        read.problems.push(format!("{here}: no filter"));
        return;
    };
    let mut labels = labels_in(&text_filter);
    let mut reducers = Vec::new();
    for key in ["aggregation", "secondaryAggregation"] {
        let Some(aggregation) = field(filter, key) else {
            continue;
        };
        if let Some(Expression::Array(group_by)) = field(aggregation, "groupByFields") {
            for item in group_by {
                labels.extend(labels_in(&text(item).unwrap_or_default()));
            }
        }
        for step in ["perSeriesAligner", "crossSeriesReducer"] {
            reducers.extend(field(aggregation, step).and_then(text));
        }
    }
    let (Some(metric_type), Some(resource_type)) = (
        quoted_after(&text_filter, "metric.type"),
        quoted_after(&text_filter, "resource.type"),
    ) else {
        read.problems.push(format!(
            "{here}: filter {text_filter:?} must name metric.type and resource.type"
        ));
        return;
    };
    let here = format!("{here}: {metric_type}");
    let resource_labels = GCP_RESOURCE_LABELS
        .iter()
        .find(|(r, _)| *r == resource_type)
        .map(|(_, l)| *l);
    let Some(resource_labels) = resource_labels else {
        read.problems.push(format!(
            "{here}: resource type {resource_type} is not one the relay runs on"
        ));
        return;
    };
    let metric_labels: Vec<String>;
    let mut distribution = false;
    if let Some(rest) = metric_type.strip_prefix(USER_METRIC) {
        let Some(metric) = logs_metric(config, rest) else {
            read.problems.push(format!(
                "{here}: not one of the module's google_logging_metric resources"
            ));
            return;
        };
        read.metrics.insert(metric.0.clone());
        if resource_type != "cloud_run_revision" {
            read.problems.push(format!(
                "{here}: the relay's lines come from cloud_run_revision"
            ));
        }
        metric_labels = metric.1;
        distribution = metric.2;
        read.problems
            .extend(logs_metric_problems(config, &metric.0, fields));
    } else {
        let known = GCP_PLATFORM.iter().find(|(m, _, _)| *m == metric_type);
        let Some((_, resource, names)) = known else {
            read.problems.push(format!(
                "{here}: not a metric of the relay or of the platform"
            ));
            return;
        };
        read.metrics.insert(metric_type.clone());
        if *resource != resource_type {
            read.problems.push(format!(
                "{here}: it is a metric of {resource}, not {resource_type}"
            ));
        }
        metric_labels = names.iter().map(|n| (*n).to_owned()).collect();
    }
    for (kind, label) in labels {
        let known = match kind {
            "metric" => metric_labels.contains(&label),
            _ => resource_labels.contains(&label.as_str()),
        };
        if !known {
            read.problems
                .push(format!("{here}: no {kind} label {label:?}"));
        }
    }
    for step in reducers {
        if step.contains("PERCENTILE") && !distribution {
            read.problems
                .push(format!("{here}: {step} needs a distribution metric"));
        }
    }
}

/// `(metric|resource, label)` of every `metric.label."x"`, `metric.labels.x`,
/// `resource.label."x"` and `resource.labels.x` in a filter or a group-by field.
fn labels_in(text: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (kind, prefixes) in [
        ("metric", ["metric.labels.", "metric.label."]),
        ("resource", ["resource.labels.", "resource.label."]),
    ] {
        let mut rest = text;
        while let Some(at) = prefixes
            .iter()
            .filter_map(|p| rest.find(p).map(|i| (i, p)))
            .min()
        {
            let after = &rest[at.0 + at.1.len()..];
            let name: String = after
                .trim_start_matches('"')
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.push((kind, name));
            rest = after;
        }
    }
    out
}

/// The quoted value after `key =` in a filter.
fn quoted_after(filter: &str, key: &str) -> Option<String> {
    let rest = &filter[filter.find(key)? + key.len()..];
    let rest = rest.trim_start().strip_prefix('=')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    rest.split('"').next().map(str::to_owned)
}

/// The module's logs-based metric that `logging.googleapis.com/user/<rest>` names, through
/// `${google_logging_metric.<x>.name}` (or `[0]`, or `one(…[*].name)`): its resource name, its
/// labels, and whether it is a distribution.
fn logs_metric(config: &Config, rest: &str) -> Option<(String, Vec<String>, bool)> {
    let inner = rest.strip_prefix("${")?.strip_suffix('}')?;
    // A counted metric's name, "" when it is not created: `join('',X[*].name)`.
    let inner = inner
        .strip_prefix("join('',")
        .and_then(|i| i.strip_suffix(')'))
        .unwrap_or(inner);
    let reference = inner.strip_prefix("google_logging_metric.")?;
    let name = reference.strip_suffix(".name")?;
    let name = name
        .strip_suffix("[0]")
        .or_else(|| name.strip_suffix("[*]"))
        .unwrap_or(name);
    let (_, block) = config
        .resources("google_logging_metric")
        .into_iter()
        .find(|(n, _)| *n == name)?;
    let descriptor = nested(block.body(), "metric_descriptor").next()?;
    let labels = nested(descriptor.body(), "labels")
        .filter_map(|l| attr(l.body(), "key").and_then(literal_string))
        .collect();
    let distribution = attr(descriptor.body(), "value_type")
        .and_then(literal_string)
        .is_some_and(|t| t == "DISTRIBUTION");
    Some((name.to_owned(), labels, distribution))
}

/// A logs-based metric reads the relay's lines: its filter selects the service's standard
/// output (`local.metric_lines`) and lines with a field the relay writes (`jsonPayload.X:*`);
/// its value and every label are fields of every line so selected.
fn logs_metric_problems(config: &Config, name: &str, fields: &[BTreeSet<String>]) -> Vec<String> {
    let mut problems = Vec::new();
    let block = config.resource("google_logging_metric", name);
    let here = format!("{}: google_logging_metric.{name}", config.name);
    let filter = attr(block.body(), "filter")
        .and_then(text)
        .unwrap_or_default();
    if !filter.contains("${local.metric_lines}") {
        problems.push(format!(
            "{here}: the filter must start from local.metric_lines"
        ));
    }
    let marker = filter
        .split("jsonPayload.")
        .nth(1)
        .and_then(|m| m.split_once(":*"))
        .map(|(f, _)| f);
    let Some(marker) = marker.map(str::to_owned) else {
        problems.push(format!(
            "{here}: the filter selects no jsonPayload.<field>:*"
        ));
        return problems;
    };
    let selected: Vec<&BTreeSet<String>> = fields.iter().filter(|f| f.contains(&marker)).collect();
    if selected.is_empty() {
        problems.push(format!("{here}: the relay writes no line with {marker}"));
        return problems;
    }
    let mut extracted = Vec::new();
    if let Some(value) = attr(block.body(), "value_extractor").and_then(text) {
        extracted.push(("value_extractor".to_owned(), value));
    }
    if let Some(Expression::Object(labels)) = attr(block.body(), "label_extractors") {
        for (key, value) in labels.iter() {
            extracted.push((object_key(key), text(value).unwrap_or_default()));
        }
    }
    for (what, extractor) in extracted {
        let field_name = extractor
            .strip_prefix("EXTRACT(jsonPayload.")
            .and_then(|f| f.strip_suffix(')'));
        match field_name {
            Some(f) if selected.iter().all(|line| line.contains(f)) => {}
            _ => problems.push(format!(
                "{here}: {what} = {extractor:?} is not a field of every line with {marker}"
            )),
        }
    }
    problems
}

/// A counted resource's attribute read into a string template with `one(…)` is null when the
/// resource is not created, and Terraform refuses to interpolate a null: the module cannot be
/// planned with its toggle off (gcp-relay's dashboard with `ledger_enabled = false` was). Each
/// such read is behind a conditional on its line, or written `join("", …)`.
#[test]
fn no_template_interpolates_a_resource_that_may_not_exist() {
    let mut problems = Vec::new();
    for config in model::modules().iter().chain(&model::examples()) {
        for file in config.files.keys() {
            let text = std::fs::read_to_string(config.dir.join(file)).expect("a .tf file");
            for (n, line) in text.lines().enumerate() {
                if line.contains("${one(") && !line.contains(" ? ") {
                    let name = &config.name;
                    problems.push(format!("{name}/{file}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
