use std::time::{Duration, SystemTime};

use serde_json::json;

use super::*;
use crate::sink::file::FileTarget;
use crate::sink::{FileSinkConfig, Selection};

fn file_sink(name: &str, path: &str) -> SinkConfig {
    SinkConfig {
        name: name.into(),
        target: Target::File(FileSinkConfig {
            path: FileTarget::Path(path.into()),
        }),
        selection: Selection::default(),
    }
}

fn deployed() -> Routes {
    let sinks = vec![file_sink("main", "/tmp/main.jsonl")];
    let specs = deployed_routes(&[], &sinks);
    let router = Router::to_all(vec!["main".into()]);
    Routes::deployed(sinks, specs, router, None)
}

fn stored(text: &str) -> StoredRoutes {
    StoredRoutes::parse(text).unwrap()
}

fn split(name: &str, prefix: &str, registered: &str, expires: &str) -> String {
    format!(
        r#"
[[splits]]
name = "{name}"
match = {{ match = {{ bundle_uuid = [{{ prefix = "{prefix}" }}] }} }}
to = {{ type = "file", path = "/tmp/{name}.jsonl" }}
registered_at = "{registered}"
expires_at = "{expires}"
"#
    )
}

fn at(text: &str) -> SystemTime {
    text.parse::<Timestamp>().unwrap().0
}

/// A sink for tables that only decide.
#[derive(Debug)]
struct Idle(String);

#[async_trait::async_trait]
impl Sink for Idle {
    fn name(&self) -> &str {
        &self.0
    }

    async fn publish(&self, _: &[crate::Message]) -> Vec<Result<crate::Receipt, crate::SinkError>> {
        Vec::new()
    }
}

fn table(stored: &StoredRoutes) -> RoutingTable {
    let routes = deployed().merge(stored).unwrap();
    RoutingTable::new(routes, None, |c| Arc::new(Idle(c.name.clone()))).unwrap()
}

/// The destination names `table` picks for a notification about `bundle_uuid` at `now`.
fn destinations(table: &RoutingTable, bundle_uuid: &str, now: &str) -> Vec<String> {
    let document = json!({"match": {"bundle_uuid": bundle_uuid}});
    let input = Input::new(&document, &Value::Null);
    table
        .decide(&input, at(now))
        .destinations
        .into_iter()
        .map(|i| table.destinations[i].name.clone())
        .collect()
}

#[test]
fn a_split_takes_its_slice_and_the_routes_keep_the_rest() {
    let table = table(&stored(&split(
        "alice",
        "aa",
        "2026-12-01T09:00:00Z",
        "2026-12-01T17:00:00Z",
    )));
    let noon = "2026-12-01T12:00:00Z";
    assert_eq!(destinations(&table, "aa01", noon), ["split:alice"]);
    assert_eq!(destinations(&table, "bb01", noon), ["main"]);
    // Expired: ignored at once, still in the document.
    assert_eq!(
        destinations(&table, "aa01", "2026-12-01T17:00:00Z"),
        ["main"]
    );
}

#[test]
fn overlapping_splits_go_to_the_earliest_registered() {
    // Bob is listed first but registered later.
    let text = split("bob", "a", "2026-12-01T10:00:00Z", "2026-12-02T00:00:00Z")
        + &split(
            "alice",
            "aa",
            "2026-12-01T09:00:00Z",
            "2026-12-02T00:00:00Z",
        );
    let table = table(&stored(&text));
    let noon = "2026-12-01T12:00:00Z";
    assert_eq!(destinations(&table, "aa01", noon), ["split:alice"]);
    assert_eq!(destinations(&table, "ab01", noon), ["split:bob"]);
    assert_eq!(destinations(&table, "cc01", noon), ["main"]);
}

#[test]
fn a_copy_split_adds_to_the_routes() {
    let text = split(
        "carol",
        "aa",
        "2026-12-01T09:00:00Z",
        "2026-12-02T00:00:00Z",
    )
    .replace("expires_at", "copy = true\nexpires_at");
    let table = table(&stored(&text));
    assert_eq!(
        destinations(&table, "aa01", "2026-12-01T12:00:00Z"),
        ["main", "split:carol"]
    );
}

