//! Destinations of one name in two places: two SQS queues called alike in two regions and
//! accounts, two Pub/Sub topics called alike in two projects. With the ledger on and the second
//! destination missing at the first attempt, the DSS's retry delivers to it once it exists, and
//! each destination holds exactly one copy, whichever order the route names them in. The 202
//! bodies, the metric lines and `relay trace` tell the two apart.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use relay_core::Relay;
use relay_testkit::metrics::Lines;

use crate::common::{Encoding, config, dss_request, receive, sdk, send, serve, unique, v2};

/// A relay from `RELAY_CONFIG` at `file`, with the SQLite ledger at `ledger`, writing its metric
/// lines to `lines`; its callback URL.
async fn relay(file: &Path, ledger: &Path, lines: &Arc<Lines>) -> String {
    let config = config(&[
        ("RELAY_CONFIG", file.to_str().unwrap()),
        ("RELAY_LEDGER_URL", ledger.to_str().unwrap()),
    ]);
    let relay = Relay::from_config(config).await.expect("relay starts");
    serve(relay.with_metrics(Arc::clone(lines) as _)).await
}

/// A relay with two sinks, `east` and `west` (their tables), routed to in `order`, the SQLite
/// ledger, and a new notification for it.
struct Started {
    _dir: tempfile::TempDir,
    file: PathBuf,
    ledger: PathBuf,
    lines: Arc<Lines>,
    url: String,
    payload: String,
}

impl Started {
    /// A relay with two sinks of `kind`, `east` and `west`, whose `field` names each address.
    async fn new((kind, field): (&str, &str), [east, west]: [&str; 2], order: [&str; 2]) -> Self {
        let sink = |name: &str, address: &str| {
            format!("[sinks.{name}]\ntype = \"{kind}\"\n{field} = \"{address}\"\n")
        };
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("relay.toml");
        let text = two_sinks(&sink("east", east), &sink("west", west), order);
        std::fs::write(&file, text).unwrap();
        let ledger = dir.path().join("ledger.db");
        let lines = Arc::new(Lines::default());
        let url = relay(&file, &ledger, &lines).await;
        let payload = v2(&unique("sub"), &unique("bundle"), "CREATE", "t-1");
        Self {
            _dir: dir,
            file,
            ledger,
            lines,
            url,
            payload,
        }
    }
}

/// The retry once the west destination exists: 202 `published`, to west alone (east had
/// acknowledged), then 202 `duplicate`.
async fn retry_completes(url: &str, payload: &str, order: [&str; 2], [east, west]: [String; 2]) {
    let (status, body) = send(dss_request(url, payload, Encoding::Json)).await;
    let published = (status, &body["status"]);
    assert_eq!(published, (202, &"published".into()), "{order:?}: {body}");
    assert_eq!(
        deliveries(&body),
        [("east".into(), east, true), ("west".into(), west, false)],
        "{order:?}: the retry publishes to the destination that did not acknowledge, and only there"
    );
    let (status, body) = send(dss_request(url, payload, Encoding::Json)).await;
    let duplicate = (status, &body["status"]);
    assert_eq!(duplicate, (202, &"duplicate".into()), "{order:?}: {body}");
}

/// The configuration's two sinks and one route to both, in `order`.
fn two_sinks(east: &str, west: &str, order: [&str; 2]) -> String {
    format!(
        "{east}\n{west}\n[[routes]]\nname = \"both\"\nmatch = {{}}\nto = [\"{}\", \"{}\"]\n",
        order[0], order[1]
    )
}

/// Each delivery of a 202 answer: (configured name, resource, earlier).
fn deliveries(body: &serde_json::Value) -> Vec<(String, String, bool)> {
    let mut all: Vec<_> = body["deliveries"]
        .as_array()
        .unwrap_or_else(|| panic!("no deliveries: {body}"))
        .iter()
        .map(|d| {
            (
                d["sink"].as_str().unwrap().to_owned(),
                d["resource"].as_str().unwrap().to_owned(),
                d["earlier"] == true,
            )
        })
        .collect();
    all.sort();
    all
}

/// The resources the relay's publish lines name, by configured name.
fn published(lines: &Lines) -> Vec<(String, String, String)> {
    let mut all: Vec<_> = lines
        .all()
        .iter()
        .filter(|l| l["Publishes"] == 1)
        .map(|l| ["Sink", "Resource", "Result"].map(|f| l[f].as_str().unwrap().to_owned()))
        .map(|[s, r, o]| (s, r, o))
        .collect();
    all.sort();
    all
}

