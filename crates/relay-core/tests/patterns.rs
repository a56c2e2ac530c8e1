//! Every filter operator against the DSS sample notifications, one row per case. Where an
//! operator is EventBridge's, the expected result is EventBridge's documented behaviour:
//! leaves are lists (any entry may match), arrays in the notification match when any element
//! does, missing fields match only `exists: false`, numbers never match strings, and `null`
//! matches only `null`.

use relay_core::route::{Input, Pattern};
use serde_json::{Value, json};

fn sample(name: &str) -> Value {
    let path = format!(
        "{}/../../examples/notifications/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn matches(pattern: Value, notification: &Value, request: &Value) -> bool {
    let pattern = Pattern::compile(&pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
    pattern.matches(&Input::new(notification, request))
}

#[test]
fn every_operator_on_the_dss_samples() {
    let create = sample("v2-create");
    let tombstone = sample("v2-tombstone");
    let delete = sample("v2-delete");
    let v1 = sample("v1-create");
    let extra = json!({"subscription_id": "s", "match": {"bundle_uuid": "u", "bundle_version": "v"},
        "size": 1500, "size_text": "1500", "flag": true, "gone": null, "ratio": 0.25});
    let (star, stars) = (json!({"x": "a*b"}), json!({"x": "axxb"}));
    let request = json!({"path": "/dss/notify/gcp", "query": {"replica": ["gcp"]}, "headers": {"x-dss-notify-attempt": ["3"]}});
    let rows: Vec<(&str, Value, &Value, bool)> = vec![
        // Exact values.
        (
            "exact string",
            json!({"event_type": ["CREATE"]}),
            &create,
            true,
        ),
        (
            "exact string, other value",
            json!({"event_type": ["CREATE"]}),
            &tombstone,
            false,
        ),
        (
            "one of several",
            json!({"event_type": ["TOMBSTONE", "DELETE"]}),
            &delete,
            true,
        ),
        (
            "nested match field",
            json!({"match": {"bundle_uuid": ["c86309f6-e5b7-4698-abb6-b81644573bff"]}}),
            &create,
            true,
        ),
        (
            "nested match, two fields (AND)",
            json!({"match": {"bundle_uuid": ["c86309f6-e5b7-4698-abb6-b81644573bff"], "bundle_version": ["x"]}}),
            &create,
            false,
        ),
        ("exact number", json!({"size": [1500]}), &extra, true),
        (
            "exact number, other spelling",
            json!({"size": [1500.0]}),
            &extra,
            true,
        ),
        (
            "number does not match a numeric string",
            json!({"size_text": [1500]}),
            &extra,
            false,
        ),
        (
            "string does not match a number",
            json!({"size": ["1500"]}),
            &extra,
            false,
        ),
        ("exact bool", json!({"flag": [true]}), &extra, true),
        ("null matches null", json!({"gone": [null]}), &extra, true),
        (
            "null does not match a missing field",
            json!({"absent": [null]}),
            &extra,
            false,
        ),
        (
            "empty string does not match null",
            json!({"gone": [""]}),
            &extra,
            false,
        ),
        (
            "missing field matches no value",
            json!({"event_type": ["CREATE"]}),
            &v1,
            false,
        ),
        // Arrays in the notification.
        (
            "array element",
            json!({"attachments": {"sample_id": ["b1829a9d-6678-493b-bf98-01520f9bad52"]}}),
            &create,
            true,
        ),
        (
            "array, no element",
            json!({"attachments": {"sample_id": ["nope"]}}),
            &create,
            false,
        ),
        (
            "array inside v1 es_query",
            json!({"es_query": {"query": {"bool": {"must_not": {"term": {"admin_deleted": [true]}}}}}}),
            &v1,
            true,
        ),
        // prefix / suffix / equals-ignore-case / wildcard.
        (
            "prefix",
            json!({"bundle_url": [{"prefix": "https://dss.data."}]}),
            &create,
            true,
        ),
        (
            "prefix, no",
            json!({"bundle_url": [{"prefix": "http://"}]}),
            &create,
            false,
        ),
        (
            "prefix ignoring case",
            json!({"event_type": [{"prefix": {"equals-ignore-case": "tomb"}}]}),
            &tombstone,
            true,
        ),
        (
            "suffix",
            json!({"match": {"bundle_version": [{"suffix": ".689105Z"}]}}),
            &create,
            true,
        ),
        (
            "suffix ignoring case",
            json!({"dss_api": [{"suffix": {"equals-ignore-case": "HUMANCELLATLAS.ORG"}}]}),
            &create,
            true,
        ),
        (
            "prefix on a number never matches",
            json!({"size": [{"prefix": "15"}]}),
            &extra,
            false,
        ),
        (
            "equals-ignore-case",
            json!({"event_type": [{"equals-ignore-case": "delete"}]}),
            &delete,
            true,
        ),
        (
            "equals-ignore-case, no",
            json!({"event_type": [{"equals-ignore-case": "create"}]}),
            &delete,
            false,
        ),
        (
            "wildcard",
            json!({"bundle_url": [{"wildcard": "https://dss.*/v1/bundles/*?version=2019-*"}]}),
            &create,
            true,
        ),
        (
            "wildcard, no",
            json!({"bundle_url": [{"wildcard": "*.gcp.*"}]}),
            &create,
            false,
        ),
        (
            "wildcard is anchored",
            json!({"event_type": [{"wildcard": "CREA"}]}),
            &create,
            false,
        ),
        (
            "wildcard with an escaped star",
            json!({"x": [{"wildcard": "a\\*b"}]}),
            &star,
            true,
        ),
        (
            "wildcard with an escaped star, no",
            json!({"x": [{"wildcard": "a\\*b"}]}),
            &stars,
            false,
        ),
        // anything-but.
        (
            "anything-but value",
            json!({"event_type": [{"anything-but": "CREATE"}]}),
            &delete,
            true,
        ),
        (
            "anything-but value, no",
            json!({"event_type": [{"anything-but": "CREATE"}]}),
            &create,
            false,
        ),
        (
            "anything-but list",
            json!({"event_type": [{"anything-but": ["TOMBSTONE", "DELETE"]}]}),
            &create,
            true,
        ),
        (
            "anything-but prefix",
            json!({"subscription_id": [{"anything-but": {"prefix": "8a6a"}}]}),
            &tombstone,
            true,
        ),
        (
            "anything-but prefix, no",
            json!({"subscription_id": [{"anything-but": {"prefix": "8a6a"}}]}),
            &create,
            false,
        ),
        (
            "anything-but suffix",
            json!({"match": {"bundle_version": [{"anything-but": {"suffix": "Z"}}]}}),
            &create,
            false,
        ),
        (
            "anything-but does not match a missing field",
            json!({"event_type": [{"anything-but": "CREATE"}]}),
            &v1,
            false,
        ),
        (
            "anything-but a number",
            json!({"size": [{"anything-but": [1000, 2000]}]}),
            &extra,
            true,
        ),
        // numeric.
        (
            "numeric range",
            json!({"size": [{"numeric": [">", 1000, "<=", 1500]}]}),
            &extra,
            true,
        ),
        (
            "numeric range, outside",
            json!({"size": [{"numeric": [">", 1500]}]}),
            &extra,
            false,
        ),
        (
            "numeric equals",
            json!({"ratio": [{"numeric": ["=", 0.25]}]}),
            &extra,
            true,
        ),
        (
            "numeric on a numeric string never matches",
            json!({"size_text": [{"numeric": [">", 0]}]}),
            &extra,
            false,
        ),
        (
            "numeric on a missing field",
            json!({"nope": [{"numeric": [">", 0]}]}),
            &extra,
            false,
        ),
        // exists.
        (
            "exists true",
            json!({"jmespath_query": [{"exists": true}]}),
            &tombstone,
            true,
        ),
        (
            "exists true, missing",
            json!({"jmespath_query": [{"exists": true}]}),
            &delete,
            false,
        ),
        (
            "exists false, missing",
            json!({"attachments": [{"exists": false}]}),
            &delete,
            true,
        ),
        (
            "exists false, present",
            json!({"attachments": {"sample_id": [{"exists": false}]}}),
            &create,
            false,
        ),
        (
            "exists true on a null value",
            json!({"attachments": {"submitter_id": [{"exists": true}]}}),
            &v1,
            true,
        ),
        (
            "v1 or v2 by presence of es_query",
            json!({"es_query": [{"exists": true}]}),
            &v1,
            true,
        ),
        // $or.
        (
            "$or, second alternative",
            json!({"$or": [{"event_type": ["CREATE"]}, {"es_query": [{"exists": true}]}]}),
            &v1,
            true,
        ),
        (
            "$or, none",
            json!({"$or": [{"event_type": ["CREATE"]}, {"es_query": [{"exists": true}]}]}),
            &delete,
            false,
        ),
        (
            "$or nested under a field",
            json!({"match": {"$or": [{"bundle_uuid": ["x"]}, {"bundle_version": [{"prefix": "2019-"}]}]}}),
            &create,
            true,
        ),
        // Beyond EventBridge: regex and jmespath.
        (
            "regex",
            json!({"match": {"bundle_uuid": [{"regex": "^[0-9a-f]{8}-e5b7-"}]}}),
            &create,
            true,
        ),
        (
            "regex, no",
            json!({"match": {"bundle_uuid": [{"regex": "^e3"}]}}),
            &create,
            false,
        ),
        (
            "regex over array elements",
            json!({"attachments": {"sample_id": [{"regex": "^b18"}]}}),
            &create,
            true,
        ),
        (
            "jmespath on a field",
            json!({"attachments": [{"jmespath": "length(sample_id) > `0`"}]}),
            &create,
            true,
        ),
        (
            "jmespath on a field, falsy",
            json!({"attachments": [{"jmespath": "project_shortname == 'other'"}]}),
            &create,
            false,
        ),
        (
            "$jmespath on the notification",
            json!({"$jmespath": "event_type == 'CREATE' && contains(attachments.project_shortname, 'Glio')"}),
            &create,
            true,
        ),
        (
            "$jmespath, falsy",
            json!({"$jmespath": "attachments._errors"}),
            &create,
            false,
        ),
        (
            "$jmespath on an attachment error object",
            json!({"$jmespath": "attachments._errors.bar"}),
            &v1,
            true,
        ),
        // Request metadata.
        (
            "query parameter",
            json!({"$request": {"query": {"replica": ["gcp"]}}}),
            &create,
            true,
        ),
        (
            "query parameter, other value",
            json!({"$request": {"query": {"replica": ["aws"]}}}),
            &create,
            false,
        ),
        (
            "path prefix",
            json!({"$request": {"path": [{"prefix": "/dss/notify/"}]}}),
            &create,
            true,
        ),
        (
            "header value (a string)",
            json!({"$request": {"headers": {"x-dss-notify-attempt": ["3"]}}}),
            &v1,
            true,
        ),
        (
            "request and payload together",
            json!({"event_type": ["CREATE"], "$request": {"query": {"replica": ["gcp"]}}}),
            &tombstone,
            false,
        ),
    ];
    assert!(rows.len() >= 60);
    for (name, pattern, notification, expected) in rows {
        assert_eq!(
            matches(pattern.clone(), notification, &request),
            expected,
            "{name}: {pattern}"
        );
    }
}

#[test]
fn unknown_operators_and_bad_arguments_name_their_place() {
    for (pattern, at) in [
        (
            json!({"event_type": [{"contains": "CRE"}]}),
            "match.event_type",
        ),
        (
            json!({"match": {"bundle_uuid": [{"numeric": [">"]}]}}),
            "match.match.bundle_uuid",
        ),
        (
            json!({"event_type": [{"exists": "yes"}]}),
            "match.event_type",
        ),
        (
            json!({"event_type": [{"anything-but": {"wildcard": "x"}}]}),
            "match.event_type",
        ),
        (json!({"$jmespath": "event_type =="}), "match"),
        (json!({"event_type": [["CREATE"]]}), "match.event_type"),
    ] {
        let error = Pattern::compile(&pattern).unwrap_err();
        assert_eq!(error.at, at, "{pattern}: {error}");
    }
}

#[test]
fn a_regex_nested_too_deep_is_refused_not_a_crash() {
    // Deep nesting is refused: a fuzz input of stacked repetitions overflowed a thread's stack
    // while compiling (fuzz/regressions/pattern keeps it, and make test replays it).
    for text in [
        format!("a{}", "*".repeat(300)),
        format!("{}a{}", "(".repeat(100), ")".repeat(100)),
    ] {
        let err = Pattern::compile(&json!({"bundle_uuid": [{"regex": text}]})).unwrap_err();
        assert!(err.message.contains("invalid regex"), "{err}");
    }
    assert!(
        Pattern::compile(&json!({"bundle_uuid": [{"regex": "^(c8|(ab)+)[0-9a-f]*$"}]})).is_ok()
    );
}

/// Runs `f` on a thread with a stack of `kib` KiB: without the JMESPath limits, the hostile
/// expressions below overflow a small one (and abort the process) while compiling or
/// evaluating.
fn on_a_stack<T: Send + 'static>(kib: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(kib * 1024)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// Expressions nested thousands deep, as anyone who may write the stored routes could store:
/// each is refused while compiling, with what is wrong and where.
fn hostile_jmespath() -> Vec<(&'static str, String)> {
    vec![
        ("4,050 `!` before a field", format!("{}a", "!".repeat(4050))),
        ("5,000 dots", format!("a{}", ".a".repeat(5000))),
        (
            "20,000 nested parentheses",
            format!("{}a{}", "(".repeat(20_000), ")".repeat(20_000)),
        ),
        ("a 4 KB line", format!("a == '{}'", "x".repeat(4096))),
        // Within the length limit, the nesting is what refuses them.
        ("1,000 `!`", format!("{}a", "!".repeat(1000))),
        ("511 dots", format!("a{}", ".a".repeat(511))),
        (
            "500 nested parentheses",
            format!("{}a{}", "(".repeat(500), ")".repeat(500)),
        ),
        (
            "300 nested lists",
            format!("{}a{}", "[".repeat(300), "]".repeat(300)),
        ),
        ("300 projections", format!("a{}", "[*]".repeat(300))),
        ("500 alternatives", vec!["a"; 500].join("||")),
    ]
}

#[test]
fn a_jmespath_nested_too_deep_or_too_long_is_refused_not_a_crash() {
    on_a_stack(256, || {
        for (case, expression) in hostile_jmespath() {
            for pattern in [
                json!({"$jmespath": expression}),
                json!({"attachments": {"$jmespath": expression}}),
                json!({"attachments": [{"jmespath": expression}]}),
            ] {
                let error = Pattern::compile(&pattern).expect_err(case);
                assert!(
                    error.message.starts_with("the JMESPath expression "),
                    "{case}: {error}"
                );
                assert!(error.at.starts_with("match"), "{case}: {error}");
                assert!(error.message.len() < 100, "{case}: the text is not echoed");
            }
        }
        let long = Pattern::compile(&json!({"$jmespath": "a".repeat(1025)})).unwrap_err();
        assert_eq!(
            long.message,
            "the JMESPath expression is 1025 bytes long; the limit is 1024"
        );
        let deep = Pattern::compile(&json!({"x": [{"jmespath": format!("{}a", "!".repeat(64))}]}))
            .unwrap_err();
        assert_eq!(
            (deep.at.as_str(), deep.message.as_str()),
            (
                "match.x",
                "the JMESPath expression nests 65 levels deep; the limit is 64"
            )
        );
    });
}

#[test]
fn a_jmespath_at_the_limits_compiles_and_matches_on_half_a_worker_stack() {
    // A debug build's interpreter takes about 6 KB of stack a level: 64 levels need about
    // 400 KB, half of what a tokio worker has (2 MiB).
    on_a_stack(1024, || {
        let create = sample("v2-create");
        let longest = format!("event_type == 'CREATE' || '{}' == 'x'", "y".repeat(989));
        assert_eq!(longest.len(), relay_core::route::JMESPATH_MAX_BYTES);
        for expression in [
            // 62 negations of a group: 64 levels, true when there is an event type.
            format!("{}(event_type)", "!!".repeat(31)),
            format!("{}event_type == 'CREATE'{}", "(".repeat(62), ")".repeat(62)),
            longest,
        ] {
            let pattern = json!({"$jmespath": expression});
            assert!(matches(pattern, &create, &Value::Null), "{expression}");
        }
        let chain = format!("{}match.bundle_uuid", "@ | ".repeat(62));
        assert!(matches(json!({"$jmespath": chain}), &create, &Value::Null));
    });
}

/// A document whose route `route` sends what the JMESPath `expression` (a TOML string) selects
/// to a file sink.
fn archive_route(route: &str, expression: &str) -> String {
    let pattern = format!(r#"{{ "$jmespath" = {expression} }}"#);
    relay_testkit::file_route("archive", "/tmp/relay-archive.jsonl", route, Some(&pattern))
}

#[test]
fn a_stored_document_with_a_hostile_jmespath_is_refused() {
    on_a_stack(256, || {
        for (case, expression) in hostile_jmespath() {
            let document = archive_route("hostile", &format!(r#""{expression}""#));
            let error = relay_core::live::check_document(&document, None).expect_err(case);
            let message = error.to_string();
            assert!(
                message.starts_with(r#"route "hostile", match: the JMESPath expression "#),
                "{case}: {message}"
            );
        }
        // The same document with a plain expression is taken.
        let plain = archive_route("plain", r#""event_type == 'CREATE'""#);
        assert!(relay_core::live::check_document(&plain, None).is_ok());
    });
}
