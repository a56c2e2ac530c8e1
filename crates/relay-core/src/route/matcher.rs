//! One matcher of a pattern's field (`prefix`, `numeric`, `anything-but`, …): compiled once
//! from its JSON, then matched against each value at the field's path.

use regex::Regex;
use serde_json::Value;

use super::exact::ExactSet;
use super::pattern::{Jmes, PatternError, REGEX_NEST_LIMIT, error, string};

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

pub(super) fn compile_matcher(value: &Value, path: &[String]) -> Result<Matcher, PatternError> {
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
        "prefix" | "suffix" => compile_affix(op, arg, path)?,
        "equals-ignore-case" => Matcher::EqualsIgnoreCase(string(arg, path, op)?.to_lowercase()),
        "anything-but" => compile_anything_but(arg, path)?,
        "numeric" => Matcher::Numeric(compile_numeric(arg, path)?),
        "exists" => match arg {
            Value::Bool(b) => Matcher::Exists(*b),
            _ => return Err(error(path, "exists takes true or false")),
        },
        "wildcard" => Matcher::Wildcard(compile_wildcard(&string(arg, path, op)?, path)?),
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

/// `prefix` or `suffix` (`op`): a string, or `{ equals-ignore-case = "…" }`.
fn compile_affix(op: &str, arg: &Value, path: &[String]) -> Result<Matcher, PatternError> {
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
    Ok(match op {
        "prefix" => Matcher::Prefix(text, ignore_case),
        _ => Matcher::Suffix(text, ignore_case),
    })
}

/// `anything-but`: plain values, a list of them, `{ prefix }` or `{ suffix }`.
fn compile_anything_but(arg: &Value, path: &[String]) -> Result<Matcher, PatternError> {
    Ok(match arg {
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
    })
}

/// A wildcard: `*` any run of characters, `\*` a star, everything else itself; anchored.
fn compile_wildcard(text: &str, path: &[String]) -> Result<Regex, PatternError> {
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
    Regex::new(&re).map_err(|e| error(path, format!("invalid wildcard: {e}")))
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

fn same_number(a: &Value, b: &Value) -> bool {
    matches!((a.as_f64(), b.as_f64()), (Some(x), Some(y)) if x == y)
}

impl Matcher {
    pub(super) fn matches(&self, value: &Value) -> bool {
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