#[tokio::test]
async fn two_queues_of_one_name_in_two_regions_each_get_one_copy() {
    for order in [["west", "east"], ["east", "west"]] {
        let name = unique("orders");
        let east_sqs = crate::common::sqs().await;
        let east_url = crate::common::create_named_queue(&east_sqs, &name).await;
        let west_sdk = sdk()
            .await
            .into_builder()
            .region(aws_types::region::Region::new("eu-west-1"))
            .build();
        let west_sqs = aws_sdk_sqs::Client::new(&west_sdk);
        // The queues as users name them: on AWS hosts, in two regions and two accounts. The
        // SQS client goes to moto (AWS_ENDPOINT_URL) in each queue's region.
        let east_arn = format!("arn:aws:sqs:us-east-1:111111111111:{name}");
        let west_arn = format!("arn:aws:sqs:eu-west-1:222222222222:{name}");
        let queues = [
            format!("https://sqs.us-east-1.amazonaws.com/111111111111/{name}"),
            format!("https://sqs.eu-west-1.amazonaws.com/222222222222/{name}"),
        ];
        let started = Started::new(
            ("sqs", "queue_url"),
            queues.each_ref().map(String::as_str),
            order,
        )
        .await;
        let (file, ledger, lines) = (&started.file, &started.ledger, &started.lines);
        let (url, payload) = (&started.url, &started.payload);

        let (status, body) = send(dss_request(url, payload, Encoding::Json)).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (502, &"sink_failed".into()),
            "{order:?}: {body}"
        );

        let created = west_sqs
            .create_queue()
            .queue_name(&name)
            .send()
            .await
            .unwrap();
        let west_url = created.queue_url().unwrap().to_owned();
        retry_completes(url, payload, order, [east_arn.clone(), west_arn.clone()]).await;

        // Each queue holds one copy: after the first, two seconds more for a second to arrive.
        for (client, queue) in [(&east_sqs, &east_url), (&west_sqs, &west_url)] {
            let got = receive(client, queue, 1, Duration::from_secs(2)).await;
            assert_eq!(got.len(), 1, "{order:?}: one copy in {queue}");
        }
        let lines = published(lines);
        assert!(
            lines.contains(&("west".into(), west_arn.clone(), "permanent".into()))
                && lines.contains(&("west".into(), west_arn.clone(), "ok".into()))
                && lines.contains(&("east".into(), east_arn.clone(), "ok".into())),
            "{order:?}: {lines:?}"
        );
        assert_eq!(lines.len(), 3, "{order:?}: east published once: {lines:?}");

        let trace = trace(file, ledger, payload);
        for line in [format!("east {east_arn}"), format!("west {west_arn}")] {
            assert!(trace.contains(&line), "{order:?}: {line} in\n{trace}");
        }
    }
}

#[tokio::test]
async fn two_pubsub_topics_of_one_name_in_two_projects_each_get_one_copy() {
    use crate::pubsub::pull;
    for order in [["west", "east"], ["east", "west"]] {
        let topic = unique("orders");
        let (east, west) = (unique("project-a"), unique("project-b"));
        let (east_topic, east_sub) = crate::pubsub::topic_in(&east, &topic).await;
        let west_topic = format!("projects/{west}/topics/{topic}");
        let topics = [east_topic.as_str(), west_topic.as_str()];
        let started = Started::new(("pubsub", "topic"), topics, order).await;
        let lines = &started.lines;
        let (url, payload) = (&started.url, &started.payload);

        let (status, body) = send(dss_request(url, payload, Encoding::Json)).await;
        assert!(status == 502 || status == 503, "{order:?}: {status} {body}");

        let (_, west_sub) = crate::pubsub::topic_in(&west, &topic).await;
        let resource = |t: &str| format!("//pubsub.googleapis.com/{t}");
        retry_completes(
            url,
            payload,
            order,
            [resource(&east_topic), resource(&west_topic)],
        )
        .await;
        assert_eq!(pull(&east_sub, 1).await.len(), 1, "{order:?}");
        assert_eq!(pull(&west_sub, 1).await.len(), 1, "{order:?}");
        let east_ok = published(lines)
            .into_iter()
            .filter(|(s, r, o)| s == "east" && *r == resource(&east_topic) && o == "ok")
            .count();
        assert_eq!(east_ok, 1, "{order:?}: east published once");
    }
}

