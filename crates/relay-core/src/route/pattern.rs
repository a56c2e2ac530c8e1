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
use regex::Regex;
use serde_json::Value;

use super::exact::ExactSet;
pub(super) use super::jmes::Jmes;

/// The deepest nesting of groups and repetitions a `regex` condition may have.
const REGEX_NEST_LIMIT: u32 = 32;

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

#[derive(Debug, Clone)]
pub(super) enum Matcher {
    Exact(Value),
    Prefix(String, bool),
    Suffix(String, bool),
    EqualsIgnoreCase(String),
    AnythingBut(Vec<Value>, ExactSet),
    AnythingButPrefix(String),
    AnythingButSuffix(String),
    Numeric(Vec<(Cmp, f64)>),
    Exists(bool),
    Wildcard(Regex),
    Regex(Regex),
    Jmes(Jmes),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Cmp {
    Lt,
    Le,
    Eq,
    Ge,
    Gt,
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

fn error(path: &[String], message: impl Into<String>) -> PatternError {
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
pub const REQUEST: &str = "$request";

/// The field under which patterns see the source's name.
pub const SOURCE: &str = "$source";

/// What a pattern is matched against: the notification, under `$request` the request, under
/// `$source` the source's name.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// The parsed notification.
    pub document: &'a Value,
    /// The request metadata from [`request_document`] (`Value::Null` when no route reads it).
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

fn string(value: &Value, path: &[String], what: &str) -> Result<String, PatternError> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| error(path, format!("{what} takes a string")))
}

fn compile_matcher(value: &Value, path: &[String]) -> Result<Matcher, PatternError> {
    let Value::Object(map) = value else {
        return match value {
            Value::Array(_) => Err(error(path, "a matcher cannot be a list")),
            exact => Ok(Matcher::Exact(exact.clone())),
        };
    };
    let mut entries = map.iter();
    let (Some((op, arg)), None) = (entries.next(), entries.next()) else {
        return Err(error(path, "an operator object has exactly one key"));
    };
    Ok(match op.as_str() {
        "prefix" | "suffix" => {
            let (text, ignore_case) = match arg {
                Value::Object(inner) => match inner.get("equals-ignore-case") {
                    // Lower-cased once here, not per notification.
                    Some(v) if inner.len() == 1 => (string(v, path, op)?.to_lowercase(), true),
                    _ => {
                        return Err(error(
                            path,
                            format!("{op} takes a string or {{ equals-ignore-case = \"…\" }}"),
                        ));
                    }
                },
                other => (string(other, path, op)?, false),
            };
            if op == "prefix" {
                Matcher::Prefix(text, ignore_case)
            } else {
                Matcher::Suffix(text, ignore_case)
            }
        }
        "equals-ignore-case" => Matcher::EqualsIgnoreCase(string(arg, path, op)?.to_lowercase()),
        "anything-but" => match arg {
            Value::Object(inner) if inner.len() == 1 => match inner.iter().next() {
                Some((k, v)) if k == "prefix" => {
                    Matcher::AnythingButPrefix(string(v, path, "anything-but prefix")?)
                }
                Some((k, v)) if k == "suffix" => {
                    Matcher::AnythingButSuffix(string(v, path, "anything-but suffix")?)
                }
                _ => {
                    return Err(error(
                        path,
                        "anything-but takes values, a list, { prefix } or { suffix }",
                    ));
                }
            },
            Value::Object(_) => {
                return Err(error(
                    path,
                    "anything-but takes values, a list, { prefix } or { suffix }",
                ));
            }
            Value::Array(values) if values.iter().all(|v| !v.is_object() && !v.is_array()) => {
                Matcher::AnythingBut(values.clone(), ExactSet::new(values))
            }
            Value::Array(_) => return Err(error(path, "anything-but lists only plain values")),
            single => Matcher::AnythingBut(vec![single.clone()], ExactSet::new([single])),
        },
        "numeric" => Matcher::Numeric(compile_numeric(arg, path)?),
        "exists" => match arg {
            Value::Bool(b) => Matcher::Exists(*b),
            _ => return Err(error(path, "exists takes true or false")),
        },
        "wildcard" => {
            let text = string(arg, path, op)?;
            let mut re = String::from("^");
            let mut chars = text.chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '\\' if chars.peek() == Some(&'*') => {
                        chars.next();
                        re.push_str(r"\*");
                    }
                    '*' => re.push_str("(?s:.*)"),
                    other => re.push_str(&regex::escape(&other.to_string())),
                }
            }
            re.push('$');
            Matcher::Wildcard(
                Regex::new(&re).map_err(|e| error(path, format!("invalid wildcard: {e}")))?,
            )
        }
        "regex" => {
            let text = string(arg, path, op)?;
            // A shallow nesting limit: deeply nested repetitions and groups (`a****…`) would
            // otherwise recurse deep enough to overflow a thread's stack while compiling.
            let compiled = regex::RegexBuilder::new(&text)
                .nest_limit(REGEX_NEST_LIMIT)
                .build();
            Matcher::Regex(
                compiled.map_err(|e| error(path, format!("invalid regex {text:?}: {e}")))?,
            )
        }
        "jmespath" => {
            Matcher::Jmes(Jmes::compile(&string(arg, path, op)?).map_err(|m| error(path, m))?)
        }
        other => {
            return Err(error(
                path,
                format!(
                    "unknown operator {other:?}; use prefix, suffix, equals-ignore-case, anything-but, numeric, exists, wildcard, regex or jmespath"
                ),
            ));
        }
    })
}

