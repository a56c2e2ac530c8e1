//! `relay send` against a real relay-gcf server on loopback, and `relay check`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use relay_core::{Config, Relay};

use common::relay_cmd;

const SECRET: &str = "a-development-secret";

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/notifications")
}

/// `relay send FILE --url URL --key-id dev`.
fn send_cmd(file: &Path, url: &str) -> Command {
    let mut cmd = send_to(file, url);
    cmd.args(["--key-id", "dev"]);
    cmd
}

/// `relay send FILE --url URL`.
fn send_to(file: &Path, url: &str) -> Command {
    let mut cmd = relay_cmd();
    cmd.args(["send", file.to_str().unwrap(), "--url", url]);
    cmd
}

/// Starts the relay-gcf app on a free loopback port with a file sink; returns its URL.
async fn start_relay(sink: &Path) -> String {
    let vars = [
        ("RELAY_HMAC_KEYS", format!(r#"{{"dev": "{SECRET}"}}"#)),
        ("RELAY_FILE_SINK", sink.display().to_string()),
    ];
    let config = Config::from_vars(|n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone()));
    let relay = Arc::new(Relay::from_config(config.unwrap()).await.unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/dss/notify?replica=aws",
        listener.local_addr().unwrap()
    );
    tokio::spawn(async move { axum::serve(listener, relay_gcf::app(relay)).await });
    url
}

/// The standard output of a command that must have succeeded; both outputs in the panic if not.
fn succeeded(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

/// The standard error of a command that must have exited with `code`, shown if it did not.
fn failed(out: &Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    stderr
}

/// Asserts the command exited with `code` and said `text` on standard error; its standard error.
fn fails_saying(out: &Output, code: i32, text: &str) -> String {
    let stderr = failed(out, code);
    assert!(stderr.contains(text), "{stderr}");
    stderr
}

async fn run(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn sink_payloads(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let line: serde_json::Value = serde_json::from_str(l).unwrap();
            line["payload"].as_str().unwrap().to_owned()
        })
        .collect()
}

#[tokio::test]
async fn send_lands_every_example_byte_identical_in_every_encoding() {
    let dir = tempfile::tempdir().unwrap();
    let sink = dir.path().join("sink.jsonl");
    let url = start_relay(&sink).await;
    let mut sent = Vec::new();
    for entry in std::fs::read_dir(examples()).unwrap() {
        let file = entry.unwrap().path();
        if file.extension().is_none_or(|e| e != "json") {
            continue;
        }
        for (method, encoding) in [("post", "json"), ("put", "multipart")] {
            let mut cmd = send_cmd(&file, &url);
            cmd.args([
                "--method",
                method,
                "--encoding",
                encoding,
                "--form-field",
                "foo=bar",
            ])
            .env("RELAY_SEND_SECRET", SECRET);
            let out = run(cmd).await;
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{}: {stdout} {}",
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(stdout.starts_with("202 Accepted"), "{stdout}");
            assert!(stdout.contains(r#""status":"published""#), "{stdout}");
            sent.push(std::fs::read_to_string(&file).unwrap());
        }
    }
    assert_eq!(sent.len(), 10);
    assert_eq!(sink_payloads(&sink), sent);
}

#[tokio::test]
async fn send_reports_a_refusal_with_a_failing_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let sink = dir.path().join("sink.jsonl");
    let url = start_relay(&sink).await;
    let file = examples().join("v2-create.json");
    let mut cmd = send_cmd(&file, &url);
    cmd.env("RELAY_SEND_SECRET", "wrong");
    let out = run(cmd).await;
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("401 Unauthorized") && stdout.contains("bad_signature"),
        "{stdout}"
    );

    // The default keyId is hca-dss:<subscription_id>, unknown to this relay.
    let mut cmd = relay_cmd();
    cmd.args(["send", file.to_str().unwrap(), "--url", &url])
        .env("RELAY_SEND_SECRET", SECRET);
    let stdout = String::from_utf8(run(cmd).await.stdout).unwrap();
    assert!(stdout.contains("unknown_key_id"), "{stdout}");

    let mut cmd = relay_cmd();
    cmd.args(["send", file.to_str().unwrap(), "--url", &url, "--unsigned"]);
    let stdout = String::from_utf8(run(cmd).await.stdout).unwrap();
    assert!(stdout.contains("missing_authorization"), "{stdout}");
    assert!(sink_payloads(&sink).is_empty());
}

#[test]
fn send_without_a_secret_explains_what_to_set() {
    let out = relay_cmd()
        .args([
            "send",
            examples().join("v2-create.json").to_str().unwrap(),
            "--url",
            "http://127.0.0.1:9/",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("RELAY_SEND_SECRET"));
}

#[test]
fn check_rejects_a_configuration_without_keys() {
    relay_testkit::assert_refuses_without_a_key(relay_cmd().arg("check"), 1);
}

#[test]
fn check_prints_the_effective_configuration_with_secrets_masked() {
    let out = relay_cmd()
        .env("RELAY_HMAC_KEYS", r#"{"dev": "s3cret-value"}"#)
        .env("RELAY_FILE_SINK", "target/run/notifications.jsonl")
        .env("RELAY_MAX_BODY_BYTES", "2048")
        .env("RELAY_HMAC_SECERT", "typo")
        .arg("check")
        .output()
        .unwrap();
    let stdout = succeeded(&out);
    assert!(
        stdout.contains(r#"{"dev":"****"}"#) && stdout.contains("2048"),
        "{stdout}"
    );
    assert!(!stdout.contains("s3cret-value"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("RELAY_HMAC_SECERT"));
}

#[test]
fn a_configuration_in_a_secret_is_read_before_any_command_and_its_failure_named() {
    let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:relay-config-AbCdEf";
    let aws = [
        // Nothing listens on port 9: the read fails, and says so.
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
    ];
    for config in [["--config", arn].as_slice(), &[]] {
        let mut cmd = relay_cmd();
        cmd.envs(aws)
            .env("RELAY_CONFIG", arn)
            .arg("check")
            .args(config);
        fails_saying(
            &cmd.output().unwrap(),
            2,
            &format!("RELAY_CONFIG: {arn}: cannot read the secret"),
        );
    }
    // A file is read as a file, with no call to Secrets Manager.
    let out = relay_cmd()
        .envs(aws)
        .env("RELAY_HMAC_SECRET", "s3cret")
        .env("RELAY_FILE_SINK", "target/run/notifications.jsonl")
        .args(["check", "--config", "no-such-relay.toml"])
        .output()
        .unwrap();
    fails_saying(&out, 1, "cannot read no-such-relay.toml");
}

#[test]
fn check_compiles_every_transform_and_names_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("relay.toml");
    let write = |program: &str| {
        let table = format!(
            "[sinks.out]\ntype = \"file\"\npath = \"-\"\ntransform = '{program}'\n\n\
             [[routes]]\nname = \"all\"\nmatch = {{}}\nto = [\"out\"]\n"
        );
        std::fs::write(&config, table).unwrap();
    };
    let check = || {
        relay_cmd()
            .env("RELAY_HMAC_SECRET", "s")
            .env("RELAY_CONFIG", &config)
            .arg("check")
            .output()
            .unwrap()
    };
    write("{bundle: .match.bundle_uuid}");
    let stdout = succeeded(&check());
    assert!(
        stdout.contains("transform {bundle: .match.bundle_uuid}"),
        "{stdout}"
    );
    write("{bundle: .match.bundle_uuid,, }");
    fails_saying(&check(), 1, "transform: line 1, column 29");
    write("def walker: .[] | walker; walker");
    fails_saying(&check(), 1, "walker can call itself");
}

#[test]
fn check_reports_bad_values_by_variable() {
    let out = relay_cmd()
        .env("RELAY_HMAC_SECRET", "s")
        .env("RELAY_FILE_SINK", "-")
        .env("RELAY_MAX_CLOCK_SKEW_SECS", "five minutes")
        .arg("check")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("RELAY_MAX_CLOCK_SKEW_SECS: expected a whole number")
    );
}

#[test]
fn keygen_prints_a_fresh_hex_key() {
    let a = relay_cmd().arg("keygen").output().unwrap();
    let b = relay_cmd().arg("keygen").output().unwrap();
    let a = String::from_utf8(a.stdout).unwrap();
    assert_eq!(a.trim().len(), 64);
    assert_ne!(a, String::from_utf8(b.stdout).unwrap());
}

/// `text` written as `relay.toml` in a fresh folder (kept while the folder is).
fn config_file(text: impl AsRef<[u8]>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("relay.toml");
    std::fs::write(&file, text).unwrap();
    (dir, file)
}

/// `relay check --config file`, with a key set.
fn check(file: &Path) -> Output {
    relay_cmd()
        .env("RELAY_HMAC_SECRET", "s")
        .args(["check", "--config", file.to_str().unwrap()])
        .output()
        .unwrap()
}

fn example_config() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/relay.toml")
        .display()
        .to_string()
}

#[test]
fn explain_shows_each_route_and_the_sinks() {
    let explain = |file: &str, extra: &[&str]| {
        let out = relay_cmd()
            .args([
                "explain",
                "--config",
                &example_config(),
                examples().join(file).to_str().unwrap(),
            ])
            .args(extra)
            .output()
            .unwrap();
        succeeded(&out)
    };
    let text = explain("v2-create.json", &[]);
    assert!(
        text.contains("MATCH     creates          every condition held"),
        "{text}"
    );
    assert!(text.contains("MATCH     glioblastoma"), "{text}");
    assert!(text.ends_with("sinks: analysis, indexer\n"), "{text}");
    let text = explain("v2-create.json", &["--query", "replica=gcp"]);
    assert!(
        text.contains(r#"not evaluated: "gcp-replica" matched and has stop = true"#),
        "{text}"
    );
    assert!(text.ends_with("sinks: gcp-replica\n"), "{text}");
    let text = explain("v1-create.json", &["--path", "/dss/notify"]);
    assert!(
        text.contains("fallback: no other route matched") && text.ends_with("sinks: indexer\n"),
        "{text}"
    );
}

#[test]
fn explain_transform_prints_what_each_destination_receives() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("relay.toml");
    let sink = |name: &str, transform: &str| {
        let path = dir.path().join(name);
        format!(
            "[sinks.{name}]\ntype = \"file\"\npath = \"{}\"\n{transform}\n",
            path.display()
        )
    };
    let table = [
        sink("plain", ""),
        sink(
            "shaped",
            "transform = '{bundle: .match.bundle_uuid, event: .event_type}'",
        ),
        sink("endless", "transform = 'last(range(1e18))'"),
        "[[routes]]\nname = \"all\"\nmatch = {}\nto = [\"plain\", \"shaped\", \"endless\"]\n"
            .into(),
    ];
    std::fs::write(&config, table.concat()).unwrap();
    let notification = examples().join("v2-create.json");
    let out = relay_cmd()
        .env("RELAY_TRANSFORM_TIMEOUT_MS", "20")
        .args([
            "explain",
            "--transform",
            "--config",
            config.to_str().unwrap(),
        ])
        .arg(&notification)
        .output()
        .unwrap();
    let text = succeeded(&out);
    let document: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&notification).unwrap()).unwrap();
    let shaped = format!(
        r#"shaped receives {{"bundle":{},"event":"CREATE"}}"#,
        document["match"]["bundle_uuid"]
    );
    assert!(text.contains(&shaped), "{text}");
    assert!(
        text.contains("plain receives the payload unchanged"),
        "{text}"
    );
    assert!(
        text.contains("endless receives nothing: 502 transform_failed (timed_out): the program did not finish within 20 ms"),
        "{text}"
    );
}

