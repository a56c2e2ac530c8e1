//! The IAM policy documents of the AWS modules as written (`data "aws_iam_policy_document"`):
//! each statement with its block and, for a dynamic one, its `for_each`; and the helpers that
//! read an attribute as the tests compare it.

use std::collections::BTreeSet;

use hcl::{Block, Body, Expression};

use crate::eval::Scope;
use crate::model::{Config, attr, label, literal_string, literal_strings, nested};

/// One statement of an `aws_iam_policy_document`, with its block.
pub(crate) struct Stmt<'a> {
    pub(crate) sid: String,
    pub(crate) effect: String,
    pub(crate) actions: Vec<String>,
    pub(crate) body: &'a Body,
    /// The `for_each` of a dynamic statement (source text).
    pub(crate) gate: Option<String>,
}

impl Stmt<'_> {
    /// Whether its resources or its `for_each` mention `word` (`archive`, `routes`).
    pub(crate) fn mentions(&self, word: &str) -> bool {
        self.resources().contains(word) || self.gate.as_deref().is_some_and(|g| g.contains(word))
    }

    pub(crate) fn resources(&self) -> String {
        attr(self.body, "resources")
            .map(compact)
            .unwrap_or_default()
    }

    /// `(type, identifiers as written)` of each `principals` block.
    pub(crate) fn principals(&self) -> Vec<(String, String)> {
        nested(self.body, "principals")
            .map(|p| {
                (
                    text(p.body(), "type").unwrap_or_default(),
                    source(p.body(), "identifiers").unwrap_or_default(),
                )
            })
            .collect()
    }

    /// The identifiers of its principals, as literals.
    pub(crate) fn principal_identifiers(&self) -> Vec<String> {
        nested(self.body, "principals")
            .flat_map(|p| {
                attr(p.body(), "identifiers")
                    .and_then(literal_strings)
                    .unwrap_or_default()
            })
            .collect()
    }

    /// `(test, variable, values as written)` of each condition.
    pub(crate) fn conditions_as_written(&self) -> Vec<(String, String, String)> {
        nested(self.body, "condition")
            .map(|c| {
                (
                    text(c.body(), "test").unwrap_or_default(),
                    text(c.body(), "variable").unwrap_or_default(),
                    source(c.body(), "values").unwrap_or_default(),
                )
            })
            .collect()
    }

    /// `(test, variable, values)` of each `condition` block; values as written when they are
    /// not literals.
    pub(crate) fn conditions(&self) -> Vec<(String, String, Vec<String>)> {
        nested(self.body, "condition")
            .map(|c| {
                let values = attr(c.body(), "values")
                    .map(|v| match v {
                        Expression::Array(items) => items
                            .iter()
                            .map(|i| literal_string(i).unwrap_or_else(|| template_text(i)))
                            .collect(),
                        other => vec![other.to_string()],
                    })
                    .unwrap_or_default();
                (
                    text(c.body(), "test").unwrap_or_default(),
                    text(c.body(), "variable").unwrap_or_default(),
                    values,
                )
            })
            .collect()
    }
}

/// The statements of `data "aws_iam_policy_document" "<name>"`, plain ones first.
pub(crate) fn document<'a>(config: &'a Config, name: &str) -> Vec<Stmt<'a>> {
    let body = config.data("aws_iam_policy_document", name).body();
    let plain = nested(body, "statement").map(|s| (s.body(), None));
    let dynamic = nested(body, "dynamic")
        .filter(|d| label(d, 0) == "statement")
        .map(|d| {
            let content = nested(d.body(), "content").next().expect("content");
            (content.body(), source(d.body(), "for_each"))
        });
    plain
        .chain(dynamic)
        .map(|(body, gate)| Stmt {
            sid: text(body, "sid").unwrap_or_default(),
            effect: text(body, "effect").unwrap_or_else(|| "Allow".to_owned()),
            actions: attr(body, "actions")
                .and_then(literal_strings)
                .expect("literal actions"),
            body,
            gate,
        })
        .collect()
}

pub(crate) fn find<'s, 'a>(statements: &'s [Stmt<'a>], sid: &str) -> &'s Stmt<'a> {
    statements
        .iter()
        .find(|s| s.sid == sid)
        .unwrap_or_else(|| panic!("no statement {sid}"))
}

/// The literal string of an attribute.
pub(crate) fn text(body: &Body, key: &str) -> Option<String> {
    attr(body, key).and_then(literal_string)
}

