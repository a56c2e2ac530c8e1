//! A route's pattern as a cloud-side filter over the relay's message attributes: an SNS
//! subscription filter policy or a Pub/Sub subscription filter, where one can say the same.
//!
//! Only payload fields the relay copies into attributes can be filtered there. A condition
//! that cannot be expressed is left out and reported, so the exported filter never drops a
//! message the route would take: it is the route's filter or a broader one.

use serde_json::{Map, Value, json};

use super::Pattern;
use super::pattern::{Condition, Matcher};

/// Which filter language to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterLanguage {
    /// An SNS subscription filter policy (`FilterPolicyScope = MessageAttributes`).
    SnsFilterPolicy,
    /// A Pub/Sub subscription filter.
    PubSubFilter,
}

/// The exported filter and what it had to leave out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// The filter text; `None` when no condition could be expressed.
    pub filter: Option<String>,
    /// One line per condition left out, saying why.
    pub left_out: Vec<String>,
}

/// Payload fields the relay also sends as message attributes.
const ATTRIBUTES: [(&str, &str); 5] = [
    ("subscription_id", "dss.subscription_id"),
    ("match.bundle_uuid", "dss.bundle_uuid"),
    ("match.bundle_version", "dss.bundle_version"),
    ("event_type", "dss.event_type"),
    ("transaction_id", "dss.transaction_id"),
];

/// SNS takes at most five keys in a filter policy.
const SNS_MAX_KEYS: usize = 5;

impl Pattern {
    /// Exports the pattern as a filter in `language`, over the attributes in `sent`: the ones
    /// every sink of the route actually sends (its `attributes` selection and the 10-attribute
    /// limit of SQS and SNS decide). A condition on any other attribute is left out.
    pub fn export(&self, language: FilterLanguage, sent: &[&str]) -> Export {
        let mut left_out = Vec::new();
        let filter = match language {
            FilterLanguage::SnsFilterPolicy => {
                let policy = sns_object(&self.conditions, sent, &mut left_out);
                if policy.len() > SNS_MAX_KEYS {
                    left_out.push(format!(
                        "note: the policy has {} keys; SNS accepts at most {SNS_MAX_KEYS}",
                        policy.len()
                    ));
                }
                (!policy.is_empty())
                    .then(|| serde_json::to_string_pretty(&Value::Object(policy)).expect("JSON"))
            }
            FilterLanguage::PubSubFilter => {
                let terms: Vec<String> = self
                    .conditions
                    .iter()
                    .filter_map(|c| pubsub_condition(c, sent, &mut left_out))
                    .collect();
                (!terms.is_empty()).then(|| terms.join(" AND "))
            }
        };
        Export { filter, left_out }
    }
}

fn attribute_of(path: &[String], sent: &[&str]) -> Result<&'static str, String> {
    let dotted = path.join(".");
    let attribute = ATTRIBUTES
        .iter()
        .find(|(field, _)| *field == dotted)
        .map(|(_, a)| *a)
        .ok_or_else(|| {
            format!(
                "not a message attribute (only {} are)",
                ATTRIBUTES.map(|(f, _)| f).join(", ")
            )
        })?;
    match sent.contains(&attribute) {
        true => Ok(attribute),
        false => Err(format!(
            "the attribute {attribute} is not sent by every sink of the route (see their attributes selection)"
        )),
    }
}

fn describe(condition: &Condition) -> String {
    condition.to_string()
}

fn sns_object(
    conditions: &[Condition],
    sent: &[&str],
    left_out: &mut Vec<String>,
) -> Map<String, Value> {
    let mut policy = Map::new();
    for condition in conditions {
        match condition {
            Condition::Field { path, matchers, .. } => {
                let entry = attribute_of(path, sent).and_then(|attribute| {
                    let values = matchers
                        .iter()
                        .map(sns_matcher)
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok((attribute, values))
                });
                match entry {
                    Ok((attribute, values)) => {
                        policy.insert(attribute.to_owned(), Value::Array(values));
                    }
                    Err(why) => left_out.push(format!("{}: {why}", describe(condition))),
                }
            }
            Condition::Or(alternatives) => {
                let mut inner_left_out = Vec::new();
                let objects: Vec<Value> = alternatives
                    .iter()
                    .map(|p| Value::Object(sns_object(&p.conditions, sent, &mut inner_left_out)))
                    .collect();
                if inner_left_out.is_empty()
                    && objects
                        .iter()
                        .all(|o| o.as_object().is_some_and(|m| !m.is_empty()))
                {
                    policy.insert("$or".to_owned(), Value::Array(objects));
                } else {
                    left_out.push(format!(
                        "{}: an alternative cannot be expressed ({})",
                        describe(condition),
                        inner_left_out.join("; ")
                    ));
                }
            }
            Condition::Jmes { .. } => {
                left_out.push(format!("{}: SNS has no JMESPath", describe(condition)))
            }
        }
    }
    policy
}

