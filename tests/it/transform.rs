//! Transforms (`transform = '<jq program>'`): a DSS notification reshaped arrives as that JSON
//! on moto's SQS and on the Pub/Sub emulator, with the usual attributes and
//! `relay.transformed`; a program that never ends is stopped at the time limit and fails its
//! destination alone (502 `transform_failed`), the other receiving the notification once; once
//! the program is fixed, the retry delivers to it; a program that does not compile is refused
//! at start with its position.

use std::path::Path;
use std::time::Duration;

use relay_core::Relay;

use crate::common::{
    Encoding, attribute, config, create_queue, dss_request, receive, send, serve, sqs, unique, v2,
};

/// The reshaping of the issue: the bundle, its version and the event.
const RESHAPE: &str =
    "{bundle: .match.bundle_uuid, version: .match.bundle_version, event: .event_type}";

/// A relay from `RELAY_CONFIG` at `file`, with `vars` besides; its callback URL.
async fn relay(file: &Path, vars: &[(&str, &str)]) -> String {
    let mut all = vec![("RELAY_CONFIG", file.to_str().unwrap())];
    all.extend_from_slice(vars);
    let relay = Relay::from_config(config(&all))
        .await
        .expect("the relay starts");
    serve(relay).await
}

/// The reshaped body `payload` should arrive as.
fn reshaped(payload: &str) -> serde_json::Value {
    let d: serde_json::Value = serde_json::from_str(payload).unwrap();
    serde_json::json!({
        "bundle": d["match"]["bundle_uuid"],
        "version": d["match"]["bundle_version"],
        "event": d["event_type"],
    })
}

#[tokio::test]
async fn a_reshaped_notification_arrives_on_sqs_and_pubsub() {
    crate::common::require_emulator_env();
    let sqs = sqs().await;
    let queue = create_queue(&sqs, false).await;
    let (topic, subscription) = crate::pubsub::topic_with_subscription().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("relay.toml");
    std::fs::write(
        &file,
        format!(
            "[sinks.queue]\ntype = \"sqs\"\nqueue_url = \"{queue}\"\ntransform = '{RESHAPE}'\n\n\
             [sinks.topic]\ntype = \"pubsub\"\ntopic = \"{topic}\"\ntransform = '{RESHAPE}'\n\n\
             [[routes]]\nname = \"all\"\nmatch = {{}}\nto = [\"queue\", \"topic\"]\n"
        ),
    )
    .unwrap();
    let url = relay(&file, &[]).await;
    let payload = v2(&unique("sub"), &unique("bundle"), "CREATE", "t1");
    let (status, body) = send(dss_request(&url, &payload, Encoding::Json)).await;
    assert_eq!(status, 202, "{body}");
    let want = reshaped(&payload);

    let messages = receive(&sqs, &queue, 1, Duration::from_millis(200)).await;
    let got: serde_json::Value = serde_json::from_str(messages[0].body().unwrap()).unwrap();
    assert_eq!(got, want);
    assert_eq!(
        messages[0].body().unwrap(),
        serde_json::to_string(&want).unwrap(),
        "compact JSON"
    );
    assert_eq!(
        attribute(&messages[0], "relay.dedup_key"),
        body["dedup_key"].as_str()
    );
    assert_eq!(attribute(&messages[0], "dss.event_type"), Some("CREATE"));
    assert_eq!(attribute(&messages[0], "relay.transformed"), Some("true"));

    let pulled = crate::pubsub::pull(&subscription, 1).await;
    let got: serde_json::Value = serde_json::from_slice(&pulled[0].data).unwrap();
    assert_eq!(got, want);
    let get = |name: &str| pulled[0].attributes.get(name).map(String::as_str);
    assert_eq!(get("relay.dedup_key"), body["dedup_key"].as_str());
    assert_eq!(get("relay.transformed"), Some("true"));
}

/// moto's SQS and two new queues, for the sinks `plain` and `shaped`.
async fn two_queues() -> (aws_sdk_sqs::Client, String, String) {
    crate::common::require_emulator_env();
    let sqs = sqs().await;
    let plain = create_queue(&sqs, false).await;
    let shaped = create_queue(&sqs, false).await;
    (sqs, plain, shaped)
}

