//! EventBridge-style event patterns over a notification, compiled once at start.
//!
//! A pattern is a JSON object with the notification's shape. Nested objects narrow to a field;
//! a leaf is a list of matchers, and the field matches when any matcher matches any of its
//! values (an array field offers each element). All fields of an object must match. Beyond
//! EventBridge: `regex`, `jmespath` (an expression that must be truthy) and `$jmespath` (the
//! same, over the object it sits in). The request itself is the `$request` field: `path`,
//! `query.<name>`, `headers.<name>`; the source it came through is the `$source` field.

use std::cell::OnceCell;

use jmespath::{Rcvar, Variable};
use serde_json::Value;

use super::exact::ExactSet;
pub(super) use super::jmes::Jmes;
pub(super) use super::matcher::{Cmp, Matcher, compile_matcher};

/// The deepest nesting of groups and repetitions a `regex` condition may have.
pub(super) const REGEX_NEST_LIMIT: u32 = 32;

/// A compiled pattern: every condition must hold.
#[derive(Debug, Clone)]
pub struct Pattern {
    pub(super) conditions: Vec<Condition>,
    source: Value,
}

#[derive(Debug, Clone)]
pub(super) enum Condition {
    /// The values at `path` must match one of the matchers (as written, in order); `exact`
    /// holds the exact values among them, looked up rather than compared one by one, and
    /// `others` the indexes of the rest.
    Field {
        path: Vec<String>,
        matchers: Vec<Matcher>,
        exact: ExactSet,
        others: Vec<usize>,
    },
    /// One of the alternatives must match (`$or`).
    Or(Vec<Pattern>),
    /// The expression, over the object at `path`, must be truthy (`$jmespath`).
    Jmes { path: Vec<String>, expr: Jmes },
}

/// Why a pattern could not be compiled; `at` is the dotted path of the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {message}")]
pub struct PatternError {
    /// Where in the pattern.
    pub at: String,
    /// What is wrong.
    pub message: String,
}

pub(super) fn error(path: &[String], message: impl Into<String>) -> PatternError {
    let at = if path.is_empty() {
        "match".to_owned()
    } else {
        format!("match.{}", path.join("."))
    };
    PatternError {
        at,
        message: message.into(),
    }
}

impl Pattern {
    /// Compiles a pattern object.
    pub fn compile(pattern: &Value) -> Result<Self, PatternError> {
        let mut conditions = Vec::new();
        compile_object(pattern, &mut Vec::new(), &mut conditions)?;
        Ok(Self {
            conditions,
            source: pattern.clone(),
        })
    }

    /// The pattern as written.
    pub fn source(&self) -> &Value {
        &self.source
    }

    /// True when the pattern has no condition (matches everything).
    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// Whether the input matches. Missing fields match only `exists: false`.
    pub fn matches(&self, input: &Input<'_>) -> bool {
        self.conditions.iter().all(|c| c.holds(input))
    }

    /// The first condition that does not hold, described for `relay explain`.
    pub fn first_failure(&self, input: &Input<'_>) -> Option<String> {
        self.conditions
            .iter()
            .find(|c| !c.holds(input))
            .map(ToString::to_string)
    }
}

/// The field under which patterns see the request.
pub(crate) const REQUEST: &str = "$request";

/// The field under which patterns see the source's name.
pub(crate) const SOURCE: &str = "$source";

/// What a pattern is matched against: the notification, under `$request` the request, under
/// `$source` the source's name.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// The parsed notification.
    pub document: &'a Value,
    /// The request metadata from [`request_document`](super::request_document) (`Value::Null` when no route reads it).
    pub request: &'a Value,
    /// The source's name (`dss` without `[sources]`).
    source: Value,
    /// The notification as JMESPath reads it: converted once, on first use, for all the
    /// `$jmespath` conditions of every route.
    jmes_document: OnceCell<Option<Rcvar>>,
}

impl<'a> Input<'a> {
    /// The input for one notification and its request.
    pub fn new(document: &'a Value, request: &'a Value) -> Self {
        Self {
            document,
            request,
            source: Value::String(crate::notification::DEFAULT_SOURCE.to_owned()),
            jmes_document: OnceCell::new(),
        }
    }

    /// The same input, from the source named `source`.
    pub fn from(mut self, source: &str) -> Self {
        if source != crate::notification::DEFAULT_SOURCE {
            self.source = Value::String(source.to_owned());
        }
        self
    }

    fn jmes_document(&self) -> Option<&Rcvar> {
        self.jmes_document
            .get_or_init(|| Variable::try_from(self.document).ok().map(Rcvar::new))
            .as_ref()
    }

    fn values_at(&self, path: &[String]) -> Vec<&Value> {
        match path.split_first() {
            Some((first, rest)) if first == REQUEST => values_at(self.request, rest),
            Some((first, rest)) if first == SOURCE => values_at(&self.source, rest),
            _ => values_at(self.document, path),
        }
    }
}

