//! HMAC keys read from Secrets Manager at start (`RELAY_HMAC_KEYS_SECRET_ARN`), on moto.

use relay_core::{Config, Relay};

use crate::common::{
    Encoding, create_queue, dss_request, require_emulator_env, sdk, send, serve, sqs, unique, v2,
};

async fn relay_with_secret(
    secret_string: &str,
    queue: &str,
) -> Result<String, relay_core::StartError> {
    let client = aws_sdk_secretsmanager::Client::new(&sdk().await);
    let arn = client
        .create_secret()
        .name(unique("dss-relay-hmac"))
        .secret_string(secret_string)
        .send()
        .await
        .unwrap()
        .arn()
        .unwrap()
        .to_owned();
    require_emulator_env();
    let vars = [
        ("RELAY_HMAC_KEYS_SECRET_ARN", arn.as_str()),
        ("RELAY_SQS_QUEUE_URL", queue),
    ];
    let config = Config::from_vars(|n| {
        vars.iter()
            .find(|(k, _)| *k == n)
            .map(|(_, v)| (*v).to_owned())
    })
    .unwrap();
    Ok(serve(Relay::from_config(config).await?).await)
}

#[tokio::test]
async fn keys_come_from_the_secret_as_json_or_plain_text() {
    let queue = create_queue(&sqs().await, false).await;
    let payload = v2(&unique("sub"), "b1", "CREATE", "t1");
    for secret_string in [r#"{"it-key": "integration-secret"}"#, "integration-secret"] {
        let url = relay_with_secret(secret_string, &queue).await.unwrap();
        let (status, body) = send(dss_request(&url, &payload, Encoding::Json)).await;
        assert_eq!(status, 202, "{secret_string}: {body}");
    }
    // A secret holding another key: the test's signature does not verify.
    let url = relay_with_secret(r#"{"it-key": "another-secret"}"#, &queue)
        .await
        .unwrap();
    let (status, body) = send(dss_request(&url, &payload, Encoding::Json)).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("bad_signature"))
    );
}

#[tokio::test]
async fn a_missing_secret_stops_the_relay_at_start() {
    require_emulator_env();
    let queue = create_queue(&sqs().await, false).await;
    let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:does-not-exist";
    let vars = [
        ("RELAY_HMAC_KEYS_SECRET_ARN", arn),
        ("RELAY_SQS_QUEUE_URL", queue.as_str()),
    ];
    let config = Config::from_vars(|n| {
        vars.iter()
            .find(|(k, _)| *k == n)
            .map(|(_, v)| (*v).to_owned())
    })
    .unwrap();
    let error = Relay::from_config(config).await.unwrap_err().to_string();
    assert!(
        error.starts_with("RELAY_HMAC_KEYS_SECRET_ARN: cannot read the secret"),
        "{error}"
    );
}

/// The configuration of a relay whose `github` source reads its secret from `arn`, with a file
/// sink in `dir`.
fn github_source_config(dir: &std::path::Path, arn: &str) -> String {
    format!(
        "[sources.github]\nscheme = \"github\"\nsecret_arn = \"{arn}\"\n\n[sinks.out]\ntype = \"file\"\npath = \"{}\"\n\n[[routes]]\nname = \"all\"\nto = [\"out\"]\n",
        dir.join("out.jsonl").display()
    )
}

/// A relay started with `RELAY_CONFIG` = `location` (a file, or a secret read at start).
async fn relay_from(location: &str) -> Result<relay_core::Relay, relay_core::StartError> {
    require_emulator_env();
    relay_core::bootstrap::fetch_config_file(Some(location)).await?;
    let config = Config::from_vars(|n| match n {
        "RELAY_CONFIG" => Some(location.to_owned()),
        _ => None,
    })
    .unwrap_or_else(|e| panic!("{e}"));
    Relay::from_config(config).await
}

/// A relay whose `github` source reads its secret from `arn`, with a file sink in `dir`.
async fn github_source_relay(
    dir: &std::path::Path,
    arn: &str,
) -> Result<relay_core::Relay, relay_core::StartError> {
    let file = dir.join("relay.toml");
    std::fs::write(&file, github_source_config(dir, arn)).unwrap();
    relay_from(&file.display().to_string()).await
}

async fn create_secret(name: &str, value: &str) -> String {
    let client = aws_sdk_secretsmanager::Client::new(&sdk().await);
    client
        .create_secret()
        .name(unique(name))
        .secret_string(value)
        .send()
        .await
        .unwrap()
        .arn()
        .unwrap()
        .to_owned()
}

/// A request GitHub signed with `secret`.
fn github_request(body: &'static [u8], secret: &str) -> http::Request<bytes::Bytes> {
    use relay_core::schemes::{Scheme, SigningKey};
    let key = SigningKey::Hmac {
        key_id: None,
        secret: relay_core::verify::Secret::new(secret).into(),
    };
    let headers = relay_core::schemes::GITHUB
        .sign(
            body,
            relay_core::schemes::Signer::new(&key, std::time::SystemTime::now(), Some("d-1")),
        )
        .unwrap();
    let mut builder = http::Request::post("/github").header("content-type", "application/json");
    for (name, value) in headers {
        builder = builder.header(name, value);
    }
    builder.body(bytes::Bytes::from_static(body)).unwrap()
}

#[tokio::test]
async fn a_sources_keys_come_from_its_secret_arn() {
    let arn = create_secret("github-webhook", r#"{"2026-12": "github-secret"}"#).await;
    let dir = tempfile::tempdir().unwrap();
    let relay = github_source_relay(dir.path(), &arn).await.unwrap();
    let body = br#"{"zen": "Keep it logically awesome."}"#;
    let request = |secret: &str| github_request(body, secret);
    let outcome = relay.accept(request("github-secret")).await;
    assert_eq!(
        outcome.status,
        202,
        "{}",
        String::from_utf8_lossy(&outcome.body)
    );
    let outcome = relay.accept(request("another-secret")).await;
    assert_eq!(outcome.status, 401);
    let lines = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 1);

    let missing = "arn:aws:secretsmanager:us-east-1:123456789012:secret:does-not-exist";
    let error = github_source_relay(dir.path(), missing)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("RELAY_CONFIG: source \"github\": arn:aws:secretsmanager:"),
        "{error}"
    );
}

#[tokio::test]
async fn the_configuration_file_may_be_a_secret_read_at_start() {
    let github = create_secret("github-webhook", "github-secret").await;
    let dir = tempfile::tempdir().unwrap();
    let config = create_secret("relay-config", &github_source_config(dir.path(), &github)).await;
    let relay = relay_from(&config).await.unwrap_or_else(|e| panic!("{e}"));
    let body = br#"{"zen": "Design for failure."}"#;
    let outcome = relay.accept(github_request(body, "github-secret")).await;
    assert_eq!(
        outcome.status,
        202,
        "{}",
        String::from_utf8_lossy(&outcome.body)
    );
    let lines = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 1);

    // A configuration secret that cannot be read stops the relay, naming it.
    let missing = "arn:aws:secretsmanager:us-east-1:123456789012:secret:no-config";
    let error = relay_from(missing).await.unwrap_err().to_string();
    assert!(
        error.contains(&format!("RELAY_CONFIG: {missing}: cannot read the secret")),
        "{error}"
    );
}
