//! The delivery ledger through the production path: relay-gcf binaries as processes, sharing a
//! ledger in moto's DynamoDB or in Google's Firestore emulator, each notification routed to a
//! queue in moto and to a file. Two relays sent one notification 50 times at once deliver it
//! once to each destination; a ledger that is down or throttled is a 503 and nothing is
//! published.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use relay_testkit::dynamodb::create_ledger_table;
use relay_testkit::{RelayProcess, built_binary, free_port};

use crate::common::{
    Encoding, KEY_ID, SECRET, create_queue, dss_request, dynamodb_answering, receive, sdk, sqs,
    unique, v2,
};

/// How many times the notification is sent at once, half to each relay.
const SENDS: usize = 50;

/// The project the tests use in the Firestore emulator (it accepts any).
fn firestore_project() -> String {
    std::env::var("PUBSUB_PROJECT_ID").unwrap_or_else(|_| "test-project".into())
}

/// A new ledger table in moto; its `dynamodb://` URL.
async fn dynamodb_ledger() -> String {
    let name = unique("ledger");
    create_ledger_table(&sdk().await, &name).await;
    format!("dynamodb://{name}")
}

/// A collection no other test uses, in the Firestore emulator; its `firestore://` URL.
fn firestore_ledger() -> String {
    assert!(
        std::env::var_os("FIRESTORE_EMULATOR_HOST").is_some(),
        "FIRESTORE_EMULATOR_HOST is not set: source infra/local/env.sh"
    );
    format!(
        "firestore://{}/(default)/{}",
        firestore_project(),
        unique("ledger")
    )
}

/// The two destinations every notification is routed to: a fresh queue in moto and a file,
/// named in a `RELAY_CONFIG` file with one route to both.
struct Destinations {
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    file: PathBuf,
    config: PathBuf,
    _dir: tempfile::TempDir,
}

impl Destinations {
    async fn new() -> Self {
        let sqs = sqs().await;
        let queue_url = create_queue(&sqs, false).await;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("notifications.jsonl");
        let config = dir.path().join("relay.toml");
        std::fs::write(
            &config,
            format!(
                "[sinks.queue]\ntype = \"sqs\"\nqueue_url = \"{queue_url}\"\n\n\
                 [sinks.archive]\ntype = \"file\"\npath = \"{}\"\n\n\
                 [[routes]]\nname = \"both\"\nto = [\"queue\", \"archive\"]\n",
                file.display()
            ),
        )
        .expect("the configuration is written");
        Self {
            sqs,
            queue_url,
            file,
            config,
            _dir: dir,
        }
    }

    /// The queue's messages (received until `want` arrived, then for a linger more).
    async fn queue(&self, want: usize) -> Vec<aws_sdk_sqs::types::Message> {
        receive(&self.sqs, &self.queue_url, want, Duration::from_secs(2)).await
    }

    /// The file's lines.
    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.file)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// relay-gcf, the binary built next to this test, as a process: the test's environment plus