fn compile_object(
    value: &Value,
    path: &mut Vec<String>,
    out: &mut Vec<Condition>,
) -> Result<(), PatternError> {
    let Value::Object(map) = value else {
        return Err(error(path, "expected an object of fields"));
    };
    for (key, value) in map {
        match key.as_str() {
            "$or" => {
                let Value::Array(alternatives) = value else {
                    return Err(error(path, "$or takes a list of patterns"));
                };
                if alternatives.len() < 2 {
                    return Err(error(path, "$or needs at least two patterns"));
                }
                let mut compiled = Vec::new();
                for alternative in alternatives {
                    let mut conditions = Vec::new();
                    compile_object(alternative, path, &mut conditions)?;
                    compiled.push(Pattern {
                        conditions,
                        source: alternative.clone(),
                    });
                }
                out.push(Condition::Or(compiled));
            }
            "$jmespath" => {
                let Value::String(expression) = value else {
                    return Err(error(path, "$jmespath takes an expression string"));
                };
                let expr = Jmes::compile(expression).map_err(|m| error(path, m))?;
                out.push(Condition::Jmes {
                    path: path.clone(),
                    expr,
                });
            }
            _ => {
                path.push(key.clone());
                match value {
                    Value::Object(_) => compile_object(value, path, out)?,
                    Value::Array(list) if !list.is_empty() => {
                        let matchers = list
                            .iter()
                            .map(|m| compile_matcher(m, path))
                            .collect::<Result<Vec<_>, _>>()?;
                        let exact = ExactSet::new(matchers.iter().filter_map(|m| match m {
                            Matcher::Exact(value) => Some(value),
                            _ => None,
                        }));
                        let others = (0..matchers.len())
                            .filter(|&i| !matches!(matchers[i], Matcher::Exact(_)))
                            .collect();
                        out.push(Condition::Field {
                            path: path.clone(),
                            matchers,
                            exact,
                            others,
                        });
                    }
                    _ => {
                        return Err(error(
                            path,
                            "expected a list of values or operators, e.g. [\"CREATE\"] or [{ prefix = \"x\" }]",
                        ));
                    }
                }
                path.pop();
            }
        }
    }
    Ok(())
}

pub(super) fn string(value: &Value, path: &[String], what: &str) -> Result<String, PatternError> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| error(path, format!("{what} takes a string")))
}

/// The values at `path`: arrays anywhere along it offer each element.
fn values_at<'v>(document: &'v Value, path: &[String]) -> Vec<&'v Value> {
    let mut current = vec![document];
    for key in path {
        let mut next = Vec::new();
        for value in current {
            match value {
                Value::Object(map) => next.extend(map.get(key)),
                Value::Array(items) => {
                    next.extend(
                        items
                            .iter()
                            .filter_map(|i| i.as_object())
                            .filter_map(|m| m.get(key)),
                    );
                }
                _ => {}
            }
        }
        current = next;
    }
    current
        .into_iter()
        .flat_map(|v| match v {
            Value::Array(items) => items.iter().collect::<Vec<_>>(),
            other => vec![other],
        })
        .collect()
}

impl Condition {
    fn holds(&self, input: &Input<'_>) -> bool {
        match self {
            Condition::Field {
                path,
                matchers,
                exact,
                others,
            } => {
                let values = input.values_at(path);
                values.iter().any(|v| exact.contains(v))
                    || others.iter().any(|&i| match &matchers[i] {
                        Matcher::Exists(wanted) => values.is_empty() != *wanted,
                        m => values.iter().any(|v| m.matches(v)),
                    })
            }
            Condition::Or(alternatives) => alternatives.iter().any(|p| p.matches(input)),
            Condition::Jmes { path, expr } => {
                if path.is_empty() {
                    input.jmes_document().is_some_and(|d| expr.truthy_over(d))
                } else {
                    input.values_at(path).into_iter().any(|v| expr.truthy(v))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(pattern: Value, document: Value) -> bool {
        let input = Input::new(&document, &Value::Null);
        Pattern::compile(&pattern).unwrap().matches(&input)
    }

    #[test]
    fn rejects_malformed_patterns_with_their_path() {
        for (pattern, at) in [
            (json!({"event_type": "CREATE"}), "match.event_type"),
            (
                json!({"match": {"bundle_uuid": [{"starts": "x"}]}}),
                "match.match.bundle_uuid",
            ),
            (json!({"x": [{"regex": "("}]}), "match.x"),
            (json!({"x": [{"jmespath": "a["}]}), "match.x"),
            (json!({"x": [{"numeric": [">", "a"]}]}), "match.x"),
            (json!({"x": [{"prefix": "a", "suffix": "b"}]}), "match.x"),
            (json!({"$or": [{"x": ["a"]}]}), "match"),
            (json!({"x": []}), "match.x"),
        ] {
            let err = Pattern::compile(&pattern).unwrap_err();
            assert_eq!(err.at, at, "{pattern}: {err}");
        }
    }

    #[test]
    fn request_document_collects_repeated_query_values() {
        let mut headers = http::HeaderMap::new();
        headers.insert("x-dss-notify-attempt", http::HeaderValue::from_static("2"));
        let doc =
            super::super::request_document("/dss", Some("replica=aws&replica=gcp&flag"), &headers);
        assert_eq!(doc["query"]["replica"], json!(["aws", "gcp"]));
        assert_eq!(doc["query"]["flag"], json!([""]));
        // Header values are strings: numeric does not match them, as in EventBridge.
        assert!(!check(
            json!({"headers": {"x-dss-notify-attempt": [{"numeric": [">", 1]}]}}),
            doc.clone()
        ));
        assert!(check(
            json!({"headers": {"x-dss-notify-attempt": ["2"]}}),
            doc
        ));
    }
}
