use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

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

/// Eve's split of the "aa" slice, 2026-12-01T09:00:00Z to 2026-12-02T00:00:00Z, with `from`
/// replaced by `to`.
fn eve_split_replacing(from: &str, to: &str) -> String {
    split("eve", "aa", "2026-12-01T09:00:00Z", "2026-12-02T00:00:00Z").replace(from, to)
}

/// Eve's split with its match `from` replaced by `pattern` is refused, saying `expected`.
fn assert_eve_split_refused(from: &str, pattern: &str, expected: &str) {
    let error = merge_error(&eve_split_replacing(from, pattern));
    assert!(error.contains(expected), "{pattern}: {error}");
}

/// Why merging the stored document `text` into the deployed routes is refused.
fn merge_error(text: &str) -> String {
    deployed().merge(&stored(text)).unwrap_err().to_string()
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

    async fn publish(&self, _: &crate::Message) -> Result<crate::Receipt, crate::SinkError> {
        Err(crate::SinkError::Permanent(
            "a table that only decides".into(),
        ))
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
        assert_eve_split_refused(
            r#"match = { match = { bundle_uuid = [{ prefix = "aa" }] } }"#,
            pattern,
            "takes every notification",
        );
    }
    let missing = eve_split_replacing(
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
    let error = merge_error(redefine_sink);
    assert!(error.contains("sink \"main\" is deployed"), "{error}");

    let redefine_route = r#"
[[routes]]
name = "all"
match = { event_type = ["CREATE"] }
to = ["main"]
"#;
    let error = merge_error(redefine_route);
    assert!(error.contains("route \"all\" is deployed"), "{error}");

    // The same definition in both places (a migration) is fine, and counted once.
    let same = format!(
        "{}\n{}",
        relay_testkit::file_route("main", "/tmp/main.jsonl", "all", None),
        relay_testkit::file_route(
            "audit",
            "/tmp/audit.jsonl",
            "deletes",
            Some(r#"{ event_type = ["DELETE"] }"#)
        ),
    );
    let routes = deployed().merge(&stored(&same)).unwrap();
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
        let error = merge_error(&text);
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

/// Whether a split with this pattern (JSON) is refused as taking every notification.
fn refused(pattern: &str) -> bool {
    let pattern: Value = serde_json::from_str(pattern).unwrap();
    matches_anything(&Pattern::compile(&pattern).unwrap())
}

#[test]
fn conditions_every_dss_value_satisfies_take_everything() {
    for pattern in [
        r#"{"subscription_id":[{"anything-but":""}]}"#,
        r#"{"match":{"bundle_uuid":[{"regex":"."}]}}"#,
        r#"{"match":{"bundle_uuid":[{"wildcard":"*-*"}]}}"#,
        r#"{"match":{"bundle_version":[{"suffix":"Z"}]}}"#,
        r#"{"match":{"bundle_uuid":[{"regex":".*"}]}}"#,
        r#"{"match":{"bundle_uuid":[{"regex":"^"}]}}"#,
        r#"{"match":{"bundle_uuid":[{"regex":""}]}}"#,
        r#"{"match":{"bundle_uuid":[{"wildcard":"*"}]}}"#,
        r#"{"match":{"bundle_uuid":[{"prefix":""}]}}"#,
        r#"{"match":{"bundle_version":[{"suffix":""}]}}"#,
        r#"{"match":{"bundle_version":[{"prefix":"20"}]}}"#,
        r#"{"match":{"bundle_version":[{"suffix":{"equals-ignore-case":"z"}}]}}"#,
        r#"{"event_type":[{"anything-but":["FOO","BAR"]}]}"#,
        r#"{"event_type":["CREATE","TOMBSTONE","DELETE","UPDATE"]}"#,
        r#"{"subscription_id":[{"exists":true}]}"#,
        r#"{"match":[{"exists":true}]}"#,
        r#"{"attachments":{"project":[{"regex":"."}]}}"#,
        r#"{"$request":{"path":[{"prefix":"/"}]}}"#,
        r#"{"$or":[{"event_type":["CREATE"]},{"event_type":[{"anything-but":"CREATE"}]}]}"#,
        r#"{"$jmespath":"subscription_id"}"#,
        // Two conditions, each of which every notification passes.
        r#"{"subscription_id":[{"anything-but":""}],"match":{"bundle_uuid":[{"wildcard":"*-*"}]}}"#,
        // Every v2 notification: a deployment may have only v2 subscriptions.
        r#"{"event_type":[{"exists":true}]}"#,
        r#"{"es_query":[{"exists":false}]}"#,
    ] {
        assert!(refused(pattern), "{pattern} takes every notification");
    }
}

#[test]
fn real_conditions_are_accepted() {
    for pattern in [
        r#"{"match":{"bundle_uuid":[{"prefix":"aa"}]}}"#,
        r#"{"match":{"bundle_uuid":[{"prefix":"c"}]}}"#,
        r#"{"event_type":["CREATE"]}"#,
        r#"{"event_type":[{"anything-but":"CREATE"}]}"#,
        r#"{"event_type":[{"equals-ignore-case":"tombstone"}]}"#,
        r#"{"match":{"bundle_version":[{"prefix":"2019"}]}}"#,
        r#"{"match":{"bundle_version":[{"suffix":"5Z"}]}}"#,
        r#"{"match":{"bundle_uuid":[{"regex":"^[0-7]"}]}}"#,
        r#"{"match":{"bundle_uuid":[{"wildcard":"c8*"}]}}"#,
        r#"{"subscription_id":["8a6a7e5c-2f0b-4c39-9c9e-2d1c7c0e7b11"]}"#,
        r#"{"attachments":{"project_shortname":["Glioblastoma"]}}"#,
        r#"{"match":{"bundle_uuid":[{"prefix":"aa"}]},"size":[{"numeric":[">",1.5]}]}"#,
        // A real condition next to one that holds everywhere.
        r#"{"subscription_id":[{"anything-but":""}],"event_type":["DELETE"]}"#,
        // Some notification fails both alternatives (a TOMBSTONE of a bundle not starting "a").
        r#"{"$or":[{"event_type":["CREATE"]},{"match":{"bundle_uuid":[{"prefix":"a"}]}}]}"#,
        r#"{"$jmespath":"event_type == 'CREATE'"}"#,
        r#"{"$request":{"path":["/notify"]}}"#,
    ] {
        assert!(!refused(pattern), "{pattern} has a real condition");
    }
}

#[test]
fn the_bypasses_are_refused_as_stored_splits_too() {
    for pattern in [
        r#"{ subscription_id = [{ "anything-but" = "" }] }"#,
        r#"{ match = { bundle_uuid = [{ regex = "." }] } }"#,
        r#"{ match = { bundle_uuid = [{ wildcard = "*-*" }] } }"#,
        r#"{ match = { bundle_version = [{ suffix = "Z" }] } }"#,
    ] {
        assert_eve_split_refused(
            r#"{ match = { bundle_uuid = [{ prefix = "aa" }] } }"#,
            pattern,
            "its match takes every notification; a split takes a slice",
        );
    }
}

#[test]
fn a_stored_split_longer_than_the_max_ttl_is_refused() {
    // 8 days from registration to expiry: over the default 7.
    let long = split(
        "alice",
        "aa",
        "2026-12-01T09:00:00Z",
        "2026-12-09T09:00:00Z",
    );
    let error = merge_error(&long);
    assert!(
        error.contains("split \"alice\": it lasts 8days from its registration to its expiry; a split lasts at most 7days"),
        "{error}"
    );
    let error = check_document(&long, None).unwrap_err().to_string();
    assert!(error.contains("a split lasts at most 7days"), "{error}");
    // Exactly the max, and a longer one where the deployment allows it, are taken.
    let week = split(
        "alice",
        "aa",
        "2026-12-01T09:00:00Z",
        "2026-12-08T09:00:00Z",
    );
    deployed().merge(&stored(&week)).unwrap();
    let ten_days = deployed().with_split_max_ttl(Duration::from_secs(10 * 86_400));
    assert_eq!(ten_days.split_max_ttl(), Duration::from_secs(864_000));
    ten_days.merge(&stored(&long)).unwrap();
    let hour = deployed().with_split_max_ttl(Duration::from_secs(3600));
    let error = hour.merge(&stored(&week)).unwrap_err().to_string();
    assert!(error.contains("a split lasts at most 1h"), "{error}");
}

#[test]
fn timestamps_beyond_rfc_3339_print_without_panicking() {
    let far = Timestamp(SystemTime::UNIX_EPOCH + Duration::from_secs(999_999_999 * 3600));
    assert_eq!(far.to_string(), "9999-12-31T23:59:59Z");
    let before = Timestamp(SystemTime::UNIX_EPOCH - Duration::from_secs(1));
    assert_eq!(before.to_string(), "1970-01-01T00:00:00Z");
    let now = SystemTime::now();
    assert!(Timestamp::checked_after(now, Duration::from_secs(999_999_999 * 3600)).is_none());
    assert!(Timestamp::checked_after(now, Duration::MAX).is_none());
    assert!(Timestamp::checked_after(now, Duration::from_secs(3600)).is_some());
}

#[test]
fn the_relay_takes_the_max_ttl_from_its_configuration() {
    let vars = [
        ("RELAY_ALLOW_UNSIGNED", "true"),
        ("RELAY_FILE_SINK", "-"),
        ("RELAY_SPLIT_MAX_TTL_SECS", "3600"),
    ];
    let var = |name: &str| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    };
    let config = crate::Config::from_vars(var).unwrap();
    assert_eq!(config.split_max_ttl, Duration::from_secs(3600));
    let two_hours = split(
        "alice",
        "aa",
        "2026-12-01T09:00:00Z",
        "2026-12-01T11:00:00Z",
    );
    let error = config
        .routes()
        .merge(&stored(&two_hours))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("it lasts 2h from its registration"),
        "{error}"
    );
    let zero = |name: &str| match name {
        "RELAY_SPLIT_MAX_TTL_SECS" => Some("0".to_owned()),
        other => var(other),
    };
    let errors = crate::Config::from_vars(zero).unwrap_err().to_string();
    assert!(errors.contains("RELAY_SPLIT_MAX_TTL_SECS"), "{errors}");
}

/// A stored route or split that matches on `$request` (never signed) is refused unless it says
/// `accept_unsigned = true`; with it, it is taken.
#[test]
fn stored_routes_and_splits_on_the_request_need_the_opt_in() {
    let route = r#"
[[routes]]
name = "by-header"
match = { "$request" = { headers = { x-github-event = ["release"] } } }
to = ["main"]
"#;
    let error = merge_error(route);
    assert!(error.contains("which no sender signs"), "{error}");
    assert!(error.contains("accept_unsigned = true"), "{error}");
    let with = route.replace("to = [\"main\"]", "to = [\"main\"]\naccept_unsigned = true");
    deployed().merge(&stored(&with)).unwrap();

    let pattern = r#"{ "$request" = { query = { replica = ["aws"] } } }"#;
    let from = r#"{ match = { bundle_uuid = [{ prefix = "aa" }] } }"#;
    assert_eve_split_refused(from, pattern, "which no sender signs");
    let split = eve_split_replacing(from, pattern)
        .replace("registered_at", "accept_unsigned = true\nregistered_at");
    deployed().merge(&stored(&split)).unwrap();
}
