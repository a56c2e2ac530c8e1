//! What infra/local/moto-apply.sh deployed to moto (terraform/examples/aws-sqs, with a GitHub
//! source in `relay_config` and its secret in `source_secret_arns`), run as Lambda would run it:
//! relay-lambda's handler, started with the function's own environment as moto's Lambda keeps
//! it (its configuration file read from the module's Secrets Manager secret, its keys from the
//! module's secrets, with the role's grants as the module wrote them), and invoked with Function
//! URL events, as `cargo lambda invoke` sends them.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use relay_core::Relay;
use relay_core::schemes::{Scheme, Signer, SigningKey};
use relay_core::verify::Secret;
use serde_json::Value;

use crate::common::{receive, require_emulator_env, sdk, sqs, unique, v2};
use crate::lambda::{dss_headers, function_url_event_with};

/// What moto-apply.sh wrote: the example's outputs, the function's variables and the GitHub
/// secret.
fn deployment() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/moto/aws-sqs.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: apply the example to moto first with infra/local/moto-apply.sh (make test does)",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap()
}

/// The relay as the deployed function starts: its variables, then the file its RELAY_CONFIG
/// names, read from Secrets Manager.
async fn deployed_relay(environment: &BTreeMap<String, String>) -> Relay {
    let config = environment.get("RELAY_CONFIG").map(String::as_str);
    assert!(
        config.is_some_and(relay_core::config::is_secret_arn),
        "relay_config deploys a secret: {config:?}"
    );
    relay_core::bootstrap::fetch_config_file(config)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let config = relay_core::Config::from_vars(|name| environment.get(name).cloned())
        .unwrap_or_else(|e| panic!("{e}"));
    Relay::from_config(config)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The HMAC secret the module generated, as a DSS subscription registers it.
async fn hmac_secret(arn: &str, key_id: &str) -> String {
    let client = aws_sdk_secretsmanager::Client::new(&sdk().await);
    let value = client
        .get_secret_value()
        .secret_id(arn)
        .send()
        .await
        .unwrap();
    let keys: Value = serde_json::from_str(value.secret_string().unwrap()).unwrap();
    keys[key_id].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn the_example_applied_to_moto_takes_the_dss_and_a_github_delivery() {
    require_emulator_env();
    let deployed = deployment();
    let environment: BTreeMap<String, String> =
        serde_json::from_value(deployed["environment"].clone()).unwrap();
    let outputs = &deployed["outputs"];
    let relay = deployed_relay(&environment).await;
    // A JSON POST to `path` (with its query), signed with `headers`, answered 202.
    let accepted = async |path, body: &str, headers: &[(String, String)]| {
        let (at, json) = (Some(path), "application/json");
        let event = function_url_event_with(
            "dss-v2-create.json",
            at,
            body.as_bytes(),
            json,
            false,
            headers,
        );
        let response = relay_lambda::handle(&relay, event).await;
        assert_eq!(
            response.status().as_u16(),
            202,
            "{path:?}: {:?}",
            response.body()
        );
    };

    // A DSS notification, signed with the secret and key id the module made.
    let key_id = outputs["hmac_key_id"].as_str().unwrap();
    let secret = hmac_secret(outputs["hmac_secret_arn"].as_str().unwrap(), key_id).await;
    let dss = v2(&unique("sub"), &unique("bundle"), "CREATE", "t1");
    let headers = dss_headers(key_id, &secret, dss.as_bytes());
    accepted(("/", "replica=aws"), &dss, &headers).await;

    // A GitHub delivery, signed with the secret its owner put in Secrets Manager.
    let github = format!(
        r#"{{"zen": "Approachable is better than simple.", "hook_id": "{}"}}"#,
        unique("hook")
    );
    let key = SigningKey::Hmac {
        key_id: None,
        secret: Secret::new(deployed["github_secret"]["value"].as_str().unwrap()).into(),
    };
    let headers = relay_core::schemes::GITHUB
        .sign(
            github.as_bytes(),
            Signer::new(&key, SystemTime::now(), Some(&unique("delivery"))),
        )
        .unwrap();
    let headers: Vec<(String, String)> = headers
        .into_iter()
        .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned()))
        .collect();
    accepted(("/github", ""), &github, &headers).await;

    // Both in the queue the example created, byte for byte.
    let queue = outputs["queue_url"].as_str().unwrap();
    let messages = receive(&sqs().await, queue, 2, Duration::from_millis(500)).await;
    let mut bodies: Vec<&str> = messages.iter().filter_map(|m| m.body()).collect();
    bodies.sort_unstable();
    let mut sent = vec![dss.as_str(), github.as_str()];
    sent.sort_unstable();
    assert_eq!(bodies, sent);
}