#[test]
fn check_validates_a_configuration_file() {
    let out = relay_cmd()
        .env("RELAY_HMAC_SECRET", "s")
        .args(["check", "--config", &example_config()])
        .output()
        .unwrap();
    let stdout = succeeded(&out);
    assert!(
        stdout.contains("sink indexer") && stdout.contains("group id {match.bundle_uuid}"),
        "{stdout}"
    );
    assert!(
        stdout.contains("route everything-else") && stdout.contains("fallback -> indexer"),
        "{stdout}"
    );

    let (_dir, broken) = config_file(std::fs::read_to_string(example_config()).unwrap().replace(
        r#"to = ["analysis", "indexer"]"#,
        r#"to = ["analysis", "indexr"]"#,
    ));
    let out = check(&broken);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"route "creates", to: unknown sink "indexr""#)
            && stderr.contains("relay.toml"),
        "{stderr}"
    );
}

#[test]
fn check_refuses_two_sinks_of_one_resource_and_a_retention_shorter_than_a_lease() {
    // One queue written two ways: two names for one resource would share one ledger record.
    let (dir, file) = config_file(
        r#"[sinks.prod]
type = "sqs"
queue_url = "https://sqs.us-east-1.amazonaws.com/111111111111/orders"

[sinks.copy]
type = "sqs"
queue_url = "https://SQS.us-east-1.amazonaws.com/111111111111/orders/"
"#,
    );
    let out = check(&file);
    fails_saying(
        &out,
        1,
        r#"sinks "copy" and "prod" both deliver to arn:aws:sqs:us-east-1:111111111111:orders"#,
    );
    let out = relay_cmd()
        .env("RELAY_HMAC_SECRET", "s")
        .env("RELAY_FILE_SINK", "-")
        .env("RELAY_LEDGER_URL", dir.path().join("ledger.db"))
        .env("RELAY_LEDGER_RETENTION_SECS", "1")
        .arg("check")
        .output()
        .unwrap();
    let stderr = failed(&out, 1);
    assert!(
        stderr.contains("RELAY_LEDGER_RETENTION_SECS")
            && stderr.contains("longer than an attempt's lease"),
        "{stderr}"
    );
}