#[test]
fn splits_that_take_everything_are_refused() {
    let everything = [
        "match = {}",
        // Only a negative condition: a notification without the field matches it.
        r#"match = { match = { bundle_uuid = [{ "anything-but" = ["x"] }] } }"#,
    ];
    for pattern in everything {
        let text = split("eve", "aa", "2026-12-01T09:00:00Z", "2026-12-02T00:00:00Z").replace(
            r#"match = { match = { bundle_uuid = [{ prefix = "aa" }] } }"#,
            pattern,
        );
        let error = deployed().merge(&stored(&text)).unwrap_err().to_string();
        assert!(
            error.contains("takes every notification"),
            "{pattern}: {error}"
        );
    }
    let missing = split("eve", "aa", "2026-12-01T09:00:00Z", "2026-12-02T00:00:00Z").replace(
        r#"match = { match = { bundle_uuid = [{ prefix = "aa" }] } }"#,
        "",
    );
    let error = StoredRoutes::parse(&missing).unwrap_err().to_string();
    assert!(error.contains("missing field `match`"), "{error}");
}

#[test]
fn stored_routes_cannot_redefine_what_is_deployed() {
    let redefine_sink = r#"
[sinks.main]
type = "file"
path = "/tmp/elsewhere.jsonl"
"#;
    let error = deployed()
        .merge(&stored(redefine_sink))
        .unwrap_err()
        .to_string();
    assert!(error.contains("sink \"main\" is deployed"), "{error}");

    let redefine_route = r#"
[[routes]]
name = "all"
match = { event_type = ["CREATE"] }
to = ["main"]
"#;
    let error = deployed()
        .merge(&stored(redefine_route))
        .unwrap_err()
        .to_string();
    assert!(error.contains("route \"all\" is deployed"), "{error}");

    // The same definition in both places (a migration) is fine, and counted once.
    let same = r#"
[sinks.main]
type = "file"
path = "/tmp/main.jsonl"

[[routes]]
name = "all"
to = ["main"]

[sinks.audit]
type = "file"
path = "/tmp/audit.jsonl"

[[routes]]
name = "deletes"
match = { event_type = ["DELETE"] }
to = ["audit"]
"#;
    let routes = deployed().merge(&stored(same)).unwrap();
    let names: Vec<&str> = routes.sinks.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["main", "audit"]);
    assert_eq!(routes.router.routes().len(), 2);
}

#[test]
fn split_names_and_times_are_checked() {
    for (text, expected) in [
        (
            split(
                "al ice",
                "aa",
                "2026-12-01T09:00:00Z",
                "2026-12-02T00:00:00Z",
            ),
            "a name is 1 to 40",
        ),
        (
            split(
                "alice",
                "aa",
                "2026-12-01T09:00:00Z",
                "2026-12-01T08:00:00Z",
            ),
            "expires before it was registered",
        ),
        (
            split(
                "alice",
                "aa",
                "2026-12-01T09:00:00Z",
                "2026-12-02T00:00:00Z",
            ) + &split(
                "alice",
                "bb",
                "2026-12-01T09:00:00Z",
                "2026-12-02T00:00:00Z",
            ),
            "another split has this name",
        ),
    ] {
        let error = deployed().merge(&stored(&text)).unwrap_err().to_string();
        assert!(error.contains(expected), "{error}");
    }
    let error = StoredRoutes::parse(&split("alice", "aa", "yesterday", "2026-12-02T00:00:00Z"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("RFC 3339"), "{error}");
}

#[test]
fn unknown_tables_are_refused_with_their_place() {
    let error = StoredRoutes::parse("[relay]\nmax_body_bytes = 1\n")
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("1:"), "{error}");
    assert!(error.contains("unknown field `relay`"), "{error}");
}

#[test]
fn timestamps_read_and_print_rfc_3339() {
    let t: Timestamp = "2026-12-01T17:00:00Z".parse().unwrap();
    assert_eq!(t.to_string(), "2026-12-01T17:00:00Z");
    assert_eq!(
        t.0.duration_since(SystemTime::UNIX_EPOCH).unwrap(),
        Duration::from_secs(1_796_144_400)
    );
}