/// `relay trace` of `payload`'s bundle, with the relay's configuration and ledger.
fn trace(file: &Path, ledger: &Path, payload: &str) -> String {
    let document: serde_json::Value = serde_json::from_str(payload).unwrap();
    let bundle = document["match"]["bundle_uuid"].as_str().unwrap();
    let out = std::process::Command::new(relay_testkit::built_binary("relay"))
        .args(["trace", bundle])
        .env("RELAY_CONFIG", file)
        .env("RELAY_LEDGER_URL", ledger)
        .env("RELAY_HMAC_KEYS", r#"{"it-key": "integration-secret"}"#)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// moto's header naming the account a call is made in.
const ACCOUNT_HEADER: &str = "x-moto-account-id";

/// In moto's account `account`: a topic called `name`, and a queue subscribed to it with raw
/// delivery; the topic's ARN and the queue's URL.
async fn topic_in_account(account: &str, name: &str) -> (String, String) {
    let config = sdk().await;
    let (sns, sqs) = (
        aws_sdk_sns::Client::new(&config),
        aws_sdk_sqs::Client::new(&config),
    );
    let header = move |account: String| {
        move |r: &mut aws_smithy_runtime_api::http::Request| {
            r.headers_mut().insert(ACCOUNT_HEADER, account.clone());
        }
    };
    let topic = sns
        .create_topic()
        .name(name)
        .customize()
        .mutate_request(header(account.into()));
    let topic = topic.send().await.unwrap().topic_arn().unwrap().to_owned();
    let queue = sqs.create_queue().queue_name(unique("copies")).customize();
    let queue = queue
        .mutate_request(header(account.into()))
        .send()
        .await
        .unwrap();
    let queue = queue.queue_url().unwrap().to_owned();
    let name = queue.rsplit('/').next().unwrap();
    let queue_arn = format!("arn:aws:sqs:us-east-1:{account}:{name}");
    sns.subscribe()
        .topic_arn(&topic)
        .protocol("sqs")
        .endpoint(queue_arn)
        .attributes("RawMessageDelivery", "true")
        .customize()
        .mutate_request(header(account.into()))
        .send()
        .await
        .unwrap();
    (topic, queue)
}

/// How many messages the queue at `url` in `account` holds: read until one arrives (30 s at
/// most), then two seconds more.
async fn copies_in_account(account: &str, url: &str) -> usize {
    let sqs = aws_sdk_sqs::Client::new(&sdk().await);
    let started = std::time::Instant::now();
    let mut first: Option<std::time::Instant> = None;
    let mut got = 0;
    while started.elapsed() < Duration::from_secs(30)
        && first.is_none_or(|f| f.elapsed() < Duration::from_secs(2))
    {
        let account = account.to_owned();
        let out = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .customize()
            .mutate_request(move |r| {
                r.headers_mut().insert(ACCOUNT_HEADER, account.clone());
            })
            .send()
            .await
            .unwrap();
        got += out.messages().len();
        if got > 0 && first.is_none() {
            first = Some(std::time::Instant::now());
        }
    }
    got
}

#[tokio::test]
async fn two_sns_topics_of_one_name_in_two_accounts_each_get_one_copy() {
    for order in [["west", "east"], ["east", "west"]] {
        let name = unique("orders");
        let (east_account, west_account) = ("111111111111", "222222222222");
        let (east_topic, east_queue) = topic_in_account(east_account, &name).await;
        let west_topic = format!("arn:aws:sns:us-east-1:{west_account}:{name}");
        let topics = [east_topic.as_str(), west_topic.as_str()];
        let started = Started::new(("sns", "topic_arn"), topics, order).await;
        let (url, payload) = (&started.url, &started.payload);

        let (status, body) = send(dss_request(url, payload, Encoding::Json)).await;
        assert!(status == 502 || status == 503, "{order:?}: {status} {body}");

        let (created, west_queue) = topic_in_account(west_account, &name).await;
        assert_eq!(created, west_topic);
        retry_completes(
            url,
            payload,
            order,
            [east_topic.clone(), west_topic.clone()],
        )
        .await;
        assert_eq!(
            copies_in_account(east_account, &east_queue).await,
            1,
            "{order:?}"
        );
        assert_eq!(
            copies_in_account(west_account, &west_queue).await,
            1,
            "{order:?}"
        );
    }
}