#[test]
fn export_writes_cloud_filters_and_names_what_it_leaves_out() {
    let export = |route: &str, language: &str| {
        relay_cmd()
            .args([
                "export",
                "--config",
                &example_config(),
                "--route",
                route,
                "--as",
                language,
            ])
            .output()
            .unwrap()
    };
    let out = export("deletions", "sns-filter-policy");
    succeeded(&out);
    let policy: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        policy,
        serde_json::json!({"dss.event_type": ["TOMBSTONE", "DELETE"]})
    );
    let out = export("creates", "pubsub-filter");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "attributes.\"dss.event_type\" = \"CREATE\"\n"
    );
    let out = export("glioblastoma", "pubsub-filter");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("left out: attachments.project_shortname")
            && stderr.contains("not a message attribute"),
        "{stderr}"
    );
    assert_eq!(
        export("everything-else", "sns-filter-policy").status.code(),
        Some(1)
    );
    assert_eq!(export("nope", "sns-filter-policy").status.code(), Some(2));
}

#[test]
fn check_gives_the_place_of_an_error_and_never_the_secret_line() {
    for text in relay_testkit::FILES_WITH_A_BROKEN_SECRET_LINE {
        let file = relay_testkit::ConfigFile::new(text);
        let out = relay_cmd()
            .env_remove("RELAY_HMAC_SECRET")
            .env_remove("RELAY_HMAC_KEYS")
            .env("RELAY_FILE_SINK", "-")
            .args(["check", "--config", &file.path])
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(1), "{text:?}: {stdout}{stderr}");
        assert!(
            stderr.contains("relay.toml:"),
            "no place for {text:?}: {stderr}"
        );
        assert!(
            !format!("{stdout}{stderr}").contains("s3cret"),
            "{text:?}: {stdout}{stderr}"
        );
    }
}

