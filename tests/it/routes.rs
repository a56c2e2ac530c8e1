//! The stored routes in S3 (moto) and Cloud Storage (fake-gcs-server): conditional reads,
//! compare-and-swap writes, and two `relay split` writers at once losing no update.

use relay_core::cloud::Cloud;
use relay_core::live::store::{GcsStore, S3Store};

use crate::common;

/// A new bucket on moto.
async fn bucket(name: &str) -> String {
    let sdk = common::sdk().await;
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .build(),
    );
    let bucket = format!("{name}-{}", std::process::id());
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    bucket
}

/// A new bucket on fake-gcs-server (`STORAGE_EMULATOR_HOST`), made through its JSON API.
async fn gcs_bucket(name: &str) -> String {
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::Client;
    let host = std::env::var("STORAGE_EMULATOR_HOST").expect("source infra/local/env.sh");
    let bucket = format!("{name}-{}", std::process::id());
    let client: Client<_, Full<bytes::Bytes>> =
        Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
    let request = http::Request::post(format!("http://{host}/storage/v1/b?project=test"))
        .header("content-type", "application/json")
        .body(Full::new(bytes::Bytes::from(format!(
            r#"{{"name": "{bucket}"}}"#
        ))))
        .unwrap();
    let response = client.request(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(status.is_success(), "{status}: {body:?}");
    bucket
}

#[tokio::test]
async fn s3_reads_are_conditional_and_writes_compare_and_swap() {
    let bucket = bucket("routes-cas").await;
    relay_testkit::stores::reads_are_conditional_and_writes_compare_and_swap(
        &S3Store::new(&Cloud::default(), bucket, "routes.toml".into()).await,
    )
    .await;
}

#[tokio::test]
async fn gcs_reads_are_conditional_and_writes_compare_and_swap() {
    let bucket = gcs_bucket("routes-cas").await;
    let store = GcsStore::new(bucket, "routes.toml".into()).await.unwrap();
    relay_testkit::stores::reads_are_conditional_and_writes_compare_and_swap(&store).await;
}

/// Two `relay split` writers at once on `routes.toml` in `bucket` (a URL without the key) lose
/// no update.
async fn two_writers_lose_no_update(bucket: &str) {
    let url = format!("{bucket}/routes.toml");
    tokio::task::spawn_blocking(move || {
        relay_testkit::stores::two_split_writers_lose_no_update(&url)
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_on_s3_lose_no_update() {
    two_writers_lose_no_update(&format!("s3://{}", bucket("routes-writers").await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_on_gcs_lose_no_update() {
    two_writers_lose_no_update(&format!("gs://{}", gcs_bucket("routes-writers").await)).await;
}

/// The queues on moto whose names start with `prefix`.
async fn queues(prefix: &str) -> Vec<String> {
    let sqs = common::sqs().await;
    let listed = sqs
        .list_queues()
        .queue_name_prefix(prefix)
        .send()
        .await
        .unwrap();
    listed.queue_urls().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_queues_made_by_create_go_with_their_split() {
    let sqs = common::sqs().await;
    let main = sqs
        .create_queue()
        .queue_name(format!("split-main-{}", std::process::id()))
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    let prefix = format!("t{}-split-", std::process::id());
    let relay = |args: &[&str]| relay_testkit::stores::relay_with_routes_ok(&routes, args);
    let start = |name: &str, ttl: &str| {
        relay(&[
            "split",
            "start",
            name,
            "--ttl",
            ttl,
            "--create",
            "--like",
            &main,
            "--split-prefix",
            &prefix,
            "--match",
            r#"{"match":{"bundle_uuid":[{"prefix":"aa"}]}}"#,
        ])
    };

    let out = start("alice", "1h");
    let made = queues(&format!("{prefix}alice-")).await;
    assert_eq!(made.len(), 1, "{out}");
    assert!(out.contains(&made[0]), "{out}");
    let listed = relay(&["split", "list", "--json"]);
    assert!(listed.contains(&made[0]), "{listed}");

    relay(&["split", "stop", "alice"]);
    assert_eq!(
        queues(&format!("{prefix}alice-")).await,
        Vec::<String>::new()
    );

    start("bob", "1s");
    assert_eq!(queues(&format!("{prefix}bob-")).await.len(), 1);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let gc = relay(&["split", "gc"]);
    assert!(gc.contains("removed the expired split bob"), "{gc}");
    assert_eq!(queues(&format!("{prefix}bob-")).await, Vec::<String>::new());
}

/// Whether the emulator has the topic `name`.
async fn topic_exists(name: &str) -> bool {
    let topics = crate::pubsub::emulator_client!(google_cloud_pubsub::client::TopicAdmin);
    topics.get_topic().set_topic(name).send().await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_topics_made_by_create_go_with_their_split() {
    let (main, _) = crate::pubsub::topic_with_subscription().await;
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    let relay = |args: &[&str]| relay_testkit::stores::relay_with_routes(&routes, args);
    let start = [
        "split",
        "start",
        "carol",
        "--ttl",
        "1h",
        "--create",
        "--like",
        &main,
        "--split-prefix",
        "split-",
        "--match",
        r#"{"match":{"bundle_uuid":[{"prefix":"aa"}]}}"#,
    ];
    // Without the relay's member the topic would take nothing from it: refused, nothing made.
    let refused = relay(&start);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--grant-to"));
    assert!(!routes.exists());

    let started = relay(
        &[
            &start[..],
            &[
                "--grant-to",
                "serviceAccount:relay@test-project.iam.gserviceaccount.com",
            ],
        ]
        .concat(),
    );
    let stdout = String::from_utf8_lossy(&started.stdout).into_owned();
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let project = main.split('/').nth(1).unwrap();
    let topic = stdout
        .split_whitespace()
        .find(|w| w.starts_with(&format!("projects/{project}/topics/split-carol-")))
        .unwrap_or_else(|| panic!("{stdout}"))
        .to_owned();
    assert!(topic_exists(&topic).await, "{stdout}");
    assert!(stdout.contains("subscriptions/split-carol-"), "{stdout}");

    let stopped = relay(&["split", "stop", "carol"]);
    assert!(
        stopped.status.success(),
        "{}",
        String::from_utf8_lossy(&stopped.stderr)
    );
    assert!(!topic_exists(&topic).await);
}