/// An attribute as written, on one line (`[a, b]`, `{ k = v }`).
pub(crate) fn source(body: &Body, key: &str) -> Option<String> {
    attr(body, key).map(compact)
}

/// The source of output `name`'s value, as [`source`] gives it.
pub(crate) fn output_source(config: &Config, name: &str) -> String {
    compact(config.output_value(name))
}

/// Asserts the source of each attribute in `expected` (key, source as `source` gives it).
#[track_caller]
pub(crate) fn assert_sources(body: &Body, expected: &[(&str, &str)]) {
    assert_sources_of(body, expected, "attribute");
}

/// Asserts that `condition` (an IAM condition's expression) evaluates in `scope` only to
/// conditions `condition_of` writes for one of `names`: the grant (`what`) is on those
/// resources and no other.
#[track_caller]
pub(crate) fn assert_condition_on(
    scope: &Scope<'_>,
    condition: &Expression,
    names: &BTreeSet<String>,
    condition_of: impl Fn(&str) -> String,
    what: &str,
) {
    let expressions = scope.evaluated(condition, &format!("{what}'s condition"));
    let allowed: BTreeSet<String> = names.iter().map(|name| condition_of(name)).collect();
    for expression in &expressions {
        assert!(
            allowed.contains(expression),
            "{what}'s condition {expression:?} is none of {allowed:?}"
        );
    }
}

/// Asserts the literal string of each attribute in `expected` (key, text as `text` gives it).
#[track_caller]
pub(crate) fn assert_texts(body: &Body, expected: &[(&str, &str)]) {
    for (key, want) in expected {
        assert_eq!(text(body, key).as_deref(), Some(*want), "attribute {key}");
    }
}

/// [`assert_sources`], each failure naming `what` (a resource) before the attribute.
#[track_caller]
fn assert_sources_of(body: &Body, expected: &[(&str, &str)], what: &str) {
    for (key, want) in expected {
        assert_eq!(source(body, key).as_deref(), Some(*want), "{what} {key}");
    }
}

/// The one `resource "<ty>" "<name>"` block's body, asserting the source of each attribute in
/// `expected` as [`assert_sources`] does.
#[track_caller]
pub(crate) fn resource_with<'a>(
    config: &'a Config,
    ty: &str,
    name: &str,
    expected: &[(&str, &str)],
) -> &'a Body {
    let body = config.resource(ty, name).body();
    assert_sources_of(body, expected, &format!("{}: {ty}.{name}", config.name));
    body
}

/// aws-relay's alarm `name` on its own metric `metric`, asserting what such alarms share: made
/// with the alarms, the metric's sum in the relay's namespace and dimension, one datapoint of 1
/// or more within the alarms' window, notifying `alarm_actions`.
#[track_caller]
pub(crate) fn relay_metric_alarm<'a>(aws: &'a Config, name: &str, metric: &str) -> &'a Body {
    let metric_name = format!("\"{metric}\"");
    let expected = [
        ("count", "var.alarms_enabled ? 1 : 0"),
        ("namespace", "\"DssRelay\""),
        ("metric_name", metric_name.as_str()),
        ("dimensions", "{ Relay = local.alarm_relay }"),
        ("statistic", "\"Sum\""),
        ("evaluation_periods", "local.alarm_window_minutes"),
        ("datapoints_to_alarm", "1"),
        ("threshold", "1"),
        ("comparison_operator", "\"GreaterThanOrEqualToThreshold\""),
        ("alarm_actions", "var.alarm_actions"),
    ];
    resource_with(aws, "aws_cloudwatch_metric_alarm", name, &expected)
}

/// An expression's source text on one line.
pub(crate) fn compact(expr: &Expression) -> String {
    let text = expr
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    text.replace("[ ", "[")
        .replace(" ]", "]")
        .replace(",]", "]")
}

/// The body of the one nested block `ident`.
pub(crate) fn only_block<'a>(body: &'a Body, ident: &'a str, what: &str) -> &'a Body {
    let blocks: Vec<&Block> = nested(body, ident).collect();
    assert_eq!(blocks.len(), 1, "{what}: one {ident} block");
    blocks[0].body()
}

/// A template as written, without its quotes.
pub(crate) fn template_text(expr: &Expression) -> String {
    expr.to_string().trim_matches('"').to_owned()
}
