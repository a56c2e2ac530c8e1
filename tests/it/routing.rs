//! examples/relay.toml against the emulators: a mixed stream of notifications, routed by event
//! type and by replica (the callback's query string), lands in exactly the right queues.

use std::collections::BTreeSet;
use std::time::Duration;

use aws_sdk_sqs::types::MessageSystemAttributeName;
use serde_json::json;

use crate::common::{
    Encoding, attribute, config, create_named_queue, dss_request, receive, send, serve, sqs, unique,
};

/// The sample configuration, with queue names made unique for this run.
fn example_with(suffix: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/relay.toml");
    std::fs::read_to_string(path)
        .unwrap()
        .replace("/dss-analysis\"", &format!("/dss-analysis-{suffix}\""))
        .replace(
            "/dss-indexer.fifo\"",
            &format!("/dss-indexer-{suffix}.fifo\""),
        )
        .replace(
            "/dss-gcp-replica\"",
            &format!("/dss-gcp-replica-{suffix}\""),
        )
}

/// Notification `i` of the stream: its payload and replica.
fn notification(i: usize, subscription: &str) -> (String, &'static str) {
    let bundle = format!("bundle-{i:03}");
    let payload = match i % 5 {
        0 | 1 => {
            let project = if i.is_multiple_of(2) {
                "Glioblastoma_medium_1000_cells"
            } else {
                "Tabula_muris"
            };
            json!({"bundle_url": "https://dss.data.humancellatlas.org/v1/bundles/x", "subscription_id": subscription,
                "event_type": "CREATE", "match": {"bundle_uuid": bundle, "bundle_version": "2019-11-15T202303.689105Z"},
                "transaction_id": format!("t{i}"), "attachments": {"project_shortname": project}})
        }
        2 | 3 => {
            json!({"subscription_id": subscription, "event_type": if i % 5 == 2 { "TOMBSTONE" } else { "DELETE" },
            "match": {"bundle_uuid": bundle, "bundle_version": "2019-11-15T202303.689105Z"}, "transaction_id": format!("t{i}")})
        }
        _ => {
            json!({"transaction_id": format!("t{i}"), "subscription_id": subscription, "es_query": {"query": {}},
            "match": {"bundle_uuid": bundle, "bundle_version": "2018-06-04T225830.079725Z"}})
        }
    };
    (
        payload.to_string(),
        if i.is_multiple_of(4) { "gcp" } else { "aws" },
    )
}

/// Which queues notification `i` belongs in, by the rules the sample file states in prose.
fn expected(i: usize) -> (bool, bool, bool) {
    let (_, replica) = notification(i, "s");
    if replica == "gcp" {
        return (false, false, true);
    }
    match i % 5 {
        0 | 1 => (true, true, false),
        _ => (false, true, false),
    }
}

#[tokio::test]
async fn a_mixed_stream_lands_in_exactly_the_right_queues() {
    let sqs = sqs().await;
    let suffix = unique("r");
    let dir = std::env::temp_dir().join(unique("relay-toml"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("relay.toml");
    std::fs::write(&file, example_with(&suffix)).unwrap();
    let mut queues = Vec::new();
    for name in [
        format!("dss-analysis-{suffix}"),
        format!("dss-indexer-{suffix}.fifo"),
        format!("dss-gcp-replica-{suffix}"),
    ] {
        queues.push(create_named_queue(&sqs, &name).await);
    }
    let relay = relay_core::Relay::from_config(config(&[("RELAY_CONFIG", file.to_str().unwrap())]))
        .await
        .unwrap();
    let url = serve(relay).await;
    let base = url.split('?').next().unwrap().to_owned();
    let subscription = unique("sub");

    for chunk in (0..100).collect::<Vec<_>>().chunks(10) {
        let sends = chunk.iter().map(|&i| {
            let (payload, replica) = notification(i, &subscription);
            let encoding = if i % 3 == 0 {
                Encoding::Multipart
            } else {
                Encoding::Json
            };
            tokio::spawn(send(dss_request(
                &format!("{base}?replica={replica}"),
                &payload,
                encoding,
            )))
        });
        for (i, sent) in chunk.iter().zip(sends.collect::<Vec<_>>()) {
            let (status, body) = sent.await.unwrap();
            assert_eq!(status, 202, "notification {i}: {body}");
            assert_eq!(body["status"], "published", "notification {i}: {body}");
        }
    }

    let want = |pick: fn((bool, bool, bool)) -> bool| -> BTreeSet<String> {
        (0..100)
            .filter(|&i| pick(expected(i)))
            .map(|i| format!("bundle-{i:03}"))
            .collect()
    };
    let wanted = [want(|e| e.0), want(|e| e.1), want(|e| e.2)];
    for ((queue, wanted), name) in
        queues
            .iter()
            .zip(&wanted)
            .zip(["analysis", "indexer", "gcp-replica"])
    {
        let messages = receive(&sqs, queue, wanted.len(), Duration::from_secs(1)).await;
        let got: Vec<String> = messages
            .iter()
            .map(|m| attribute(m, "dss.bundle_uuid").unwrap().to_owned())
            .collect();
        let unique_got: BTreeSet<String> = got.iter().cloned().collect();
        assert_eq!(
            got.len(),
            unique_got.len(),
            "{name}: a notification arrived twice"
        );
        assert_eq!(&unique_got, wanted, "{name}: holds exactly its share");
        println!("routing: {name} holds {} of 100", got.len());
        for message in &messages {
            match name {
                "analysis" => assert_eq!(attribute(message, "consumer"), Some("analysis")),
                "gcp-replica" => {
                    // Only the selected attributes (v1 notifications have no event type).
                    let names: BTreeSet<&str> = message
                        .message_attributes()
                        .unwrap()
                        .keys()
                        .map(String::as_str)
                        .collect();
                    let selected = BTreeSet::from([
                        "relay.dedup_key",
                        "dss.subscription_id",
                        "dss.bundle_uuid",
                        "dss.event_type",
                    ]);
                    assert!(
                        names.is_subset(&selected) && names.contains("relay.dedup_key"),
                        "{names:?}"
                    );
                }
                _ => {
                    let group = message
                        .attributes()
                        .unwrap()
                        .get(&MessageSystemAttributeName::MessageGroupId);
                    assert_eq!(
                        group.map(String::as_str),
                        attribute(message, "dss.bundle_uuid")
                    );
                }
            }
        }
    }
    // Glioblastoma creates matched two routes that share the analysis sink: published once.
    assert!(wanted[0].contains("bundle-010") && expected(10) == (true, true, false));
}