/// the key, `config`, `ledger_url` and `envs`; returned once it listens.
async fn relay(config: &Path, ledger_url: &str, envs: &[(&str, String)]) -> RelayProcess {
    let mut vars: Vec<(String, String)> = vec![
        (
            "RELAY_HMAC_KEYS".into(),
            format!(r#"{{"{KEY_ID}": "{SECRET}"}}"#),
        ),
        ("RELAY_CONFIG".into(), config.display().to_string()),
        ("RELAY_LEDGER_URL".into(), ledger_url.to_owned()),
        ("RELAY_LOG_FORMAT".into(), "json".into()),
    ];
    vars.extend(envs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
    let binary = built_binary("relay-gcf");
    tokio::task::spawn_blocking(move || RelayProcess::start(binary, vars))
        .await
        .expect("the relay starts")
}

/// The callback URL of a relay process.
fn callback(relay: &RelayProcess) -> String {
    format!("{}/dss/notify?replica=aws", relay.url())
}

/// One answer: its status, its `Retry-After` header and its JSON body.
#[derive(Debug)]
struct Answer {
    status: u16,
    retry_after: Option<String>,
    body: serde_json::Value,
}

impl Answer {
    /// `published`, `duplicate` or `filtered` for a 2xx, the error code otherwise.
    fn kind(&self) -> &str {
        self.body["status"]
            .as_str()
            .or_else(|| self.body["error"]["code"].as_str())
            .unwrap_or("?")
    }
}

/// Sends `payload` signed, as the DSS does, to `url`.
async fn send(client: &Client<HttpConnector, Full<Bytes>>, url: &str, payload: &str) -> Answer {
    let response = client
        .request(dss_request(url, payload, Encoding::Json))
        .await
        .expect("the relay answered");
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(http::header::RETRY_AFTER)
        .map(|v| v.to_str().unwrap().to_owned());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        retry_after,
        body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
    }
}

fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Two relays sharing the ledger at `ledger_url`: one notification sent [`SENDS`] times at
/// once, half to each, is published once; the attempts refused while it was being delivered
/// are retried until they get a 2xx, all `duplicate`; each destination holds it once.
async fn two_relays_deliver_each_destination_once(ledger_url: &str) {
    let destinations = Destinations::new().await;
    let a = relay(&destinations.config, ledger_url, &[]).await;
    let b = relay(&destinations.config, ledger_url, &[]).await;
    let urls = [callback(&a), callback(&b)];
    let payload = v2(
        &unique("subscription"),
        &unique("bundle"),
        "CREATE",
        &unique("transaction"),
    );
    let client = client();

    let sends = (0..SENDS).map(|i| {
        let (client, url, payload) = (client.clone(), urls[i % 2].clone(), payload.clone());
        tokio::spawn(async move { (i % 2, send(&client, &url, &payload).await) })
    });
    let answers: Vec<(usize, Answer)> = futures_util::future::join_all(sends)
        .await
        .into_iter()
        .map(|joined| joined.expect("the send ran"))
        .collect();
    // How many of each answer each relay gave, for the failure messages.
    let summary = |answers: &[(usize, Answer)]| {
        let mut counts = std::collections::BTreeMap::<String, usize>::new();
        for (relay, answer) in answers {
            let kind = format!("relay {relay}: {} {}", answer.status, answer.kind());
            *counts.entry(kind).or_default() += 1;
        }
        format!("{counts:?}")
    };
    for (_, answer) in &answers {
        let allowed = matches!(
            (answer.status, answer.kind()),
            (202, "published") | (202, "duplicate") | (503, "in_progress")
        );
        assert!(allowed, "{answer:?}\nall: {}", summary(&answers));
        if answer.status == 503 {
            assert!(answer.retry_after.is_some(), "{answer:?}");
        }
    }
    let published = answers
        .iter()
        .filter(|(_, a)| a.kind() == "published")
        .count();
    assert_eq!(published, 1, "{}", summary(&answers));

    // As the DSS would: each refused attempt is sent again until it gets a 2xx.
    for (relay, answer) in answers.iter().filter(|(_, a)| a.status == 503) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = send(&client, &urls[*relay], &payload).await;
        while last.status == 503 && Instant::now() < deadline {
            assert_eq!(last.kind(), "in_progress", "{last:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
            last = send(&client, &urls[*relay], &payload).await;
        }
        assert_eq!(
            (last.status, last.kind()),
            (202, "duplicate"),
            "the retry of {answer:?}: {last:?}"
        );
    }

    let messages = destinations.queue(1).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0].body(), Some(payload.as_str()));
    let lines = destinations.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line: serde_json::Value = serde_json::from_str(&lines[0]).expect("a JSON line");
    assert_eq!(line["payload"].as_str(), Some(payload.as_str()), "{line}");
    drop((a, b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_sharing_one_dynamodb_ledger_deliver_each_destination_once() {
    two_relays_deliver_each_destination_once(&dynamodb_ledger().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_sharing_one_firestore_ledger_deliver_each_destination_once() {
    two_relays_deliver_each_destination_once(&firestore_ledger()).await;
}

/// A relay whose ledger at `ledger_url` does not answer (the environment `envs` points it
/// elsewhere): a notification is 503 `ledger_unavailable` with `Retry-After`, and neither
/// destination gets it.
async fn a_ledger_that_is_down_is_a_503(ledger_url: &str, envs: &[(&str, String)]) {
    let destinations = Destinations::new().await;
    let relay = relay(&destinations.config, ledger_url, envs).await;
    let payload = v2(
        &unique("subscription"),
        &unique("bundle"),
        "CREATE",
        &unique("transaction"),
    );
    let answer = send(&client(), &callback(&relay), &payload).await;
    assert_eq!(
        (answer.status, answer.kind()),
        (503, "ledger_unavailable"),
        "{answer:?}\n{}",
        relay.stderr()
    );
    assert!(answer.retry_after.is_some(), "{answer:?}");
    let messages = destinations.queue(0).await;
    assert!(messages.is_empty(), "published to the queue: {messages:?}");
    let lines = destinations.lines();
    assert!(lines.is_empty(), "published to the file: {lines:?}");
    drop(relay);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamodb_ledger_that_is_down_is_a_503_and_no_sink_is_called() {
    let closed = format!("http://127.0.0.1:{}", free_port());
    a_ledger_that_is_down_is_a_503(
        &dynamodb_ledger().await,
        &[("AWS_ENDPOINT_URL_DYNAMODB", closed)],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_dynamodb_ledger_is_a_503_and_no_sink_is_called() {
    let (endpoint, calls, server) =
        dynamodb_answering(400, "ProvisionedThroughputExceededException").await;
    a_ledger_that_is_down_is_a_503(
        &dynamodb_ledger().await,
        &[("AWS_ENDPOINT_URL_DYNAMODB", endpoint)],
    )
    .await;
    assert!(
        calls.load(Ordering::SeqCst) >= 1,
        "the relay never called the throttled ledger"
    );
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_firestore_ledger_that_is_down_is_a_503_and_no_sink_is_called() {
    let closed = format!("127.0.0.1:{}", free_port());
    a_ledger_that_is_down_is_a_503(&firestore_ledger(), &[("FIRESTORE_EMULATOR_HOST", closed)])
        .await;
}