#[test]
fn explain_and_check_read_the_stored_routes() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    let with_routes = |args: &[&str]| {
        relay_cmd()
            .env("RELAY_HMAC_SECRET", "s")
            .env("RELAY_ROUTES_URL", &routes)
            .args(args)
            .output()
            .unwrap()
    };
    let start = with_routes(&[
        "split",
        "start",
        "alice",
        "--match",
        r#"{"match":{"bundle_uuid":[{"prefix":"c863"}]}}"#,
        "--file",
        "/tmp/alice.jsonl",
        "--config",
        &example_config(),
    ]);
    succeeded(&start);

    let notification = examples().join("v2-create.json");
    let explain = with_routes(&[
        "explain",
        "--config",
        &example_config(),
        notification.to_str().unwrap(),
    ]);
    let text = succeeded(&explain);
    assert!(
        text.contains("split alice  TAKES it, instead of the routes"),
        "{text}"
    );
    assert!(text.ends_with("sinks: split:alice\n"), "{text}");

    let check = with_routes(&["check", "--config", &example_config()]);
    let stdout = succeeded(&check);
    assert!(
        stdout.contains("valid; 5 routes, 1 splits (1 active)"),
        "{stdout}"
    );

    // A document the relay would refuse: check says so and fails.
    std::fs::write(
        &routes,
        "[[routes]]\nname = \"creates\"\nto = [\"analysis\"]\n",
    )
    .unwrap();
    let check = with_routes(&["check", "--config", &example_config()]);
    let stderr = fails_saying(&check, 1, "route \"creates\" is deployed");
    assert!(stderr.contains("keeps its last good routes"), "{stderr}");
}