/// Two SQS sinks, `plain` and `shaped` (with `program` as its transform and `extra` keys), and
/// one route to both, written to `file`.
fn write_two_queues(file: &Path, plain: &str, shaped: &str, extra: &str, program: &str) {
    std::fs::write(
        file,
        format!(
            "[sinks.plain]\ntype = \"sqs\"\nqueue_url = \"{plain}\"\n\n\
             [sinks.shaped]\ntype = \"sqs\"\nqueue_url = \"{shaped}\"\n{extra}transform = '{program}'\n\n\
             [[routes]]\nname = \"all\"\nmatch = {{}}\nto = [\"plain\", \"shaped\"]\n"
        ),
    )
    .unwrap();
}

#[tokio::test]
async fn a_transform_without_end_fails_its_destination_alone_until_it_is_fixed() {
    let (sqs, plain, shaped) = two_queues().await;
    let dir = tempfile::tempdir().unwrap();
    let (file, ledger) = (
        dir.path().join("relay.toml"),
        dir.path().join("ledger.sqlite"),
    );
    let write = |program: &str| write_two_queues(&file, &plain, &shaped, "", program);
    let vars = [
        ("RELAY_LEDGER_URL", ledger.to_str().unwrap()),
        ("RELAY_TRANSFORM_TIMEOUT_MS", "50"),
    ];
    write("last(range(1e18))");
    let url = relay(&file, &vars).await;
    let payload = v2(&unique("sub"), &unique("bundle"), "CREATE", "t1");
    for _ in 0..2 {
        let (status, body) = send(dss_request(&url, &payload, Encoding::Json)).await;
        assert_eq!(status, 502, "{body}");
        assert_eq!(body["error"]["code"], "transform_failed");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("shaped") && message.contains("50 ms"),
            "{message}"
        );
    }
    let once = receive(&sqs, &plain, 1, Duration::from_secs(1)).await;
    assert_eq!(
        once.len(),
        1,
        "the other destination receives it once, retries included"
    );
    assert!(
        receive(&sqs, &shaped, 0, Duration::from_millis(500))
            .await
            .is_empty()
    );

    // The program fixed, the sender's next retry delivers to the destination that failed.
    write(RESHAPE);
    let url = relay(&file, &vars).await;
    let (status, body) = send(dss_request(&url, &payload, Encoding::Json)).await;
    assert_eq!(status, 202, "{body}");
    let fixed = receive(&sqs, &shaped, 1, Duration::from_millis(200)).await;
    let got: serde_json::Value = serde_json::from_str(fixed[0].body().unwrap()).unwrap();
    assert_eq!(got, reshaped(&payload));
    let again = receive(&sqs, &plain, 0, Duration::from_millis(500)).await;
    assert!(again.is_empty(), "not published to again");
}

#[test]
fn a_program_that_does_not_compile_is_refused_at_start_with_its_position() {
    let file = relay_testkit::config::ConfigFile::new(
        "[sinks.out]\ntype = \"file\"\npath = \"-\"\ntransform = '{bundle: .match.bundle_uuid,, }'\n\n\
         [[routes]]\nname = \"all\"\nmatch = {}\nto = [\"out\"]\n",
    );
    let keys = r#"{"it-key": "integration-secret"}"#;
    let error = file
        .load(&[("RELAY_HMAC_KEYS", keys)])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("transform") && error.contains("line 1, column"),
        "{error}"
    );
}

#[tokio::test]
async fn a_value_over_the_destinations_limit_fails_that_destination_alone() {
    let (sqs, plain, shaped) = two_queues().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("relay.toml");
    // 2 MB, then a body under the 256 KiB limit that its attributes take over it.
    for (program, size) in [
        (r#""x" * 2000000"#, "2000000"),
        (r#""x" * 262100"#, "262100"),
    ] {
        let limit = "max_message_bytes = 262144\n";
        write_two_queues(&file, &plain, &shaped, limit, program);
        let url = relay(&file, &[]).await;
        let payload = v2(&unique("sub"), &unique("bundle"), "CREATE", "t1");
        let (status, body) = send(dss_request(&url, &payload, Encoding::Json)).await;
        assert_eq!(status, 502, "{size}: {body}");
        assert_eq!(body["error"]["code"], "transform_failed", "{size}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("shaped") && message.contains("larger than 262144 bytes"),
            "{message}"
        );
        let delivered = receive(&sqs, &plain, 1, Duration::from_millis(300)).await;
        assert_eq!(delivered.len(), 1, "{size}: the other destination took it");
    }
    assert!(
        receive(&sqs, &shaped, 0, Duration::from_millis(300))
            .await
            .is_empty()
    );
}
