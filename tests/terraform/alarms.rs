//! The relay modules' alarms, held to the DSS's retry schedules (`../shared/docs/dss-protocol.md`
//! sections 3.3 and 3.4): each alarm is read from the module into a small model of how CloudWatch
//! or Cloud Monitoring evaluates it, and a relay that fails every attempt of one notification an
//! hour, retried on each schedule, must make every alarm on that failure fire within two hours.
//!
//! The alarms of the commit before this design (10 one-minute periods, every one breaching; on
//! GCP, ten minutes of a non-2xx rate above 0) are kept below, as written, with a test that they
//! never fire in that case: why the alarms changed.

use std::collections::BTreeMap;
use std::path::PathBuf;

use hcl::{Block, Body, Expression};
use serde_json::Value;

use crate::eval::Scope;
use crate::model::{self, Config, attr, literal_string, nested, object_key};

////////////////////////////////////////////////////////////////////////////////////////////////
// The DSS's retry schedules, as documented
////////////////////////////////////////////////////////////////////////////////////////////////

/// v1 (section 3.3): `DSS_NOTIFY_DELAYS`, the wait before each of the 12 attempts, each counted
/// from when the previous attempt failed.
const V1_DELAYS_SECS: [u64; 12] = [
    0, 60, 600, 3600, 21600, 60540, 86400, 86400, 86400, 86400, 86400, 86400,
];

/// v2 (section 3.4): an inline attempt, a retry 900 s later (`DelaySeconds`), then one every
/// 6 h (the visibility timeout) while the message is within its 3 days of retention.
const V2_FIRST_RETRY_SECS: u64 = 900;
const V2_RETRY_SECS: u64 = 6 * 3600;
const V2_RETENTION_SECS: u64 = 3 * 24 * 3600;

/// Scheduling jitter per attempt (section 3.3): v1's notifier runs once a minute, and an attempt
/// may take up to its 60 s timeout.
const JITTER_SECS: u64 = 120;

/// From a relay's answer to its metric data point being evaluated: log delivery, metric
/// extraction and the alarm's once-a-minute evaluation.
const LAG_SECS: u64 = 180;

/// The bound the alarms are held to: a relay failing every notification alarms within this.
const WITHIN_SECS: u64 = 2 * 3600;

/// How long the simulations run: past the end of v2's retries.
const HORIZON_SECS: u64 = V2_RETENTION_SECS + 6 * 3600;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Schedule {
    V1,
    V2,
    /// v2's unversioned tombstone (section 3.4): no inline attempt, queued with no delay, then
    /// retried after each 6 h visibility timeout.
    V2UnversionedTombstone,
}

impl Schedule {
    /// When each attempt of a notification first sent at 0 is answered, with `jitter` seconds
    /// added to every attempt after the first.
    fn attempts(self, jitter: u64) -> Vec<u64> {
        match self {
            Schedule::V1 => {
                let mut at = 0;
                V1_DELAYS_SECS
                    .iter()
                    .enumerate()
                    .map(|(i, delay)| {
                        at += delay + if i > 0 { jitter } else { 0 };
                        at
                    })
                    .collect()
            }
            Schedule::V2 => {
                let mut attempts = vec![0];
                let mut at = V2_FIRST_RETRY_SECS + jitter;
                let enqueued = 0;
                while at < enqueued + V2_FIRST_RETRY_SECS + V2_RETENTION_SECS {
                    attempts.push(at);
                    at += V2_RETRY_SECS + jitter;
                }
                attempts
            }
            Schedule::V2UnversionedTombstone => {
                let mut attempts = Vec::new();
                let mut at = 0;
                while at < V2_RETENTION_SECS {
                    attempts.push(at);
                    at += V2_RETRY_SECS + jitter;
                }
                attempts
            }
        }
    }
}

/// The window every alarm must cover, derived from the schedules: the longest gap between a
/// notification's first two answers, with the jitter of both attempts.
fn two_attempts_secs() -> u64 {
    [Schedule::V1, Schedule::V2]
        .iter()
        .map(|s| {
            let attempts = s.attempts(0);
            attempts[1] - attempts[0] + 2 * JITTER_SECS
        })
        .max()
        .expect("two schedules")
}

////////////////////////////////////////////////////////////////////////////////////////////////
// The relay's answers, and which of them need whom
////////////////////////////////////////////////////////////////////////////////////////////////

/// One answer of the relay: when, its status and its code (the `Answers` metric line).
#[derive(Debug, Clone, Copy)]
struct Answer {
    at: u64,
    status: u16,
    code: &'static str,
}

/// Answers that need an operator: every DSS retry gets the same.
const NEEDS_OPERATOR: [(u16, &str); 4] = [
    (502, "sink_failed"),
    (401, "unknown_key_id"),
    (413, "message_too_large"),
    (401, "bad_signature"),
];