#[test]
fn routes_put_replaces_a_document_that_does_not_parse() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    std::fs::write(&routes, "[[splits]\nname = ").unwrap();
    let run = |args: &[&str]| split_cmd(&routes, &[], args);
    let start = start_split(&routes, &[], r#"{"event_type":["CREATE"]}"#, &[]);
    assert!(!start.status.success());
    let stderr = String::from_utf8_lossy(&start.stderr);
    assert!(stderr.contains("relay routes put FILE"), "{stderr}");

    let file = dir.path().join("audit.toml");
    let document = relay_testkit::file_route(
        "audit",
        "/tmp/audit.jsonl",
        "deletions",
        Some(r#"{ event_type = ["DELETE"] }"#),
    );
    std::fs::write(&file, document).unwrap();
    let put = run(&["routes", "put", file.to_str().unwrap()]);
    succeeded(&put);
    let shown = run(&["routes", "show", "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(
        shown["document"]["routes"][0]["name"], "deletions",
        "{shown}"
    );
    assert!(shown["version"].is_string(), "{shown}");
}

#[test]
fn routes_put_keeps_the_splits_and_remove_takes_the_sinks_no_route_names() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    let run = |args: &[&str]| split_cmd(&routes, &[], args);
    let shown = || -> serde_json::Value {
        serde_json::from_str(&succeeded(&run(&["routes", "show", "--json"]))).unwrap()
    };
    succeeded(&run(&[
        "split",
        "start",
        "alice",
        "--copy",
        "--match",
        r#"{"match":{"bundle_uuid":[{"prefix":"aa"}]}}"#,
        "--queue-url",
        "https://sqs.us-east-1.amazonaws.com/123456789012/alice",
    ]));

    let file = dir.path().join("sinks.toml");
    std::fs::write(&file, relay_testkit::config::EVERY_SINK_TYPE).unwrap();
    succeeded(&run(&["routes", "put", file.to_str().unwrap()]));
    let document = &shown()["document"];
    assert_eq!(document["splits"][0]["name"], "alice", "{document}");
    assert_eq!(document["splits"][0]["copy"], true, "{document}");
    assert!(document["splits"][0].get("created").is_none(), "{document}");
    assert_eq!(
        document["splits"][0]["to"],
        serde_json::json!({"type": "sqs", "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/alice"}),
        "{document}"
    );
    assert_eq!(
        document["sinks"]["fifo"],
        serde_json::json!({
            "type": "sqs",
            "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/dss.fifo",
            "max_message_bytes": 4096,
            "message_group_id": "{match.bundle_uuid}",
            "message_deduplication_id": "{$dedup_key}",
            "attributes": ["dss.event_type", "dss.subscription_id"],
            "extra_attributes": {"team": "data", "env": "prod"},
        }),
        "{document}"
    );
    assert_eq!(document["sinks"]["topic"]["max_message_bytes"], 1000);
    assert_eq!(document["routes"][0]["stop"], true, "{document}");
    assert_eq!(document["routes"][1]["fallback"], true, "{document}");
    let stored = std::fs::read_to_string(&routes).unwrap();
    assert!(!stored.contains("= false"), "{stored}");

    // A file with splits is refused, and the document stays as it was.
    let with_splits = dir.path().join("splits.toml");
    std::fs::write(&with_splits, "[[splits]]\nname = \"bob\"\n").unwrap();
    let put = run(&["routes", "put", with_splits.to_str().unwrap()]);
    assert_eq!(put.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&put.stderr);
    assert!(
        stderr.contains("splits are changed with `relay split`"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&routes).unwrap(), stored);

    succeeded(&run(&["routes", "remove", "deletions"]));
    let document = &shown()["document"];
    let sinks: Vec<&String> = document["sinks"].as_object().unwrap().keys().collect();
    assert_eq!(sinks, ["gcp", "topic"], "{document}");
    assert_eq!(
        document["routes"].as_array().unwrap().len(),
        1,
        "{document}"
    );

    let renew = succeeded(&run(&["split", "renew", "alice", "--ttl", "2h"]));
    assert!(renew.starts_with("split alice now expires at "), "{renew}");
    succeeded(&run(&["split", "stop", "alice"]));
    succeeded(&run(&["routes", "remove", "rest"]));
    // Nothing left: the document is empty, not a set of empty tables.
    assert_eq!(std::fs::read_to_string(&routes).unwrap(), "");
    assert_eq!(shown()["document"], serde_json::json!({}));
}

/// `relay ARGS --routes ROUTES` with `vars` set.
fn split_cmd(routes: &Path, vars: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = relay_cmd();
    cmd.args(args).arg("--routes").arg(routes);
    for (name, value) in vars {
        cmd.env(name, value);
    }
    cmd.output().unwrap()
}

/// `relay split start NAME --match PATTERN --file … [more]`.
fn start_split(routes: &Path, vars: &[(&str, &str)], pattern: &str, more: &[&str]) -> Output {
    let mut args = vec![
        "split",
        "start",
        "alice",
        "--match",
        pattern,
        "--file",
        "/tmp/alice.jsonl",
    ];
    args.extend(more);
    split_cmd(routes, vars, &args)
}

#[test]
fn split_start_refuses_patterns_every_dss_notification_matches() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    for pattern in [
        r#"{"subscription_id":[{"anything-but":""}]}"#,
        r#"{"match":{"bundle_uuid":[{"regex":"."}]}}"#,
        r#"{"match":{"bundle_uuid":[{"wildcard":"*-*"}]}}"#,
        r#"{"match":{"bundle_version":[{"suffix":"Z"}]}}"#,
    ] {
        let out = start_split(&routes, &[], pattern, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{pattern}: {stderr}");
        assert!(
            stderr.contains("its match takes every notification"),
            "{pattern}: {stderr}"
        );
        assert!(!routes.exists(), "{pattern}: nothing is written");
    }
    for (name, pattern) in [
        ("a", r#"{"match":{"bundle_uuid":[{"prefix":"aa"}]}}"#),
        ("b", r#"{"event_type":["CREATE"]}"#),
        (
            "c",
            r#"{"subscription_id":[{"anything-but":""}],"match":{"bundle_version":[{"prefix":"2019-11"}]}}"#,
        ),
    ] {
        let file = dir.path().join(format!("{name}.jsonl"));
        let file = file.to_str().unwrap();
        let out = split_cmd(
            &routes,
            &[],
            &["split", "start", name, "--match", pattern, "--file", file],
        );
        succeeded(&out);
    }
    // A split to a file another split writes: one ledger record would stand for both.
    let file = dir.path().join("a.jsonl");
    let pattern = r#"{"event_type":["DELETE"]}"#;
    let args = ["split", "start", "d", "--match", pattern, "--file"];
    let out = split_cmd(
        &routes,
        &[],
        &[&args[..], &[file.to_str().unwrap()]].concat(),
    );
    fails_saying(
        &out,
        1,
        r#"sinks "split:a" and "split:d" both deliver to file:"#,
    );
}

#[test]
fn a_split_takes_a_transform_compiled_before_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    let pattern = r#"{"match":{"bundle_uuid":[{"prefix":"aa"}]}}"#;
    let out = start_split(
        &routes,
        &[],
        pattern,
        &["--transform", "{bundle: .match.bundle_uuid"],
    );
    fails_saying(&out, 1, "--transform: line 1, column 28");
    assert!(!routes.exists(), "nothing is written");
    let program = "{bundle: .match.bundle_uuid}";
    succeeded(&start_split(
        &routes,
        &[],
        pattern,
        &["--transform", program],
    ));
    let document: toml::Value = toml::from_str(&std::fs::read_to_string(&routes).unwrap()).unwrap();
    assert_eq!(
        document["splits"][0]["to"]["transform"].as_str(),
        Some(program)
    );
}

#[test]
fn split_ttls_are_bounded_and_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    let pattern = r#"{"match":{"bundle_uuid":[{"prefix":"aa"}]}}"#;
    // Beyond what RFC 3339 writes: a usage error, not a panic.
    let out = start_split(&routes, &[], pattern, &["--ttl", "999999999h"]);
    let stderr = fails_saying(
        &out,
        2,
        "invalid value '999999999h' for '--ttl <TTL>': too long",
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Over the default maximum of 7 days.
    for (ttl, shown) in [("8d", "8days"), ("7900y", "7900years")] {
        let out = start_split(&routes, &[], pattern, &["--ttl", ttl]);
        fails_saying(
            &out,
            1,
            &format!(
                "--ttl {shown}: a split lasts at most 7days (RELAY_SPLIT_MAX_TTL_SECS=604800)"
            ),
        );
    }
    assert!(!routes.exists());
    // The variable sets the maximum, for start and renew.
    let hour = [("RELAY_SPLIT_MAX_TTL_SECS", "3600")];
    let out = start_split(&routes, &hour, pattern, &["--ttl", "2h"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 1h"));
    succeeded(&start_split(&routes, &hour, pattern, &["--ttl", "30m"]));
    let renew = |vars: &[(&str, &str)], ttl: &str| {
        split_cmd(&routes, vars, &["split", "renew", "alice", "--ttl", ttl])
    };
    let out = renew(&[], "999999999h");
    let stderr = fails_saying(&out, 2, "too long");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for ttl in ["8d", "7900y"] {
        let out = renew(&[], ttl);
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("a split lasts at most 7days"));
    }
    let out = renew(&hour, "2h");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 1h"));
    succeeded(&renew(&hour, "45m"));
    // A renewal counts from the registration: within a week of it, not a week from now.
    let stored = std::fs::read_to_string(&routes).unwrap();
    let registered = stored
        .lines()
        .find_map(|l| l.strip_prefix("registered_at = "))
        .unwrap()
        .to_owned();
    let earlier = stored.replace(&registered, "\"2026-01-01T00:00:00Z\"");
    std::fs::write(&routes, earlier).unwrap();
    let out = renew(&[], "1h");
    fails_saying(
        &out,
        1,
        "split alice was registered at 2026-01-01T00:00:00Z; a split lasts at most 7days from its registration",
    );
}

#[test]
fn split_start_reads_the_max_ttl_from_the_relay_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    let config = dir.path().join("relay.toml");
    let routes_part = relay_testkit::file_route("main", "-", "all", None);
    std::fs::write(
        &config,
        format!("[relay]\nhmac_secret = \"s\"\nsplit_max_ttl_secs = 7200\n\n{routes_part}"),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let pattern = r#"{"event_type":["CREATE"]}"#;
    let out = start_split(&routes, &[], pattern, &["--ttl", "3h", "--config", config]);
    fails_saying(
        &out,
        1,
        "a split lasts at most 2h (RELAY_SPLIT_MAX_TTL_SECS=7200)",
    );
    succeeded(&start_split(
        &routes,
        &[],
        pattern,
        &["--ttl", "2h", "--config", config],
    ));
}

/// `relay routes put FILE --allowed …` warns, on standard error, about each stored SQS, SNS or
/// Pub/Sub sink that the relay's grants (the module output stored_sink_allowed) do not cover,
/// and still writes: the exit code is that of the write. Without `--allowed` it says nothing.
#[test]
fn routes_put_warns_about_sinks_the_relay_may_not_send_to() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    let file = dir.path().join("audit.toml");
    std::fs::write(
        &file,
        r#"
routes = [{ name = "deletions-to-audit", match = { event_type = ["DELETE", "TOMBSTONE"] }, to = ["audit", "split"] }]

[sinks]
audit = { type = "sqs", queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/dss-audit" }
split = { type = "sns", topic_arn = "arn:aws:sns:us-east-1:123456789012:dss-relay-split-bob" }
"#,
    )
    .unwrap();
    let file = file.to_str().unwrap();
    // What aws-relay's stored_sink_allowed holds without stored_sink_queue_arns.
    let deployed = "arn:aws:sqs:us-east-1:123456789012:dss-relay-events,\
                    arn:aws:sqs:us-east-1:123456789012:dss-relay-split-*,\
                    arn:aws:sns:us-east-1:123456789012:dss-relay-split-*";
    let put = |more: &[&str]| {
        let mut args = vec!["routes", "put", file];
        args.extend(more);
        split_cmd(&routes, &[], &args)
    };

    let warned = put(&["--allowed", deployed]);
    succeeded(&warned);
    let stderr = String::from_utf8_lossy(&warned.stderr);
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].starts_with("relay routes: warning: sink \"audit\" (sqs https://sqs.us-east-1.amazonaws.com/123456789012/dss-audit) is outside what the relay may send to"),
        "{stderr}"
    );
    assert!(warnings[0].contains("stored_sink_queue_arns"), "{stderr}");
    assert!(
        std::fs::read_to_string(&routes)
            .unwrap()
            .contains("dss-audit"),
        "written despite the warning"
    );

    // Granted (stored_sink_queue_arns), or nothing to tell by: no warning.
    let granted = format!("{deployed},arn:aws:sqs:us-east-1:123456789012:dss-audit");
    for more in [&["--allowed", granted.as_str()][..], &[]] {
        let quiet = put(more);
        succeeded(&quiet);
        let stderr = String::from_utf8_lossy(&quiet.stderr);
        assert!(!stderr.contains("warning"), "{more:?}: {stderr}");
    }

    // A write that fails fails as before, warning or not.
    let missing = dir.path().join("no-such-dir/routes.toml");
    let mut cmd = relay_cmd();
    cmd.args(["routes", "put", file, "--allowed", deployed, "--routes"])
        .arg(&missing);
    fails_saying(&cmd.output().unwrap(), 1, "warning: sink \"audit\"");
}

/// One source per scheme, each on its own path.
fn sources() -> String {
    relay_testkit::config::every_scheme("CLI_")
}

const SOURCE_SECRET: &str = "a-source-secret";
const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The relay-gcf app with `SOURCES` and a file sink, on a free loopback port; its address.
async fn start_sources_relay(dir: &Path, sink: &Path) -> (String, PathBuf) {
    let file = dir.join("relay.toml");
    std::fs::write(
        &file,
        format!(
            "{}\n[sinks.out]\ntype = \"file\"\npath = \"{}\"\n\n[[routes]]\nname = \"all\"\nto = [\"out\"]\n",
            sources(),
            sink.display()
        ),
    )
    .unwrap();
    let vars = [
        ("RELAY_CONFIG", file.display().to_string()),
        ("RELAY_HMAC_KEYS", format!(r#"{{"dev": "{SECRET}"}}"#)),
        ("CLI_SOURCE_SECRET", SOURCE_SECRET.to_owned()),
        ("CLI_SW_SECRET", SW_SECRET.to_owned()),
        (
            "CLI_RFC9421_KEYS",
            format!(r#"{{"k1": "{SOURCE_SECRET}"}}"#),
        ),
    ];
    let config = Config::from_vars(|n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone()));
    let relay = Arc::new(Relay::from_config(config.unwrap()).await.unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, relay_gcf::app(relay)).await });
    (base, file)
}

#[tokio::test]
async fn send_signs_for_every_scheme_and_each_source_takes_it() {
    let dir = tempfile::tempdir().unwrap();
    let sink = dir.path().join("sink.jsonl");
    let (base, config) = start_sources_relay(dir.path(), &sink).await;
    let json = dir.path().join("event.json");
    std::fs::write(&json, r#"{"id": "evt_1", "type": "thing.happened"}"#).unwrap();
    let form = dir.path().join("command.form");
    std::fs::write(&form, "command=%2Fdeploy&text=api").unwrap();

    let mut sent = Vec::new();
    let cases: [(&[&str], &str, &Path, &str); 8] = [
        (&["--scheme", "github"], "/github", &json, SOURCE_SECRET),
        (&["--scheme", "shopify"], "/shopify", &json, SOURCE_SECRET),
        (&["--scheme", "stripe"], "/stripe", &json, SOURCE_SECRET),
        (
            &[
                "--scheme",
                "slack",
                "--content-type",
                "application/x-www-form-urlencoded",
            ],
            "/slack",
            &form,
            SOURCE_SECRET,
        ),
        (&["--scheme", "standard-webhooks"], "/sw", &json, SW_SECRET),
        (
            &["--scheme", "rfc9421", "--key-id", "k1"],
            "/rfc9421",
            &json,
            SOURCE_SECRET,
        ),
        (
            &["--scheme", "dss", "--key-id", "dev"],
            "/dss",
            &examples().join("v2-create.json"),
            SECRET,
        ),
        // The configured source's own options and secret variable.
        (
            &["--source", "generic", "--config", config.to_str().unwrap()],
            "/hmac",
            &json,
            "",
        ),
    ];
    for (flags, path, file, secret) in cases {
        let mut cmd = send_to(file, &format!("{base}{path}"));
        cmd.args(flags);
        match secret {
            "" => cmd
                .env("CLI_SOURCE_SECRET", SOURCE_SECRET)
                .env("RELAY_HMAC_KEYS", format!(r#"{{"dev": "{SECRET}"}}"#))
                .env("CLI_SW_SECRET", SW_SECRET)
                .env(
                    "CLI_RFC9421_KEYS",
                    format!(r#"{{"k1": "{SOURCE_SECRET}"}}"#),
                ),
            secret => cmd.env("RELAY_SEND_SECRET", secret),
        };
        let stdout = succeeded(&run(cmd).await);
        assert!(stdout.starts_with("202 Accepted"), "{path}: {stdout}");
        assert!(
            stdout.contains(r#""status":"published""#),
            "{path}: {stdout}"
        );
        sent.push(std::fs::read_to_string(file).unwrap());
    }
    assert_eq!(sink_payloads(&sink), sent);

    // Signed with another source's secret: refused, and the exit code says so.
    let mut cmd = send_to(&json, &format!("{base}/github"));
    cmd.args(["--scheme", "github"])
        .env("RELAY_SEND_SECRET", SW_SECRET);
    let out = run(cmd).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("bad_signature"));
    assert_eq!(sink_payloads(&sink).len(), 8);
}

#[test]
fn check_prints_the_sources_and_which_sign_no_timestamp() {
    let (_dir, file) = config_file(format!(
        "{}\n[sinks.out]\ntype = \"file\"\npath = \"-\"\n\n[[routes]]\nname = \"all\"\nto = [\"out\"]\n",
        sources()
    ));
    let mut cmd = relay_cmd();
    cmd.args(["check", "--config", file.to_str().unwrap()])
        .env("RELAY_HMAC_SECRET", SECRET)
        .env("CLI_SOURCE_SECRET", SOURCE_SECRET)
        .env("CLI_SW_SECRET", SW_SECRET)
        .env("CLI_RFC9421_KEYS", r#"{"k1": "x"}"#);
    let stdout = succeeded(&cmd.output().unwrap());
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no line for {name} in\n{stdout}"))
            .to_owned()
    };
    assert!(
        line("github").contains(
            "on /github; keys from CLI_SOURCE_SECRET; no signed timestamp; one event = body"
        ),
        "{stdout}"
    );
    assert!(
        line("stripe").contains("signed within 300 s; one event = field:id"),
        "{stdout}"
    );
    assert!(line("dss").contains("the relay's keys"), "{stdout}");
    assert!(
        stdout.contains("not signed: x-github-delivery, x-github-event (attributes only"),
        "{stdout}"
    );
    // GitHub and Shopify sign no timestamp; with no ledger a captured request is published again.
    let warnings: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("warning: the"))
        .collect();
    assert_eq!(warnings.len(), 2, "{stdout}");
    assert!(
        warnings.iter().all(|w| w.contains("without a ledger")),
        "{stdout}"
    );
}

#[test]
fn trace_reads_a_ledger_without_creating_or_sweeping_it() {
    let dir = tempfile::tempdir().unwrap();
    // A path that does not exist: refused, and nothing is created there.
    let missing = dir.path().join("no/such/ledger.db");
    let out = relay_cmd()
        .args(["trace", "bundle-1", "--ledger", missing.to_str().unwrap()])
        .output()
        .unwrap();
    fails_saying(&out, 2, "no ledger file there");
    assert!(
        !dir.path().join("no").exists(),
        "relay trace created folders"
    );

    // An entry long past its expiry, still in the file: shown, and left there.
    let path = dir.path().join("ledger.db");
    let identity = relay_testkit::ledger::fresh_identity();
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let ledger = relay_core::ledger::SqliteLedger::open(&path).unwrap();
        let attempt = relay_testkit::ledger::attempt(1_600_000_000_000, &["file:-"]);
        relay_testkit::ledger::claim(&ledger, &identity, &attempt).await;
    });
    let trace = || {
        relay_cmd()
            .args([
                "trace",
                &identity.bundle_uuid,
                "--ledger",
                path.to_str().unwrap(),
            ])
            .output()
            .unwrap()
    };
    for _ in 0..2 {
        let shown = succeeded(&trace());
        assert!(
            shown.contains("(expired: a new attempt starts afresh)"),
            "{shown}"
        );
    }
}

/// A signed field holding terminal escapes (a window title, a screen clear) is printed escaped
/// by `relay trace`; `--json` keeps it as JSON escapes it.
#[test]
fn trace_prints_no_raw_terminal_escape() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let mut identity = relay_testkit::ledger::fresh_identity();
    identity.subscription_id = "sub\u{1b}]0;owned\u{7}\u{1b}[2J".into();
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let ledger = relay_core::ledger::SqliteLedger::open(&path).unwrap();
        let attempt = relay_testkit::ledger::attempt(1_600_000_000_000, &["file:-"]);
        relay_testkit::ledger::claim(&ledger, &identity, &attempt).await;
    });
    for json in [false, true] {
        let mut cmd = relay_cmd();
        cmd.args([
            "trace",
            &identity.bundle_uuid,
            "--ledger",
            path.to_str().unwrap(),
        ]);
        if json {
            cmd.arg("--json");
        }
        let shown = succeeded(&cmd.output().unwrap());
        assert!(
            !shown.contains(['\u{1b}', '\u{7}']),
            "a raw control character: {shown:?}"
        );
        let expected = match json {
            false => "sub\\u{1b}]0;owned\\u{7}\\u{1b}[2J",
            true => "sub\\u001b]0;owned\\u0007\\u001b[2J",
        };
        assert!(shown.contains(expected), "{shown}");
    }
}