fn compile_numeric(arg: &Value, path: &[String]) -> Result<Vec<(Cmp, f64)>, PatternError> {
    let bad = || {
        error(
            path,
            "numeric takes [\"<op>\", number, …] with ops <, <=, =, >=, >",
        )
    };
    let Value::Array(items) = arg else {
        return Err(bad());
    };
    if items.is_empty() || items.len() % 2 != 0 || items.len() > 4 {
        return Err(bad());
    }
    items
        .chunks(2)
        .map(|pair| {
            let cmp = match pair[0].as_str() {
                Some("<") => Cmp::Lt,
                Some("<=") => Cmp::Le,
                Some("=") => Cmp::Eq,
                Some(">=") => Cmp::Ge,
                Some(">") => Cmp::Gt,
                _ => return Err(bad()),
            };
            Ok((cmp, pair[1].as_f64().ok_or_else(bad)?))
        })
        .collect()
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

fn same_number(a: &Value, b: &Value) -> bool {
    matches!((a.as_f64(), b.as_f64()), (Some(x), Some(y)) if x == y)
}

impl Matcher {
    fn matches(&self, value: &Value) -> bool {
        let text = value.as_str();
        match self {
            Matcher::Exact(expected) => {
                expected == value
                    || (expected.is_number() && value.is_number() && same_number(expected, value))
            }
            Matcher::Prefix(p, false) => text.is_some_and(|t| t.starts_with(p.as_str())),
            Matcher::Prefix(p, true) => {
                text.is_some_and(|t| t.to_lowercase().starts_with(p.as_str()))
            }
            Matcher::Suffix(s, false) => text.is_some_and(|t| t.ends_with(s.as_str())),
            Matcher::Suffix(s, true) => {
                text.is_some_and(|t| t.to_lowercase().ends_with(s.as_str()))
            }
            Matcher::EqualsIgnoreCase(s) => text.is_some_and(|t| t.to_lowercase() == *s),
            Matcher::AnythingBut(_, values) => !values.contains(value),
            Matcher::AnythingButPrefix(p) => text.is_some_and(|t| !t.starts_with(p.as_str())),
            Matcher::AnythingButSuffix(s) => text.is_some_and(|t| !t.ends_with(s.as_str())),
            Matcher::Numeric(ranges) => {
                value
                    .as_f64()
                    .filter(|_| value.is_number())
                    .is_some_and(|n| {
                        ranges.iter().all(|(cmp, bound)| match cmp {
                            Cmp::Lt => n < *bound,
                            Cmp::Le => n <= *bound,
                            Cmp::Eq => n == *bound,
                            Cmp::Ge => n >= *bound,
                            Cmp::Gt => n > *bound,
                        })
                    })
            }
            Matcher::Exists(_) => true,
            Matcher::Wildcard(re) | Matcher::Regex(re) => text.is_some_and(|t| re.is_match(t)),
            Matcher::Jmes(expr) => expr.truthy(value),
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