fn sns_matcher(matcher: &Matcher) -> Result<Value, String> {
    let strings = |values: &[Value]| values.iter().all(Value::is_string);
    Ok(match matcher {
        Matcher::Exact(Value::String(s)) => json!(s),
        Matcher::Exact(other) => {
            return Err(format!(
                "{other} is not a string, and the relay's attributes are strings"
            ));
        }
        Matcher::Prefix(p, false) => json!({"prefix": p}),
        Matcher::Suffix(s, false) => json!({"suffix": s}),
        Matcher::EqualsIgnoreCase(s) => json!({"equals-ignore-case": s}),
        Matcher::AnythingBut(values, _) if strings(values) => json!({"anything-but": values}),
        Matcher::AnythingButPrefix(p) => json!({"anything-but": {"prefix": p}}),
        Matcher::AnythingButSuffix(s) => json!({"anything-but": {"suffix": s}}),
        Matcher::Exists(b) => json!({"exists": b}),
        Matcher::Numeric(_) => {
            return Err(
                "numeric matching needs Number attributes; the relay sends String ones".into(),
            );
        }
        other => return Err(format!("SNS filter policies have no equivalent of {other}")),
    })
}

/// A Pub/Sub string literal.
fn literal(s: &str) -> String {
    serde_json::to_string(s).expect("JSON string")
}

fn pubsub_condition(
    condition: &Condition,
    sent: &[&str],
    left_out: &mut Vec<String>,
) -> Option<String> {
    match condition {
        Condition::Field { path, matchers, .. } => {
            let expressed = attribute_of(path, sent).and_then(|attribute| {
                // Keys with dots must be written as string literals.
                let key = literal(attribute);
                let terms = matchers
                    .iter()
                    .map(|m| pubsub_matcher(&key, m))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(if terms.len() == 1 {
                    terms.into_iter().next().expect("one")
                } else {
                    format!("({})", terms.join(" OR "))
                })
            });
            expressed
                .map_err(|why| left_out.push(format!("{}: {why}", describe(condition))))
                .ok()
        }
        Condition::Or(alternatives) => {
            let mut inner_left_out = Vec::new();
            let terms: Vec<String> = alternatives
                .iter()
                .map(|p| {
                    let inner: Vec<String> = p
                        .conditions
                        .iter()
                        .filter_map(|c| pubsub_condition(c, sent, &mut inner_left_out))
                        .collect();
                    format!("({})", inner.join(" AND "))
                })
                .collect();
            if inner_left_out.is_empty() {
                Some(format!("({})", terms.join(" OR ")))
            } else {
                left_out.push(format!(
                    "{}: an alternative cannot be expressed ({})",
                    describe(condition),
                    inner_left_out.join("; ")
                ));
                None
            }
        }
        Condition::Jmes { .. } => {
            left_out.push(format!(
                "{}: Pub/Sub filters have no JMESPath",
                describe(condition)
            ));
            None
        }
    }
}

