//! The stored routes in S3, on moto: conditional reads, compare-and-swap writes, and two
//! `relay split` writers at once losing no update.

use std::process::Command;

use relay_core::live::store::{Fetched, S3Store, Store, WriteError};

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

#[tokio::test]
async fn s3_reads_are_conditional_and_writes_compare_and_swap() {
    let bucket = bucket("routes-cas").await;
    let store = S3Store::new(bucket, "routes.toml".into()).await;
    assert_eq!(store.read(None).await.unwrap(), Fetched::Missing);
    let first = store.write(None, "a = 1\n").await.unwrap();
    assert!(matches!(
        store.write(None, "a = 2\n").await,
        Err(WriteError::Conflict)
    ));
    assert_eq!(store.read(Some(&first)).await.unwrap(), Fetched::Unchanged);
    let second = store.write(Some(&first), "a = 3\n").await.unwrap();
    assert_ne!(first, second);
    assert!(matches!(
        store.write(Some(&first), "a = 4\n").await,
        Err(WriteError::Conflict)
    ));
    assert_eq!(
        store.read(Some(&first)).await.unwrap(),
        Fetched::Document {
            text: "a = 3\n".into(),
            version: second
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_on_s3_lose_no_update() {
    const EACH: usize = 50;
    let url = format!("s3://{}/routes.toml", bucket("routes-writers").await);
    let writers: Vec<_> = ["w1", "w2"]
        .into_iter()
        .map(|writer| {
            let url = url.clone();
            std::thread::spawn(move || {
                for i in 0..EACH {
                    let name = format!("{writer}-{i}");
                    let out = Command::new(relay_testkit::built_binary("relay"))
                        .args(["split", "start", &name, "--routes", &url, "--ttl", "1h"])
                        .args(["--match", r#"{"match":{"bundle_uuid":[{"prefix":"aa"}]}}"#])
                        .args(["--file", &format!("/tmp/{name}.jsonl")])
                        .env_remove("RELAY_CONFIG")
                        .output()
                        .unwrap();
                    assert!(
                        out.status.success(),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let out = Command::new(relay_testkit::built_binary("relay"))
        .args(["split", "list", "--json", "--routes", &url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2 * EACH, "{listed}");
}
