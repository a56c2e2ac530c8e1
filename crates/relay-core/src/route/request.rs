//! The `$request` document: the parts of a request that routes may match, none of them signed.

use serde_json::{Map, Value};

use super::pattern::{Condition, Pattern, REQUEST};

/// The request metadata routes can match under `$request`.
pub fn request_document(path: &str, query: Option<&str>, headers: &http::HeaderMap) -> Value {
    let mut q = Map::new();
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let entry = q
            .entry(name.to_owned())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(values) = entry {
            values.push(Value::String(value.to_owned()));
        }
    }
    let mut h = Map::new();
    for (name, value) in headers {
        if let Ok(value) = value.to_str() {
            let entry = h
                .entry(name.as_str().to_owned())
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(values) = entry {
                values.push(Value::String(value.to_owned()));
            }
        }
    }
    serde_json::json!({"path": path, "query": q, "headers": h})
}

impl Pattern {
    /// Adds to `names` every request header a condition names (`$request.headers.<name>`):
    /// what an archive record keeps so that a replay matches as the live request did.
    pub(crate) fn request_headers(&self, names: &mut std::collections::BTreeSet<String>) {
        for condition in &self.conditions {
            match condition {
                Condition::Field { path, .. } => {
                    if let [request, headers, name, ..] = path.as_slice()
                        && request == REQUEST
                        && headers == "headers"
                    {
                        names.insert(name.to_ascii_lowercase());
                    }
                }
                Condition::Or(alternatives) => {
                    alternatives.iter().for_each(|p| p.request_headers(names));
                }
                Condition::Jmes { .. } => {}
            }
        }
    }

    /// True when some condition reads `$request`, so the router builds it only when needed.
    pub(crate) fn uses_request(&self) -> bool {
        self.conditions.iter().any(|c| match c {
            Condition::Field { path, .. } | Condition::Jmes { path, .. } => {
                path.first().is_some_and(|p| p == REQUEST)
            }
            Condition::Or(alternatives) => alternatives.iter().any(Pattern::uses_request),
        })
    }
}