fn pubsub_matcher(key: &str, matcher: &Matcher) -> Result<String, String> {
    // As in EventBridge, anything-but never matches a missing attribute.
    Ok(match matcher {
        Matcher::Exact(Value::String(s)) => format!("attributes.{key} = {}", literal(s)),
        Matcher::Exact(other) => {
            return Err(format!(
                "{other} is not a string, and the relay's attributes are strings"
            ));
        }
        Matcher::Prefix(p, false) => format!("hasPrefix(attributes.{key}, {})", literal(p)),
        Matcher::AnythingBut(values, _) if values.iter().all(Value::is_string) => {
            let mut terms = vec![format!("attributes:{key}")];
            terms.extend(values.iter().map(|v| {
                format!(
                    "attributes.{key} != {}",
                    literal(v.as_str().expect("string"))
                )
            }));
            format!("({})", terms.join(" AND "))
        }
        Matcher::AnythingButPrefix(p) => format!(
            "(attributes:{key} AND NOT hasPrefix(attributes.{key}, {}))",
            literal(p)
        ),
        Matcher::Exists(true) => format!("attributes:{key}"),
        Matcher::Exists(false) => format!("NOT attributes:{key}"),
        other => {
            return Err(format!(
                "Pub/Sub filters have no equivalent of {other} (they offer =, !=, hasPrefix and :)"
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export(pattern: Value, language: FilterLanguage) -> Export {
        let all = crate::sink::Attributes::ORDER;
        Pattern::compile(&pattern).unwrap().export(language, &all)
    }

    #[test]
    fn attributes_a_sink_does_not_send_are_left_out() {
        let pattern =
            Pattern::compile(&json!({"event_type": ["CREATE"], "subscription_id": ["s"]})).unwrap();
        let e = pattern.export(FilterLanguage::SnsFilterPolicy, &["dss.subscription_id"]);
        assert_eq!(
            serde_json::from_str::<Value>(e.filter.as_deref().unwrap()).unwrap(),
            json!({"dss.subscription_id": ["s"]})
        );
        assert_eq!(e.left_out.len(), 1);
        assert!(
            e.left_out[0].contains("dss.event_type is not sent"),
            "{:?}",
            e.left_out
        );
        let e = pattern.export(FilterLanguage::PubSubFilter, &[]);
        assert_eq!((e.filter, e.left_out.len()), (None, 2));
    }

    #[test]
    fn sns_policy_over_attributes() {
        let e = export(
            json!({"event_type": ["CREATE", {"prefix": "TOMB"}], "subscription_id": [{"anything-but": {"prefix": "dev-"}}],
                   "match": {"bundle_uuid": [{"exists": true}]}}),
            FilterLanguage::SnsFilterPolicy,
        );
        let policy: Value = serde_json::from_str(e.filter.as_deref().unwrap()).unwrap();
        assert_eq!(
            policy,
            json!({"dss.event_type": ["CREATE", {"prefix": "TOMB"}], "dss.subscription_id": [{"anything-but": {"prefix": "dev-"}}],
                   "dss.bundle_uuid": [{"exists": true}]})
        );
        assert!(e.left_out.is_empty());
    }

    #[test]
    fn what_cannot_be_said_is_left_out_and_named() {
        let e = export(
            json!({"event_type": ["CREATE"], "attachments": {"project_shortname": ["x"]},
                   "match": {"bundle_uuid": [{"regex": "^c"}]}, "$request": {"query": {"replica": ["gcp"]}}}),
            FilterLanguage::SnsFilterPolicy,
        );
        assert_eq!(
            serde_json::from_str::<Value>(e.filter.as_deref().unwrap()).unwrap(),
            json!({"dss.event_type": ["CREATE"]})
        );
        assert_eq!(e.left_out.len(), 3, "{:?}", e.left_out);
        assert!(
            e.left_out
                .iter()
                .any(|l| l.starts_with("attachments.project_shortname is one of")
                    && l.contains("not a message attribute"))
        );
        assert!(
            e.left_out
                .iter()
                .any(|l| l.contains("no equivalent of regex"))
        );
        assert!(
            e.left_out
                .iter()
                .any(|l| l.starts_with("$request.query.replica"))
        );
    }

    #[test]
    fn pubsub_filter_quotes_dotted_keys() {
        let e = export(
            json!({"event_type": ["TOMBSTONE", "DELETE"], "subscription_id": [{"anything-but": ["a"]}],
                   "$or": [{"match": {"bundle_uuid": [{"prefix": "c8"}]}}, {"transaction_id": [{"exists": false}]}]}),
            FilterLanguage::PubSubFilter,
        );
        assert_eq!(
            e.filter.as_deref(),
            Some(concat!(
                r#"(attributes."dss.event_type" = "TOMBSTONE" OR attributes."dss.event_type" = "DELETE")"#,
                r#" AND (attributes:"dss.subscription_id" AND attributes."dss.subscription_id" != "a")"#,
                r#" AND ((hasPrefix(attributes."dss.bundle_uuid", "c8")) OR (NOT attributes:"dss.transaction_id"))"#,
            ))
        );
        let e = export(
            json!({"event_type": [{"suffix": "E"}]}),
            FilterLanguage::PubSubFilter,
        );
        assert_eq!(e.filter, None);
        assert!(
            e.left_out[0].contains("no equivalent of suffix"),
            "{:?}",
            e.left_out
        );
    }
}
