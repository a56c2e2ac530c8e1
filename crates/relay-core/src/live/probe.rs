//! Whether a split's pattern takes every notification, decided by what it means for DSS
//! notifications: a condition that every value a DSS field can have satisfies is no condition.
//!
//! Each field a pattern reads has a set of probe values, values real notifications carry:
//! UUIDs for `subscription_id`, `transaction_id` and `match.bundle_uuid`, DSS versions
//! (`2019-11-15T202303.689105Z`) for `match.bundle_version`, `CREATE`, `TOMBSTONE`, `DELETE` and
//! `UPDATE` for `event_type`, and so on. A field the relay does not know (an attachment, a
//! header) is taken to be always present, with a UUID, a version, `CREATE` or a word as its value
//! (never empty: a condition that only refuses the empty string refuses nothing there). The
//! pattern takes everything when it matches every probe notification built from those values,
//! for either generation of notification (v2 with `event_type`, v1 with `es_query`): a
//! deployment may see only one of them.
//!
//! The pattern's top-level conditions must all hold, so each is checked on its own against
//! every combination of the probe values of the fields it reads (one field for a plain
//! condition, several for `$or` or `$jmespath`), the other fields staying fixed. A condition
//! that holds for the first [`MAX_PROBES`] combinations of more is taken to hold everywhere,
//! refusing the split; so a check costs at most that many matches per condition.

use serde_json::{Map, Value, json};

use crate::route::{Input, Pattern, REQUEST};

/// The most probe notifications one top-level condition is checked against.
pub(super) const MAX_PROBES: usize = 5_000;

/// UUIDs as the DSS writes them (version 4, lower case), starting with different digits.
const UUIDS: [&str; 4] = [
    "c86309f6-e5b7-4698-abb6-b81644573bff",
    "0a3f5e2d-9b1c-4d7e-8f60-1a2b3c4d5e6f",
    "e32290e0-971c-4063-8707-df56ccc5606b",
    "7b9d1f3a-5c2e-4a8b-9d0f-6e4c2a1b3d50",
];

/// DSS versions: `YYYY-MM-DDTHHMMSS.ffffffZ`.
const VERSIONS: [&str; 4] = [
    "2019-11-15T202303.689105Z",
    "2018-06-04T225830.079725Z",
    "2020-03-27T010203.000000Z",
    "2021-08-09T174512.123456Z",
];

/// The values of a field the relay does not know.
const ANY: [&str; 6] = [
    "8a6a7e5c-2f0b-4c39-9c9e-2d1c7c0e7b11",
    "2019-11-15T202303.689105Z",
    "CREATE",
    "x",
    "Glioblastoma_medium_1000_cells",
    "some words",
];

/// A field that varies, and the values it takes.
struct Dim {
    path: Vec<String>,
    values: Vec<Value>,
}

impl Dim {
    fn new(path: &str, values: impl IntoIterator<Item = String>) -> Self {
        Self {
            path: path.split('.').map(str::to_owned).collect(),
            values: values.into_iter().map(Value::String).collect(),
        }
    }
}

/// One generation of notification: a base document (with `$request` in it), the fields that
/// vary, and the fields it never has.
struct Shape {
    base: Value,
    dims: Vec<Dim>,
    absent: &'static [&'static str],
}

fn strings<const N: usize>(values: [&str; N]) -> impl Iterator<Item = String> {
    values.into_iter().map(str::to_owned)
}

fn shapes() -> [Shape; 2] {
    let apis = [
        "https://dss.data.humancellatlas.org",
        "https://dss.staging.data.humancellatlas.org",
    ];
    let urls = (0..3).map(|i| {
        format!(
            "{}/v1/bundles/{}?version={}",
            apis[i % 2],
            UUIDS[i],
            VERSIONS[i]
        )
    });
    let request =
        json!({"path": "/", "query": {}, "headers": {"content-type": ["application/json"]}});
    let common = || {
        vec![
            Dim::new("subscription_id", strings([UUIDS[3], UUIDS[0], UUIDS[2]])),
            Dim::new("transaction_id", strings([UUIDS[1], UUIDS[3]])),
            Dim::new("match.bundle_uuid", strings(UUIDS)),
            Dim::new("match.bundle_version", strings(VERSIONS)),
            Dim::new(
                &format!("{REQUEST}.path"),
                strings(["/", "/notify", "/dss/v2/notifications"]),
            ),
        ]
    };
    let mut v2 = vec![Dim::new(
        "event_type",
        strings(["CREATE", "TOMBSTONE", "DELETE", "UPDATE"]),
    )];
    v2.extend(common());
    v2.extend([
        Dim::new("event_timestamp", strings([VERSIONS[2], VERSIONS[3]])),
        Dim::new("dss_api", strings(apis)),
        Dim::new("bundle_url", urls),
    ]);
    [
        Shape {
            base: json!({"match": {}, REQUEST: request.clone()}),
            dims: v2,
            absent: &["es_query"],
        },
        Shape {
            base: json!({"match": {}, "es_query": {"query": {"match_all": {}}}, REQUEST: request}),
            dims: common(),
            absent: &[
                "event_type",
                "event_timestamp",
                "dss_api",
                "bundle_url",
                "jmespath_query",
            ],
        },
    ]
}

