//! The `$request` document: the parts of a request that routes may match, none of them signed.

use serde_json::{Map, Value};

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