/// Refused after the signature verified (400 and 415, decided by `source/open.rs`): only a key
/// holder sends one, so one alarms (the relay's `VerifiedRefused` lines).
const VERIFIED_REFUSED: [(u16, &str); 12] = [
    (415, "missing_content_type"),
    (415, "unsupported_media_type"),
    (400, "duplicate_header"),
    (400, "invalid_multipart"),
    (400, "missing_payload_field"),
    (400, "duplicate_payload_field"),
    (400, "empty_payload"),
    (400, "invalid_json"),
    (400, "not_an_object"),
    (400, "missing_field"),
    (400, "invalid_field"),
    (400, "missing_dedup_key"),
];

/// 503s: the DSS's retries may get through; alarmed on when sustained.
const UNAVAILABLE: [(u16, &str); 4] = [
    (503, "sink_unavailable"),
    (503, "ledger_unavailable"),
    (503, "overloaded"),
    (503, "deadline_passed"),
];

/// Every attempt of one notification an hour, from 0 to the horizon, answered `status` `code`.
fn failing_hourly(schedule: Schedule, jitter: u64, status: u16, code: &'static str) -> Vec<Answer> {
    let attempts = schedule.attempts(jitter);
    (0..HORIZON_SECS / 3600)
        .flat_map(|n| attempts.iter().map(move |a| n * 3600 + a))
        .filter(|at| *at < HORIZON_SECS)
        .map(|at| Answer { at, status, code })
        .collect()
}

