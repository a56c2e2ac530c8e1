//! Conditions and matchers as `relay explain` and `relay export` say them.

use std::fmt;

use super::pattern::{Cmp, Condition, Matcher};

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Matcher::Exact(v) => write!(f, "{v}"),
            Matcher::Prefix(p, false) => write!(f, "prefix {p:?}"),
            Matcher::Prefix(p, true) => write!(f, "prefix {p:?} (ignoring case)"),
            Matcher::Suffix(s, false) => write!(f, "suffix {s:?}"),
            Matcher::Suffix(s, true) => write!(f, "suffix {s:?} (ignoring case)"),
            Matcher::EqualsIgnoreCase(s) => write!(f, "equals-ignore-case {s:?}"),
            Matcher::AnythingBut(values, _) => {
                let list: Vec<String> = values.iter().map(ToString::to_string).collect();
                write!(f, "anything-but [{}]", list.join(", "))
            }
            Matcher::AnythingButPrefix(p) => write!(f, "anything-but prefix {p:?}"),
            Matcher::AnythingButSuffix(s) => write!(f, "anything-but suffix {s:?}"),
            Matcher::Numeric(ranges) => {
                let parts: Vec<String> = ranges
                    .iter()
                    .map(|(cmp, n)| {
                        let op = match cmp {
                            Cmp::Lt => "<",
                            Cmp::Le => "<=",
                            Cmp::Eq => "=",
                            Cmp::Ge => ">=",
                            Cmp::Gt => ">",
                        };
                        format!("{op} {n}")
                    })
                    .collect();
                write!(f, "numeric {}", parts.join(" and "))
            }
            Matcher::Exists(b) => write!(f, "exists {b}"),
            Matcher::Wildcard(re) => write!(f, "wildcard /{}/", re.as_str()),
            Matcher::Regex(re) => write!(f, "regex /{}/", re.as_str()),
            Matcher::Jmes(expr) => write!(f, "jmespath {:?}", expr.0.as_str()),
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::Field { path, matchers, .. } => {
                let list: Vec<String> = matchers.iter().map(ToString::to_string).collect();
                write!(f, "{} is one of [{}]", path.join("."), list.join(", "))
            }
            Condition::Or(alternatives) => write!(f, "$or of {} patterns", alternatives.len()),
            Condition::Jmes { path, expr } if path.is_empty() => {
                write!(f, "$jmespath {:?}", expr.0.as_str())
            }
            Condition::Jmes { path, expr } => {
                write!(f, "{}.$jmespath {:?}", path.join("."), expr.0.as_str())
            }
        }
    }
}