/// One top-level condition of a pattern, as a pattern of its own, and the fields it reads:
/// leaves (a field's value) and subtrees (everything under an object, for `$jmespath`).
struct Part {
    pattern: Value,
    leaves: Vec<Vec<String>>,
    subtrees: Vec<Vec<String>>,
}

/// `value` under the objects of `path`.
fn nest(path: &[String], value: Value) -> Value {
    path.iter().rev().fold(value, |inner, key| {
        Value::Object(Map::from_iter([(key.clone(), inner)]))
    })
}

/// The top-level conditions of the pattern object `source` at `path`, as `Pattern::compile`
/// reads it.
fn parts(source: &Value, path: &mut Vec<String>, out: &mut Vec<Part>) {
    let Value::Object(map) = source else { return };
    for (key, value) in map {
        let mut part = Part {
            pattern: nest(
                path,
                Value::Object(Map::from_iter([(key.clone(), value.clone())])),
            ),
            leaves: Vec::new(),
            subtrees: Vec::new(),
        };
        match key.as_str() {
            "$or" => {
                for alternative in value.as_array().into_iter().flatten() {
                    reads(alternative, path, &mut part);
                }
            }
            "$jmespath" => part.subtrees.push(path.clone()),
            _ if value.is_object() => {
                path.push(key.clone());
                parts(value, path, out);
                path.pop();
                continue;
            }
            _ => {
                path.push(key.clone());
                part.leaves.push(path.clone());
                path.pop();
            }
        }
        out.push(part);
    }
}

/// Every field the pattern object `source` at `path` reads, into `part`.
fn reads(source: &Value, path: &mut Vec<String>, part: &mut Part) {
    let Value::Object(map) = source else { return };
    for (key, value) in map {
        match key.as_str() {
            "$or" => {
                for alternative in value.as_array().into_iter().flatten() {
                    reads(alternative, path, part);
                }
            }
            "$jmespath" => part.subtrees.push(path.clone()),
            _ => {
                path.push(key.clone());
                if value.is_object() {
                    reads(value, path, part);
                } else {
                    part.leaves.push(path.clone());
                }
                path.pop();
            }
        }
    }
}

fn related(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The value at `path` in `document`, if there is one.
fn at<'v>(document: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(document, |value, key| value.get(key))
}

/// Sets `path` in `document` to `value`, making the objects on the way.
fn set(document: &mut Value, path: &[String], value: Value) {
    let Some((last, init)) = path.split_last() else {
        return;
    };
    let mut current = document;
    for key in init {
        let Value::Object(map) = current else { return };
        current = map
            .entry(key.clone())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if let Value::Object(map) = current {
        map.insert(last.clone(), value);
    }
}

/// Whether `part` holds for every probe notification of `shape`.
fn holds_everywhere(part: &Part, shape: &Shape) -> bool {
    let Ok(pattern) = Pattern::compile(&part.pattern) else {
        return true;
    };
    let mut dims: Vec<&Dim> = Vec::new();
    let mut generic = Vec::new();
    for leaf in &part.leaves {
        let known: Vec<&Dim> = shape
            .dims
            .iter()
            .filter(|d| related(&d.path, leaf))
            .collect();
        if !known.is_empty() {
            dims.extend(known);
        } else if !shape.absent.contains(&leaf[0].as_str()) && at(&shape.base, leaf).is_none() {
            generic.push(Dim {
                path: leaf.clone(),
                values: ANY.iter().map(|v| Value::String((*v).to_owned())).collect(),
            });
        }
    }
    for subtree in &part.subtrees {
        dims.extend(shape.dims.iter().filter(|d| {
            d.path.starts_with(subtree) && (!subtree.is_empty() || d.path[0] != REQUEST)
        }));
    }
    dims.extend(generic.iter());
    let mut seen = Vec::new();
    dims.retain(|d| {
        let new = !seen.contains(&&d.path);
        seen.push(&d.path);
        new
    });

    let mut base = shape.base.clone();
    for dim in &shape.dims {
        set(&mut base, &dim.path, dim.values[0].clone());
    }
    // An odometer over the dims' values, the first turning fastest; past MAX_PROBES, the
    // condition is taken to hold everywhere.
    let mut wheel = vec![0usize; dims.len()];
    for _ in 0..MAX_PROBES {
        let mut document = base.clone();
        for (dim, &i) in dims.iter().zip(&wheel) {
            set(&mut document, &dim.path, dim.values[i].clone());
        }
        let request = document
            .as_object_mut()
            .and_then(|m| m.remove(REQUEST))
            .unwrap_or(Value::Null);
        if !pattern.matches(&Input::new(&document, &request)) {
            return false;
        }
        let mut turned = false;
        for (position, dim) in wheel.iter_mut().zip(&dims) {
            *position += 1;
            if *position < dim.values.len() {
                turned = true;
                break;
            }
            *position = 0;
        }
        if !turned {
            return true;
        }
    }
    true
}

/// Whether `pattern` matches every probe notification of one generation or the other.
pub(super) fn takes_everything(pattern: &Pattern) -> bool {
    let mut all = Vec::new();
    parts(pattern.source(), &mut Vec::new(), &mut all);
    pattern.is_empty()
        || shapes()
            .iter()
            .any(|shape| all.iter().all(|part| holds_everywhere(part, shape)))
}
