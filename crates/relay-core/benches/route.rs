//! Per-notification routing cost with 20 routes of mixed operators, against two baselines
//! measured in the same run: parsing the notification (which every request pays) and a
//! single catch-all route (the zero-configuration path).
//!
//! A second group, `jmespath`, gives notifications per second for twenty routes whose every
//! condition is a JMESPath expression, alone and with the parse in front of it.
//!
//! A third, `allowlist`, routes through one route whose pattern lists 100,000 subscription
//! ids: a notification on the list and one that is not. Their ratio is what to compare: the
//! one that matches nothing should cost no more than about the one that matches.
//!
//! Run with `cargo bench -p relay-core --features fast-regex --bench route` (`make bench`).

use std::hint::black_box;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use relay_core::Notification;
use relay_core::route::{Input, RouteSpec, Router, request_document};
use serde_json::{Value, json};

const CREATE: &str = include_str!("../../../examples/notifications/v2-create.json");
const V1: &str = include_str!("../../../examples/notifications/v1-create.json");

/// Twenty routes, every operator at least once; JMESPath and regex only where `heavy`.
fn routes(heavy: bool) -> Vec<RouteSpec> {
    let mut patterns = vec![
        json!({"event_type": ["CREATE"]}),
        json!({"event_type": ["TOMBSTONE", "DELETE"]}),
        json!({"subscription_id": [{"prefix": "8a6a"}]}),
        json!({"match": {"bundle_version": [{"suffix": ".689105Z"}]}}),
        json!({"event_type": [{"anything-but": ["CREATE"]}]}),
        json!({"subscription_id": [{"anything-but": {"prefix": "dev-"}}]}),
        json!({"attachments": {"project_shortname": [{"equals-ignore-case": "glioblastoma_medium_1000_cells"}]}}),
        json!({"bundle_url": [{"wildcard": "https://dss.*/v1/bundles/*"}]}),
        json!({"attachments": {"sample_id": [{"exists": true}]}}),
        json!({"es_query": [{"exists": false}]}),
        json!({"$or": [{"event_type": ["DELETE"]}, {"es_query": [{"exists": true}]}]}),
        json!({"$request": {"query": {"replica": ["gcp"]}}}),
        json!({"$request": {"path": [{"prefix": "/dss/"}]}}),
        json!({"match": {"bundle_uuid": ["c86309f6-e5b7-4698-abb6-b81644573bff", "e32290e0-971c-4063-8707-df56ccc5606b"]}}),
        json!({"attachments": {"sample_id": ["b1829a9d-6678-493b-bf98-01520f9bad52"]}}),
        json!({"event_type": ["CREATE"], "attachments": {"project_shortname": [{"prefix": "Glio"}]}}),
        json!({"dss_api": [{"suffix": {"equals-ignore-case": "HUMANCELLATLAS.ORG"}}]}),
        json!({"event_timestamp": [{"prefix": "2019-11"}]}),
    ];
    if heavy {
        patterns.push(json!({"match": {"bundle_uuid": [{"regex": "^[0-9a-f]{8}-e5b7-"}]}}));
        patterns.push(
            json!({"$jmespath": "event_type == 'CREATE' && length(attachments.sample_id) > `0`"}),
        );
    } else {
        patterns.push(json!({"transaction_id": [{"exists": true}]}));
        patterns.push(json!({"jmespath_query": [{"prefix": "event_type"}]}));
    }
    // Two of the patterns read $request.
    numbered(patterns, true)
}

/// Twenty routes, each a JMESPath condition as subscribers write them.
fn jmespath_routes() -> Vec<RouteSpec> {
    let expressions = [
        "event_type == 'CREATE'",
        "event_type == 'TOMBSTONE' || event_type == 'DELETE'",
        "starts_with(subscription_id, '8a6a')",
        "ends_with(match.bundle_version, '.689105Z')",
        "contains(bundle_url, '/v1/bundles/')",
        "length(attachments.sample_id) > `0`",
        "attachments.project_shortname == 'Glioblastoma_medium_1000_cells'",
        "contains(attachments.sample_id, 'b1829a9d-6678-493b-bf98-01520f9bad52')",
        "!es_query",
        "event_type == 'CREATE' && starts_with(dss_api, 'https://dss.data')",
        "match.bundle_uuid == 'c86309f6-e5b7-4698-abb6-b81644573bff'",
        "starts_with(event_timestamp, '2019-11')",
        "type(attachments) == 'object'",
        "length(keys(match)) == `2`",
        "transaction_id != null",
        "event_type != 'DELETE' && attachments.project_shortname != null",
        "starts_with(match.bundle_uuid, 'c86')",
        "ends_with(dss_api, '.org')",
        "length(subscription_id) == `36`",
        "event_type == 'CREATE' && length(attachments.sample_id) > `0`",
    ];
    let patterns = expressions.map(|expression| json!({"$jmespath": expression}));
    numbered(patterns, false)
}