/// Every attempt of a single notification, answered `status` `code`.
fn failing_once(schedule: Schedule, jitter: u64, status: u16, code: &'static str) -> Vec<Answer> {
    let attempts = schedule.attempts(jitter);
    attempts
        .into_iter()
        .map(|at| Answer { at, status, code })
        .collect()
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Alarms, as the platforms evaluate them
////////////////////////////////////////////////////////////////////////////////////////////////

/// Which of the relay's answers one metric counts.
#[derive(Debug, Clone, PartialEq)]
enum Counts {
    /// `Answers` by `Status` and `Code`, or the answers metric filtered by code.
    Code(u16, String),
    /// By code alone (GCP's `code` label).
    AnyStatus(String),
    /// `Answers` by `Status` alone, every code of it.
    Status(u16),
    /// The relay's `VerifiedRefused` lines: one per answer of [`VERIFIED_REFUSED`].
    VerifiedRefused,
    /// A status class (`Url4xxCount`, `Url5xxCount`, `response_code_class`): 4 or 5.
    Class(u16),
    /// Every non-2xx answer.
    Non2xx,
    /// A platform metric no answer of the relay moves (Errors, Throttles, Cloud Run's own 429,
    /// 500 and 504, queue depths).
    Platform(String),
}

impl Counts {
    fn matches(&self, answer: &Answer) -> bool {
        match self {
            Counts::Code(status, code) => answer.status == *status && answer.code == code,
            Counts::AnyStatus(code) => answer.code == code,
            Counts::Status(status) => answer.status == *status,
            Counts::VerifiedRefused => VERIFIED_REFUSED.contains(&(answer.status, answer.code)),
            Counts::Class(class) => answer.status / 100 == *class,
            Counts::Non2xx => answer.status / 100 != 2,
            Counts::Platform(_) => false,
        }
    }
}

/// How an alarm decides.
#[derive(Debug, Clone)]
enum Rule {
    /// CloudWatch: `period`-second data points (the sum of the counted answers in each period,
    /// aligned to the epoch); ALARM when at least `datapoints` of the last `periods` meet the
    /// threshold. Missing data is not breaching (asserted).
    CloudWatch {
        period: u64,
        periods: u64,
        datapoints: u64,
        threshold: f64,
        inclusive: bool,
    },
    /// Cloud Monitoring: every minute, the counted answers of the trailing `window` seconds
    /// (summed, or as a rate per second with ALIGN_RATE); open when that is above `threshold`
    /// at every evaluation of the last `duration` seconds.
    CloudMonitoring {
        window: u64,
        rate: bool,
        threshold: f64,
        duration: u64,
    },
}

/// One alarm or alert policy condition of a module.
#[derive(Debug, Clone)]
struct Alarm {
    /// `aws_cloudwatch_metric_alarm.needs_operator`, …
    name: String,
    counts: Vec<Counts>,
    rule: Rule,
}

impl Alarm {
    /// The time the alarm fires, after the first answer it counts, if it does before the horizon.
    fn first_fired(&self, answers: &[Answer]) -> Option<u64> {
        let times: Vec<u64> = answers
            .iter()
            .filter(|a| a.at < HORIZON_SECS && self.counts.iter().any(|c| c.matches(a)))
            .map(|a| a.at)
            .collect();
        match self.rule {
            Rule::CloudWatch {
                period,
                periods,
                datapoints,
                threshold,
                inclusive,
            } => {
                let buckets = (HORIZON_SECS / period + 1) as usize;
                let mut values = vec![0.0_f64; buckets];
                for t in &times {
                    values[(t / period) as usize] += 1.0;
                }
                let breaching: Vec<bool> = values
                    .iter()
                    .map(|v| {
                        if inclusive {
                            *v >= threshold
                        } else {
                            *v > threshold
                        }
                    })
                    .collect();
                (0..buckets).find_map(|k| {
                    let first = (k + 1).saturating_sub(periods as usize);
                    let count = breaching[first..=k].iter().filter(|b| **b).count() as u64;
                    (count >= datapoints).then_some((k as u64 + 1) * period + LAG_SECS)
                })
            }
            Rule::CloudMonitoring {
                window,
                rate,
                threshold,
                duration,
            } => {
                let above = |t: u64| {
                    let from = t.saturating_sub(window);
                    let n = times.iter().filter(|a| **a >= from && **a < t).count() as f64;
                    let value = if rate { n / window as f64 } else { n };
                    value > threshold
                };
                (1..=HORIZON_SECS / 60).map(|m| m * 60).find_map(|t| {
                    let start = t.saturating_sub(duration);
                    let held = (0..=(t - start) / 60).all(|i| above(start + i * 60));
                    (t >= duration && held).then_some(t + LAG_SECS)
                })
            }
        }
    }

    /// The trailing span of answers the alarm looks at, in seconds.
    fn window_secs(&self) -> u64 {
        match self.rule {
            Rule::CloudWatch {
                period, periods, ..
            } => period * periods,
            Rule::CloudMonitoring {
                window, duration, ..
            } => window + duration,
        }
    }

    fn counts_answer(&self, status: u16, code: &str) -> bool {
        let answer = Answer {
            at: 0,
            status,
            code: "",
        };
        self.counts.iter().any(|c| match c {
            Counts::Code(s, c) => *s == status && c == code,
            Counts::AnyStatus(c) => c == code,
            Counts::VerifiedRefused => VERIFIED_REFUSED.contains(&(status, code)),
            other => other.matches(&answer),
        })
    }
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Reading the alarms from the modules
////////////////////////////////////////////////////////////////////////////////////////////////

/// One number an expression takes with the module's defaults.
fn number(scope: &Scope<'_>, expr: &Expression, what: &str) -> f64 {
    let samples = scope.samples(expr);
    samples
        .iter()
        .find_map(|v| match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{what}: no number in {expr} ({samples:?})"))
}

fn number_attr(scope: &Scope<'_>, body: &Body, key: &str, what: &str) -> Option<f64> {
    attr(body, key).map(|e| number(scope, e, &format!("{what}.{key}")))
}

fn text_attr(body: &Body, key: &str) -> Option<String> {
    attr(body, key).and_then(literal_string)
}

/// What a CloudWatch metric (namespace, name, dimensions) counts of the relay's answers.
fn cloudwatch_counts(body: &Body, what: &str) -> Counts {
    let namespace = text_attr(body, "namespace").unwrap_or_default();
    let metric = text_attr(body, "metric_name").unwrap_or_default();
    let mut dimensions = BTreeMap::new();
    if let Some(Expression::Object(object)) = attr(body, "dimensions") {
        for (k, v) in object.iter() {
            dimensions.insert(object_key(k), literal_string(v));
        }
    }
    let literal = |key: &str| dimensions.get(key).cloned().flatten();
    match (namespace.as_str(), metric.as_str()) {
        ("DssRelay", "Answers") => {
            assert!(
                dimensions.contains_key("Relay"),
                "{what}: Answers without the Relay dimension counts every relay in the account"
            );
            let status = literal("Status").map(|s| s.parse::<u16>().expect("a status"));
            match (status, literal("Code"), literal("Class")) {
                (Some(status), Some(code), None) => Counts::Code(status, code),
                (Some(status), None, None) => Counts::Status(status),
                (None, None, Some(class)) => {
                    Counts::Class(class[..1].parse().expect("a status class"))
                }
                other => {
                    panic!("{what}: Answers by {other:?} is not a dimension set the relay writes")
                }
            }
        }
        ("DssRelay", "VerifiedRefused") => {
            assert!(
                dimensions.contains_key("Relay"),
                "{what}: VerifiedRefused without the Relay dimension counts every relay"
            );
            Counts::VerifiedRefused
        }
        ("AWS/Lambda", "Url4xxCount") => Counts::Class(4),
        ("AWS/Lambda", "Url5xxCount") => Counts::Class(5),
        (ns, m) => Counts::Platform(format!("{ns}/{m}")),
    }
}

/// A CloudWatch alarm: on one metric, or on a metric-math sum (`FILL(a, 0) + FILL(b, 0) …`) of
/// metrics of one period.
fn cloudwatch_alarm(scope: &Scope<'_>, name: &str, block: &Block) -> Alarm {
    let body = block.body();
    let what = format!("aws_cloudwatch_metric_alarm.{name}");
    let queries: Vec<&Block> = nested(body, "metric_query").collect();
    let (counts, period) = if queries.is_empty() {
        let period = number_attr(scope, body, "period", &what).expect("period");
        (vec![cloudwatch_counts(body, &what)], period)
    } else {
        let mut metrics = BTreeMap::new();
        let mut expression = None;
        for query in &queries {
            let id = text_attr(query.body(), "id").expect("metric_query id");
            if let Some(e) = text_attr(query.body(), "expression") {
                expression = Some(e);
            } else {
                let metric = nested(query.body(), "metric").next().expect("metric");
                let period = number_attr(scope, metric.body(), "period", &what).expect("period");
                let stat = text_attr(metric.body(), "stat");
                assert_eq!(
                    stat.as_deref(),
                    Some("Sum"),
                    "{what}: {id} must sum answers"
                );
                metrics.insert(id, (cloudwatch_counts(metric.body(), &what), period));
            }
        }
        let expression = expression.unwrap_or_else(|| panic!("{what}: no expression"));
        let mut counts = Vec::new();
        let mut periods = Vec::new();
        for term in expression.split('+').map(str::trim) {
            let id = term
                .strip_prefix("FILL(")
                .and_then(|t| t.strip_suffix(", 0)"))
                .unwrap_or(term);
            let (c, p) = metrics
                .get(id)
                .unwrap_or_else(|| panic!("{what}: {term:?} is not a sum of its metrics"));
            counts.push(c.clone());
            periods.push(*p);
        }
        assert!(
            periods.windows(2).all(|w| w[0] == w[1]),
            "{what}: metrics of different periods"
        );
        (counts, periods[0])
    };
    let periods = number_attr(scope, body, "evaluation_periods", &what).expect("periods");
    let datapoints = number_attr(scope, body, "datapoints_to_alarm", &what).unwrap_or(periods);
    let threshold = number_attr(scope, body, "threshold", &what).expect("threshold");
    let comparison = text_attr(body, "comparison_operator").unwrap_or_default();
    let inclusive = match comparison.as_str() {
        "GreaterThanOrEqualToThreshold" => true,
        "GreaterThanThreshold" => false,
        other => panic!("{what}: comparison {other:?}"),
    };
    assert_eq!(
        text_attr(body, "treat_missing_data").as_deref(),
        Some("notBreaching"),
        "{what}: a quiet relay sends no data points, and silence is no failure"
    );
    Alarm {
        name: what,
        counts,
        rule: Rule::CloudWatch {
            period: period as u64,
            periods: periods as u64,
            datapoints: datapoints as u64,
            threshold,
            inclusive,
        },
    }
}

/// The text of an expression with the text of every local it reads (a filter built from
/// `local.answers_metric`), unescaped.
fn source_with_locals(config: &Config, expr: &Expression) -> String {
    let locals = config.locals();
    let mut text = expr.to_string();
    for local in model::references(expr, "local") {
        if let Some(e) = locals.get(local.as_str()) {
            text.push(' ');
            text.push_str(&e.to_string());
        }
    }
    text.replace("\\\"", "\"")
}

/// The quoted values after `key = ` in a monitoring filter: `"x"` or `one_of("x", "y")`.
fn filter_values(filter: &str, key: &str) -> Vec<String> {
    let Some(start) = filter.find(&format!("{key} = ")) else {
        return Vec::new();
    };
    let rest = &filter[start + key.len() + 3..];
    let rest = match rest.strip_prefix("one_of(") {
        Some(list) => &list[..list.find(')').expect("one_of(…)")],
        None => &rest[..rest[1..].find('"').map_or(rest.len(), |i| i + 2)],
    };
    rest.split(',')
        .map(|v| v.trim().trim_matches('"').to_owned())
        .filter(|v| !v.is_empty())
        .collect()
}

/// What a Cloud Monitoring filter counts of the relay's answers.
fn monitoring_counts(filter: &str, what: &str) -> Vec<Counts> {
    if filter.contains("run.googleapis.com/request_count") {
        if filter.contains("response_code_class != \"2xx\"") {
            return vec![Counts::Non2xx];
        }
        let codes = filter_values(filter, "metric.labels.response_code");
        assert!(!codes.is_empty(), "{what}: which request_count?");
        for code in &codes {
            assert!(
                ["429", "500", "504"].contains(&code.as_str()),
                "{what}: {code} is a status the relay answers too; count its answers by code"
            );
        }
        return codes.into_iter().map(Counts::Platform).collect();
    }
    if filter.contains("google_logging_metric.verified_refused.name") {
        return vec![Counts::VerifiedRefused];
    }
    if filter.contains("/answers") || filter.contains("google_logging_metric.answers.name") {
        let codes = filter_values(filter, "metric.labels.code");
        if codes.is_empty() {
            let statuses = filter_values(filter, "metric.labels.status");
            assert!(
                !statuses.is_empty(),
                "{what}: answers of which code or status?"
            );
            let status = |s: String| Counts::Status(s.parse().expect("a status"));
            return statuses.into_iter().map(status).collect();
        }
        return codes.into_iter().map(Counts::AnyStatus).collect();
    }
    vec![Counts::Platform(filter.to_owned())]
}

fn seconds(scope: &Scope<'_>, expr: &Expression, what: &str) -> u64 {
    let text = scope
        .samples(expr)
        .iter()
        .find_map(crate::eval::as_text)
        .unwrap_or_else(|| panic!("{what}: cannot evaluate {expr}"));
    text.strip_suffix('s')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{what}: {text:?} is not a duration in seconds"))
}

/// Every condition of every alert policy, as an alarm of its own.
fn monitoring_alarms(config: &Config) -> Vec<Alarm> {
    let scope = Scope::module(config, &[]);
    let mut alarms = Vec::new();
    for (name, block) in config.resources("google_monitoring_alert_policy") {
        for condition in nested(block.body(), "conditions") {
            let what = format!("google_monitoring_alert_policy.{name}");
            let threshold = nested(condition.body(), "condition_threshold")
                .next()
                .unwrap_or_else(|| panic!("{what}: a threshold condition"));
            let body = threshold.body();
            let filter = source_with_locals(config, attr(body, "filter").expect("filter"));
            let aggregation = nested(body, "aggregations").next().expect("aggregations");
            let window = seconds(
                &scope,
                attr(aggregation.body(), "alignment_period").expect("alignment_period"),
                &what,
            );
            let aligner = text_attr(aggregation.body(), "per_series_aligner").unwrap_or_default();
            let rate = match aligner.as_str() {
                "ALIGN_RATE" => true,
                "ALIGN_SUM" | "ALIGN_DELTA" | "ALIGN_MAX" => false,
                other => panic!("{what}: aligner {other:?}"),
            };
            let duration = seconds(&scope, attr(body, "duration").expect("duration"), &what);
            let comparison = text_attr(body, "comparison").unwrap_or_default();
            assert_eq!(comparison, "COMPARISON_GT", "{what}: comparison");
            let threshold = number_attr(&scope, body, "threshold_value", &what).expect("threshold");
            alarms.push(Alarm {
                name: what.clone(),
                counts: monitoring_counts(&filter, &what),
                rule: Rule::CloudMonitoring {
                    window,
                    rate,
                    threshold,
                    duration,
                },
            });
        }
    }
    alarms
}

fn cloudwatch_alarms(config: &Config) -> Vec<Alarm> {
    let scope = Scope::module(config, &[]);
    config
        .resources("aws_cloudwatch_metric_alarm")
        .into_iter()
        .map(|(name, block)| cloudwatch_alarm(&scope, name, block))
        .collect()
}

/// The alarms of a module, whichever platform.
fn alarms(config: &Config) -> Vec<Alarm> {
    let mut all = cloudwatch_alarms(config);
    all.extend(monitoring_alarms(config));
    assert!(!all.is_empty(), "{}: no alarms", config.name);
    all
}

/// A configuration of one file, from its text.
fn config_of(name: &str, files: &[(&str, &str)]) -> Config {
    Config {
        name: name.to_owned(),
        dir: PathBuf::from(name),
        files: files
            .iter()
            .map(|(file, text)| {
                let body = hcl::parse(text).unwrap_or_else(|e| panic!("{name}/{file}: {e}"));
                ((*file).to_owned(), body)
            })
            .collect(),
    }
}

////////////////////////////////////////////////////////////////////////////////////////////////
// The tests
////////////////////////////////////////////////////////////////////////////////////////////////

fn relay_alarms() -> Vec<(String, Vec<Alarm>)> {
    super::RELAY_MODULES
        .iter()
        .map(|m| ((*m).to_owned(), alarms(&model::module(m))))
        .collect()
}

/// The earliest any of `alarms` counting `status` `code` fires on `answers`.
fn fires(alarms: &[Alarm], status: u16, code: &str, answers: &[Answer]) -> Option<(u64, String)> {
    alarms
        .iter()
        .filter(|a| a.counts_answer(status, code))
        .filter_map(|a| a.first_fired(answers).map(|t| (t, a.name.clone())))
        .min()
}

/// A relay that fails every attempt of one notification an hour, with any answer an operator
/// must act on or with a 503, alarms within two hours, on both clouds, for both DSS schedules,
/// with and without the DSS's jitter.
#[test]
fn a_relay_failing_one_notification_an_hour_alarms_within_two_hours() {
    for (module, alarms) in relay_alarms() {
        for (status, code) in NEEDS_OPERATOR.iter().chain(&UNAVAILABLE) {
            assert!(
                alarms.iter().any(|a| a.counts_answer(*status, code)),
                "{module}: no alarm counts {status} {code}"
            );
            for schedule in [Schedule::V1, Schedule::V2] {
                for jitter in [0, JITTER_SECS] {
                    let answers = failing_hourly(schedule, jitter, *status, code);
                    let fired = fires(&alarms, *status, code, &answers);
                    assert!(
                        fired.as_ref().is_some_and(|(t, _)| *t <= WITHIN_SECS),
                        "{module}: {status} {code} on every attempt of one notification an hour \
                         ({schedule:?}, jitter {jitter} s) alarms at {fired:?}, not within {WITHIN_SECS} s"
                    );
                }
            }
        }
    }
}

/// Each alarm on the relay's answers covers two attempts of one notification under either
/// schedule, so that a single notification the relay keeps refusing alarms too, even where an
/// alarm needs two answers (bad signatures, 503s); and it covers no more than two hours, so that
/// it clears once the failures stop.
#[test]
fn every_alarm_window_holds_two_dss_attempts() {
    let required = two_attempts_secs();
    assert_eq!(required, 19 * 60, "v2's 15 minutes and twice the jitter");
    for (module, alarms) in relay_alarms() {
        for alarm in &alarms {
            if alarm
                .counts
                .iter()
                .all(|c| matches!(c, Counts::Platform(_)))
            {
                continue;
            }
            let window = alarm.window_secs();
            assert!(
                (required..=WITHIN_SECS).contains(&window),
                "{module}: {} looks at {window} s of answers; it must hold two DSS attempts \
                 ({required} s) and at most {WITHIN_SECS} s",
                alarm.name
            );
        }
        for (status, code) in NEEDS_OPERATOR.iter().chain(&UNAVAILABLE) {
            for schedule in [Schedule::V1, Schedule::V2] {
                for jitter in [0, JITTER_SECS] {
                    let answers = failing_once(schedule, jitter, *status, code);
                    let fired = fires(&alarms, *status, code, &answers);
                    assert!(
                        fired.as_ref().is_some_and(|(t, _)| *t <= WITHIN_SECS),
                        "{module}: a single notification answered {status} {code} on every \
                         attempt ({schedule:?}, jitter {jitter} s) alarms at {fired:?}"
                    );
                }
            }
        }
    }
}

/// Answers that need an operator and 503s alarm separately, and a lone bad signature (a
/// scanner) or a lone 503 whose retry got through alarms on nothing.
#[test]
fn sustained_503s_alarm_apart_and_lone_refusals_do_not_page() {
    for (module, alarms) in relay_alarms() {
        for alarm in &alarms {
            let operator = NEEDS_OPERATOR
                .iter()
                .any(|(s, c)| alarm.counts_answer(*s, c));
            let unavailable = UNAVAILABLE.iter().any(|(s, c)| alarm.counts_answer(*s, c));
            assert!(
                !(operator && unavailable),
                "{module}: {} mixes answers that need an operator with 503s",
                alarm.name
            );
        }
        let lone = [
            (401, "bad_signature"),
            (401, "unknown_key_id"),
            (401, "stale_date"),
            (503, "sink_unavailable"),
        ];
        for (status, code) in lone {
            let lone = [Answer {
                at: 600,
                status,
                code,
            }];
            let fired = fires(&alarms, status, code, &lone);
            assert!(
                fired.is_none(),
                "{module}: one {status} {code} fires {fired:?}"
            );
        }
    }
}

/// A v2 unversioned tombstone is retried only every 6 hours, so the window never holds two of
/// its attempts; it is not widened for it (the modules' READMEs, "Metrics and alarms", say why).
/// What holds instead: an answer an operator must act on alarms on the tombstone's first
/// attempt, and a bad signature or a 503, which need two answers, alarms once the same cause
/// fails a second notification within the window (another version the tombstone affected, 10
/// minutes later), never on the one tombstone alone.
#[test]
fn an_unversioned_tombstone_alarms_on_one_answer_or_with_a_second_notification() {
    let schedule = Schedule::V2UnversionedTombstone;
    for jitter in [0, JITTER_SECS] {
        let attempts = schedule.attempts(jitter);
        assert!(attempts.len() > 1, "{attempts:?}");
        assert!(
            attempts.windows(2).all(|w| w[1] - w[0] >= V2_RETRY_SECS),
            "a tombstone's attempts are 6 h apart: {attempts:?}"
        );
    }
    let single = [(502, "sink_failed"), (413, "message_too_large")];
    let two = [(401, "bad_signature"), (401, "unknown_key_id")];
    for (module, alarms) in relay_alarms() {
        for (status, code) in single.iter().chain(&VERIFIED_REFUSED) {
            let answers = failing_once(schedule, JITTER_SECS, *status, code);
            let fired = fires(&alarms, *status, code, &answers);
            assert!(
                fired.as_ref().is_some_and(|(t, _)| *t <= WITHIN_SECS),
                "{module}: one tombstone answered {status} {code} on every attempt alarms at \
                 {fired:?}"
            );
        }
        for (status, code) in two.iter().chain(&UNAVAILABLE) {
            let alone = failing_once(schedule, JITTER_SECS, *status, code);
            let fired = fires(&alarms, *status, code, &alone);
            assert!(
                fired.is_none(),
                "{module}: one tombstone answered {status} {code} alarms at {fired:?}: update \
                 the READMEs, which say it does not"
            );
            let mut both = alone.clone();
            both.extend(
                failing_once(schedule, JITTER_SECS, *status, code)
                    .into_iter()
                    .map(|a| Answer {
                        at: a.at + 600,
                        ..a
                    }),
            );
            both.sort_by_key(|a| a.at);
            let fired = fires(&alarms, *status, code, &both);
            assert!(
                fired.as_ref().is_some_and(|(t, _)| *t <= WITHIN_SECS),
                "{module}: two tombstones answered {status} {code}, 10 minutes apart, alarm at \
                 {fired:?}"
            );
        }
    }
}

/// The aws-relay module caps the function's concurrency by default (not null, not -1, above 0),
/// sets it on the function, and alarms on throttles of that function.
#[test]
fn the_lambda_has_a_reserved_concurrency_by_default_and_a_throttle_alarm() {
    let config = model::module("aws-relay");
    let default = attr(config.variable("reserved_concurrency").body(), "default")
        .expect("reserved_concurrency has a default");
    let scope = Scope::module(&config, &[]);
    let value = number(&scope, default, "reserved_concurrency");
    assert!(
        value >= 1.0 && value.fract() == 0.0,
        "aws-relay: reserved_concurrency defaults to {default}, no cap"
    );
    let function = config.resource("aws_lambda_function", "this");
    assert_eq!(
        attr(function.body(), "reserved_concurrent_executions").map(ToString::to_string),
        Some("var.reserved_concurrency".to_owned()),
        "aws-relay: the function must take reserved_concurrency"
    );
    let readme = config.read("README.md");
    assert!(
        readme.contains(&format!("`reserved_concurrency` = {value}")),
        "aws-relay: README does not give the arithmetic of the default {value}"
    );

    let throttles = cloudwatch_alarms(&config)
        .into_iter()
        .filter(|a| a.counts == [Counts::Platform("AWS/Lambda/Throttles".to_owned())])
        .count();
    assert_eq!(
        throttles, 1,
        "aws-relay: one alarm on the function's Throttles"
    );
    let alarm = config.resource("aws_cloudwatch_metric_alarm", "throttles");
    let source = hcl::to_string(alarm.body()).expect("printable");
    assert!(
        source.contains("aws_lambda_function.this.function_name"),
        "aws-relay: the throttle alarm watches the module's function"
    );
    assert_eq!(
        attr(alarm.body(), "alarm_actions").map(ToString::to_string),
        Some("var.alarm_actions".to_owned())
    );
}

/// The alarms before this design, as written then: CloudWatch's non-2xx alarm (10 periods of
/// 1 minute, every one breaching) and Cloud Monitoring's non-2xx policy (a rate above 0 in every
/// minute for 600 s). A relay that fails every attempt of one notification an hour never sets
/// them off, under either DSS schedule, in the three days the DSS retries v2 notifications.
#[test]
fn the_old_ten_minute_alarms_never_fire_at_the_dss_pace() {
    let aws = config_of("old/aws-relay", &[("alarms.tf", OLD_AWS_ALARM)]);
    let gcp = config_of("old/gcp-relay", &[("monitoring.tf", OLD_GCP_POLICY)]);
    let old: Vec<Alarm> = alarms(&aws).into_iter().chain(alarms(&gcp)).collect();
    assert_eq!(old.len(), 2);
    for alarm in &old {
        for (status, code) in NEEDS_OPERATOR.iter().chain(&UNAVAILABLE) {
            assert!(alarm.counts_answer(*status, code), "{}", alarm.name);
            for schedule in [Schedule::V1, Schedule::V2] {
                for jitter in [0, JITTER_SECS] {
                    let answers = failing_hourly(schedule, jitter, *status, code);
                    let fired = alarm.first_fired(&answers);
                    assert_eq!(
                        fired, None,
                        "{}: fires on {status} {code} ({schedule:?}, jitter {jitter} s)",
                        alarm.name
                    );
                }
            }
        }
        // What they were built for: a failure in every minute.
        let every_minute: Vec<Answer> = (0..30)
            .map(|m| Answer {
                at: m * 60 + 5,
                status: 502,
                code: "sink_failed",
            })
            .collect();
        assert!(alarm.first_fired(&every_minute).is_some(), "{}", alarm.name);
    }
}

/// `git show <before>:terraform/modules/aws-relay/alarms.tf`, the non-2xx alarm, with the
/// defaults of its two variables.
const OLD_AWS_ALARM: &str = r#"
variable "alarm_non_2xx_per_minute" {
  type    = number
  default = 1
}

variable "alarm_non_2xx_minutes" {
  type    = number
  default = 10
}

resource "aws_cloudwatch_metric_alarm" "non_2xx" {
  count = var.alarms_enabled ? 1 : 0

  alarm_name        = "${var.name}-non-2xx-answers"
  alarm_actions     = var.alarm_actions
  ok_actions        = var.alarm_actions

  comparison_operator = "GreaterThanOrEqualToThreshold"
  threshold           = var.alarm_non_2xx_per_minute
  evaluation_periods  = var.alarm_non_2xx_minutes
  datapoints_to_alarm = var.alarm_non_2xx_minutes
  treat_missing_data = "notBreaching"

  metric_query {
    id          = "non_2xx"
    expression  = "FILL(client_errors, 0) + FILL(server_errors, 0)"
    label       = "Non-2xx answers per minute"
    return_data = true
  }

  metric_query {
    id = "client_errors"
    metric {
      namespace   = "AWS/Lambda"
      metric_name = "Url4xxCount"
      dimensions  = { FunctionName = aws_lambda_function.this.function_name }
      period      = 60
      stat        = "Sum"
    }
  }

  metric_query {
    id = "server_errors"
    metric {
      namespace   = "AWS/Lambda"
      metric_name = "Url5xxCount"
      dimensions  = { FunctionName = aws_lambda_function.this.function_name }
      period      = 60
      stat        = "Sum"
    }
  }
}
"#;

/// The gcp-relay non-2xx policy before this design (documentation left out), with the defaults
/// of its two variables.
const OLD_GCP_POLICY: &str = r#"
variable "non_2xx_threshold" {
  type    = number
  default = 0
}

variable "non_2xx_duration_seconds" {
  type    = number
  default = 600
}

resource "google_monitoring_alert_policy" "non_2xx" {
  project               = var.project_id
  display_name          = "${var.name}: DSS notifications answered with non-2xx"
  combiner              = "OR"

  conditions {
    display_name = "non-2xx answers, sustained"

    condition_threshold {
      filter = join(" AND ", [
        "resource.type = \"cloud_run_revision\"",
        "resource.labels.service_name = \"${google_cloud_run_v2_service.this.name}\"",
        "metric.type = \"run.googleapis.com/request_count\"",
        "metric.labels.response_code_class != \"2xx\"",
      ])
      comparison      = "COMPARISON_GT"
      threshold_value = var.non_2xx_threshold
      duration        = "${var.non_2xx_duration_seconds}s"

      aggregations {
        alignment_period     = "60s"
        per_series_aligner   = "ALIGN_RATE"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }

      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"
    }
  }
}
"#;

/// The alarm each answer code of docs/http.md raises, by resource name (the same in both
/// modules), or why it raises none.
fn expected_alarm(status: u16, code: &str) -> Result<&'static str, &'static str> {
    if status == 401 {
        return Ok("bad_signature");
    }
    if VERIFIED_REFUSED.contains(&(status, code)) {
        return Ok("verified_refused");
    }
    match (status, code) {
        (502, "sink_failed" | "transform_failed") | (413, "message_too_large") => {
            Ok("needs_operator")
        }
        (503, "sink_unavailable" | "ledger_unavailable" | "overloaded" | "deadline_passed") => {
            Ok("unavailable")
        }
        (503, "in_progress") => Err(
            "another attempt of the same notification holds a destination: that attempt's answer is alarmed",
        ),
        (404, "not_found" | "unknown_path") | (405, "method_not_allowed") => {
            Err("no notification: crawlers and scanners")
        }
        (413, "body_too_large") => {
            Err("decided before the signature is checked: anyone can send one")
        }
        (400, "unreadable_body") | (408, "request_timeout") => {
            Err("the sender went away or sent too slowly: retried whole, by the sender")
        }
        _ => panic!("{status} {code}: classify it here (an alarm, or why none)"),
    }
}

/// Every (status, code) docs/http.md lists: its table's codes with their status, and the
/// signature codes of the paragraphs under it (all 401).
fn documented_codes() -> Vec<(u16, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/http.md");
    let text = std::fs::read_to_string(path).expect("docs/http.md");
    let ticked = |text: &str| -> Vec<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    };
    let mut codes = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = line.split(" | ").collect();
        let Some(status) = cells.get(1).and_then(|c| {
            c.split(|ch: char| !ch.is_ascii_digit())
                .find(|n| n.len() == 3)
                .and_then(|n| n.parse::<u16>().ok())
        }) else {
            continue;
        };
        let last = cells.last().unwrap_or(&"");
        for code in ticked(last) {
            codes.push((status, code));
        }
    }
    let snake =
        |t: &String| t.contains('_') && t.chars().all(|c| c.is_ascii_lowercase() || c == '_');
    for paragraph in text.split("\n\n") {
        if paragraph.starts_with("Signature codes (all 401)")
            || paragraph.starts_with("Other sources' signature codes (all 401")
        {
            codes.extend(
                ticked(paragraph)
                    .into_iter()
                    .filter(snake)
                    .map(|c| (401, c)),
            );
        }
    }
    codes.sort();
    codes.dedup();
    codes
}

/// Every answer code docs/http.md lists either raises its alarm in both modules, the one named
/// for it, when every attempt of a single notification gets it (under both DSS schedules), or
/// is named here with the reason it raises none.
#[test]
fn every_documented_code_has_its_alarm_or_a_reason_for_none() {
    let codes = documented_codes();
    assert!(codes.len() > 40, "docs/http.md's codes: {codes:?}");
    for must in [
        "missing_payload_field",
        "stale_date",
        "unknown_key_id",
        "sink_failed",
    ] {
        assert!(codes.iter().any(|(_, c)| c == must), "{must} in {codes:?}");
    }
    for (module, alarms) in relay_alarms() {
        for (status, code) in &codes {
            let Ok(expected) = expected_alarm(*status, code) else {
                continue;
            };
            let code: &'static str = Box::leak(code.clone().into_boxed_str());
            for schedule in [Schedule::V1, Schedule::V2] {
                let answers = failing_once(schedule, JITTER_SECS, *status, code);
                let fired = fires(&alarms, *status, code, &answers);
                let name = fired.as_ref().map(|(_, name)| name.as_str()).unwrap_or("");
                assert!(
                    name.ends_with(&format!(".{expected}")),
                    "{module}: {status} {code} on every attempt of one notification \
                     ({schedule:?}) fires {fired:?}, expected {expected}"
                );
            }
        }
    }
}