/// One route a pattern, named `route-00`, `route-01`, … and each to one of the four sinks in
/// turn.
fn numbered(patterns: impl IntoIterator<Item = Value>, accept_unsigned: bool) -> Vec<RouteSpec> {
    patterns
        .into_iter()
        .enumerate()
        .map(|(i, pattern)| RouteSpec {
            name: format!("route-{i:02}"),
            pattern: Some(pattern),
            to: vec![format!("sink-{}", i % 4)],
            stop: false,
            fallback: false,
            accept_unsigned,
        })
        .collect()
}

fn sinks() -> Vec<String> {
    (0..4).map(|i| format!("sink-{i}")).collect()
}

fn bench(c: &mut Criterion) {
    let lean = Router::compile(&routes(false), sinks()).unwrap();
    let mixed = Router::compile(&routes(true), sinks()).unwrap();
    let everything = Router::to_all(sinks());
    let headers = http::HeaderMap::new();
    let mut group = c.benchmark_group("route");
    for (name, payload) in [("v2-create", CREATE), ("v1", V1)] {
        let bytes = Bytes::from_static(payload.as_bytes());
        let notification = Notification::parse(bytes.clone()).unwrap();
        let document: &Value = notification.document();
        group.bench_function(format!("{name}/baseline-parse"), |b| {
            b.iter(|| Notification::parse(black_box(bytes.clone())).unwrap())
        });
        group.bench_function(format!("{name}/baseline-catch-all"), |b| {
            b.iter(|| everything.route(&Input::new(black_box(document), &Value::Null)))
        });
        for (label, router) in [
            ("20-routes-lean", &lean),
            ("20-routes-regex-jmespath", &mixed),
        ] {
            group.bench_function(format!("{name}/{label}"), |b| {
                b.iter(|| {
                    // The request document is built per notification, as the relay does.
                    let request = request_document("/dss/notify", Some("replica=aws"), &headers);
                    router.route(&Input::new(black_box(document), &request))
                })
            });
        }
    }
    group.finish();
}

/// Notifications per second through twenty JMESPath routes.
fn jmespath(c: &mut Criterion) {
    let router = Router::compile(&jmespath_routes(), sinks()).unwrap();
    let bytes = Bytes::from_static(CREATE.as_bytes());
    let notification = Notification::parse(bytes.clone()).unwrap();
    let mut group = c.benchmark_group("jmespath");
    group.throughput(Throughput::Elements(1));
    group.bench_function("v2-create/20-routes", |b| {
        b.iter(|| {
            let sinks = router.route(&Input::new(
                black_box(notification.document()),
                &Value::Null,
            ));
            assert_eq!(sinks.len(), 4);
            sinks
        })
    });
    group.bench_function("v2-create/parse-then-20-routes", |b| {
        b.iter(|| {
            let notification = Notification::parse(black_box(bytes.clone())).unwrap();
            router.route(&Input::new(notification.document(), &Value::Null))
        })
    });
    group.finish();
}

/// One route allowing 100,000 subscription ids: a listed notification, and one not listed.
fn allowlist(c: &mut Criterion) {
    let ids: Vec<String> = (0..100_000)
        .map(|i| format!("{i:08x}-2f0b-4c39-9c9e-2d1c7c0e7b11"))
        .collect();
    let listed = ids[54_321].clone();
    let route = RouteSpec {
        name: "allowed".into(),
        pattern: Some(json!({ "subscription_id": ids })),
        to: vec!["sink-0".into()],
        stop: false,
        fallback: false,
        accept_unsigned: false,
    };
    let router = Router::compile(&[route], vec!["sink-0".into()]).unwrap();
    let notification = Notification::parse(Bytes::from_static(CREATE.as_bytes())).unwrap();
    let mut matching = notification.document().clone();
    matching["subscription_id"] = json!(listed);
    let other = notification.document();
    let mut group = c.benchmark_group("allowlist");
    for (name, document, sinks) in [("matching", &matching, 1), ("not-matching", other, 0)] {
        group.bench_function(format!("100000-ids/{name}"), |b| {
            b.iter(|| {
                let routed = router.route(&Input::new(black_box(document), &Value::Null));
                assert_eq!(routed.len(), sinks);
                routed
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench, jmespath, allowlist);
criterion_main!(benches);
