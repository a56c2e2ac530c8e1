//! The configuration model: variables and the `RELAY_CONFIG` file read into the same types,
//! every problem named, and the settings table as the one source of the table in docs/configuration.md.

use std::time::Duration;

use relay_core::config::{LogFormat, SETTINGS, markdown_table};
use relay_core::sink::Template;
use relay_core::sink::{FileTarget, Target};
use relay_core::{Config, config::ConfigErrors};
use relay_testkit::{ConfigFile, config, config_errors};

fn vars_of(errors: &ConfigErrors) -> Vec<&'static str> {
    errors.0.iter().map(|e| e.var).collect()
}

fn effective(config: &Config, name: &str) -> String {
    let lines = config.effective();
    lines
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
        .unwrap_or_default()
}

#[test]
fn defaults_with_one_key_and_a_sink() {
    let c = config(&[("RELAY_HMAC_SECRET", "s"), ("RELAY_FILE_SINK", "-")]);
    assert_eq!(c.max_body_bytes, 1_048_576);
    assert_eq!(c.max_clock_skew, Some(Duration::from_secs(300)));
    assert_eq!(
        (c.payload_field.as_str(), c.allow_unsigned),
        ("payload", false)
    );
    assert_eq!(c.sink_timeout, Duration::from_millis(5000));
    assert_eq!((c.log_format, c.listen), (LogFormat::Text, None));
    assert_eq!(c.sinks.len(), 1);
    assert!(matches!(&c.sinks[0].target, Target::File(f) if f.path == FileTarget::Stdout));
}

#[test]
fn fails_closed_without_keys() {
    assert_eq!(
        vars_of(&config_errors(&[("RELAY_FILE_SINK", "-")])),
        ["RELAY_HMAC_KEYS"]
    );
    let c = config(&[("RELAY_FILE_SINK", "-"), ("RELAY_ALLOW_UNSIGNED", "true")]);
    assert!(c.allow_unsigned && c.keys.is_empty());
}

/// `relay replay` reads the relay's configuration without its keys: no HMAC key, a source
/// whose secret variable is not set, and secret ARNs neither needed nor kept to be fetched.
#[test]
fn a_replay_reads_the_configuration_without_its_keys() {
    let file = ConfigFile::new(
        r#"
[sources.dss]
scheme = "dss"
paths = ["/dss"]

[sources.github]
scheme = "github"
paths = ["/github"]
secret_env = "GITHUB_WEBHOOK_SECRET"

[sources.shop]
scheme = "shopify"
paths = ["/shop"]
secret_arn = "arn:aws:secretsmanager:us-east-1:111111111111:secret:shop"
"#,
    );
    let pairs = [
        ("RELAY_FILE_SINK", "-"),
        (
            "RELAY_HMAC_KEYS_SECRET_ARN",
            "arn:aws:secretsmanager:us-east-1:111111111111:secret:dss",
        ),
    ];
    let errors = file.load(&pairs[..1]).unwrap_err();
    assert!(vars_of(&errors).contains(&"RELAY_HMAC_KEYS"), "{errors}");
    assert!(
        errors.to_string().contains("GITHUB_WEBHOOK_SECRET"),
        "{errors}"
    );

    let mut all = vec![("RELAY_CONFIG", file.path.as_str())];
    all.extend_from_slice(&pairs);
    let replay = Config::for_replay(relay_testkit::config::vars(&all)).expect("no key needed");
    assert!(replay.keys.is_empty() && replay.keys_secret_arn.is_none());
    assert!(!replay.allow_unsigned, "the relay's policy is unchanged");
    assert_eq!(replay.sources.len(), 3);
    assert!(
        replay
            .sources
            .iter()
            .all(|s| s.keys.is_none() && s.secret_arn.is_none())
    );
}

#[test]
fn reports_every_bad_variable_by_name_without_echoing_secrets() {
    let err = config_errors(&[
        ("RELAY_HMAC_KEYS", "not json s3cret"),
        ("RELAY_HMAC_SECRET", ""),
        ("RELAY_MAX_BODY_BYTES", "0"),
        ("RELAY_MAX_CLOCK_SKEW_SECS", "-1"),
        ("RELAY_ALLOW_UNSIGNED", "maybe"),
        ("RELAY_LOG_FORMAT", "xml"),
        ("RELAY_PAYLOAD_FIELD", ""),
        ("RELAY_LISTEN", "nowhere"),
    ]);
    assert_eq!(
        vars_of(&err),
        [
            "RELAY_HMAC_KEYS",
            "RELAY_HMAC_SECRET",
            "RELAY_ALLOW_UNSIGNED",
            "RELAY_MAX_CLOCK_SKEW_SECS",
            "RELAY_MAX_BODY_BYTES",
            "RELAY_PAYLOAD_FIELD",
            "RELAY_LOG_FORMAT",
            "RELAY_LISTEN",
            "RELAY_HMAC_KEYS",
            "RELAY_FILE_SINK",
        ]
    );
    let text = err.to_string();
    assert!(!text.contains("s3cret"), "secrets are never echoed: {text}");
    assert!(
        text.contains(r#"got "maybe""#) && text.contains(r#"got "nowhere""#),
        "{text}"
    );
}

#[test]
fn keys_rotate_and_are_masked() {
    let c = config(&[
        (
            "RELAY_HMAC_KEYS",
            r#"{"old": "s3cret-1", "new": "s3cret-2"}"#,
        ),
        ("RELAY_MAX_CLOCK_SKEW_SECS", "0"),
        ("RELAY_FILE_SINK", "/tmp/x.jsonl"),
    ]);
    assert_eq!(c.keys.key_ids().collect::<Vec<_>>(), ["new", "old"]);
    assert_eq!(c.max_clock_skew, None);
    assert_eq!(
        effective(&c, "RELAY_HMAC_KEYS"),
        r#"{"new":"****","old":"****"}"#
    );
    assert!(!format!("{:?} {c:?}", c.effective()).contains("s3cret"));
}

#[test]
fn json_logs_on_the_platforms() {
    let c = config(&[
        ("RELAY_HMAC_SECRET", "s"),
        ("RELAY_FILE_SINK", "-"),
        ("K_SERVICE", "relay"),
    ]);
    assert_eq!(c.log_format, LogFormat::Json);
    assert_eq!(effective(&c, "RELAY_LOG_FORMAT"), "json");
}

#[test]
fn batches_wait_a_millisecond_except_on_lambda() {
    let base = [("RELAY_HMAC_SECRET", "s"), ("RELAY_FILE_SINK", "-")];
    let c = config(&base);
    assert_eq!(c.batch_wait, Duration::from_millis(1));
    assert_eq!(effective(&c, "RELAY_BATCH_WAIT_MS"), "1");
    // One notification at a time per instance: nothing could join a waiting batch.
    let lambda = [base[0], base[1], ("AWS_LAMBDA_FUNCTION_NAME", "relay")];
    let c = config(&lambda);
    assert_eq!(c.batch_wait, Duration::ZERO);
    assert_eq!(effective(&c, "RELAY_BATCH_WAIT_MS"), "0");
    let c = config(&[base[0], base[1], ("RELAY_BATCH_WAIT_MS", "20")]);
    assert_eq!(c.batch_wait, Duration::from_millis(20));
    for bad in ["1001", "-1", "1.5", "soon"] {
        let err = config_errors(&[base[0], base[1], ("RELAY_BATCH_WAIT_MS", bad)]);
        assert_eq!(vars_of(&err), ["RELAY_BATCH_WAIT_MS"], "{bad}");
        assert!(err.to_string().contains("between 0 and 1000"), "{err}");
    }
}

#[test]
fn queue_and_topic_sinks_from_variables() {
    let c = config(&[
        ("RELAY_HMAC_SECRET", "s"),
        (
            "RELAY_SQS_QUEUE_URL",
            "https://sqs.eu-west-1.amazonaws.com/123456789012/dss.fifo",
        ),
        (
            "RELAY_SNS_TOPIC_ARN",
            "arn:aws:sns:us-east-1:123456789012:dss",
        ),
        ("RELAY_SNS_MAX_MESSAGE_BYTES", "1000"),
        ("RELAY_PUBSUB_TOPIC", "projects/green/topics/dss-events"),
        ("RELAY_PUBSUB_ORDERING", "true"),
        ("PUBSUB_EMULATOR_HOST", "127.0.0.1:8085"),
    ]);
    let names: Vec<&str> = c.sinks.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["sqs", "sns", "pubsub"]);
    let shapes: Vec<_> = c
        .sinks
        .iter()
        .map(|s| s.target.shape(&s.selection).unwrap())
        .collect();
    assert_eq!(
        shapes[0].group_id.as_ref().map(Template::source),
        Some("{subscription_id}")
    );
    assert_eq!(shapes[1].group_id, None, "a standard topic has no group id");
    assert_eq!(
        shapes[2].ordering_key.as_ref().map(Template::source),
        Some("{match.bundle_uuid}")
    );
    assert_eq!(c.sinks[1].target.max_message_bytes(), Some(1000));
    assert!(
        matches!(&c.sinks[2].target, Target::PubSub(p) if p.emulator_host.as_deref() == Some("127.0.0.1:8085"))
    );
}

#[test]
fn malformed_destinations_are_named() {
    let err = config_errors(&[
        ("RELAY_HMAC_SECRET", "s"),
        ("RELAY_SQS_QUEUE_URL", "dss-events"),
        ("RELAY_SNS_TOPIC_ARN", "arn:aws:sqs:us-east-1:1:q"),
        ("RELAY_PUBSUB_TOPIC", "dss-events"),
        ("RELAY_SINK_TIMEOUT_MS", "0"),
    ]);
    assert_eq!(
        vars_of(&err),
        [
            "RELAY_SINK_TIMEOUT_MS",
            "RELAY_SQS_QUEUE_URL",
            "RELAY_SNS_TOPIC_ARN",
            "RELAY_PUBSUB_TOPIC",
            "RELAY_FILE_SINK",
        ]
    );
}

const FILE: &str = r#"
[relay]
hmac_secret = "from-file"
max_body_bytes = 2048

[sinks.q]
type = "sqs"
queue_url = "https://sqs.eu-west-1.amazonaws.com/123456789012/dss.fifo"
message_group_id = "{match.bundle_uuid}"

[sinks.t]
type = "pubsub"
topic = "projects/p/topics/dss-events"
ordering_key = "{subscription_id}"

[[routes]]
name = "creates"
match = { event_type = ["CREATE"] }
to = ["q", "t"]
"#;

#[test]
fn a_file_names_sinks_and_routes_and_variables_override_it() {
    let file = ConfigFile::new(FILE);
    let c = file.load(&[("RELAY_MAX_BODY_BYTES", "4096")]).unwrap();
    assert_eq!(c.max_body_bytes, 4096, "the variable wins over [relay]");
    assert!(c.keys.has_catch_all(), "hmac_secret came from [relay]");
    let names: Vec<&str> = c.sinks.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["q", "t"]);
    let q = c.sinks[0].target.shape(&c.sinks[0].selection).unwrap();
    let ids = [&q.group_id, &q.dedup_id].map(|id| id.as_ref().map(Template::source));
    assert_eq!(ids, [Some("{match.bundle_uuid}"), Some("{$dedup_key}")]);
    assert_eq!(c.router.routes().len(), 1);
    assert_eq!(
        effective(&c, "route creates"),
        r#"match {"event_type":["CREATE"]} -> q, t"#
    );
}

#[test]
fn file_errors_name_the_file_the_place_and_the_field() {
    // Edits of FILE (what is replaced, by what), each with what its error must say.
    #[rustfmt::skip]
    let edits = [
        (r#"type = "sqs""#, r#"type = "kafka""#, "unknown variant `kafka`"),
        ("queue_url", "queue", "unknown field `queue`"),
        ("/dss.fifo", "/dss", r#"sink "q", message_group_id: only FIFO"#),
        (r#"topic = "projects/p/topics/dss-events""#, r#"topic_arn = "x""#, "unknown field `topic_arn`"),
        ("{subscription_id}", "{subscription_id", "unclosed placeholder"),
        ("max_body_bytes = 2048", "listen_port = 1", r#"unknown key "listen_port""#),
        ("max_body_bytes = 2048", r#"sqs_queue_url = "x""#, "destinations go under [sinks.<name>]"),
        (r#"to = ["q", "t"]"#, r#"to = ["q"]"#, r#"the sink "t" is not used by any route"#),
    ];
    type Case<'a> = (String, &'a [(&'a str, &'a str)], &'a str);
    let mut cases: Vec<Case<'_>> = edits
        .iter()
        .map(|&(from, to, expected)| (FILE.replace(from, to), &[][..], expected))
        .collect();
    let queue = [(
        "RELAY_SQS_QUEUE_URL",
        "https://sqs.us-east-1.amazonaws.com/1/q",
    )];
    cases.push((FILE.to_owned(), &queue, "name sinks in one place"));
    let env = [("RELAY_HMAC_SECRET", "s"), ("RELAY_FILE_SINK", "-")];
    let routes_only = "[[routes]]\nname = \"a\"\nto = [\"x\"]\n".to_owned();
    cases.push((routes_only, &env, "but no [sinks.<name>]"));
    assert_eq!(cases.len(), 10);
    for (text, pairs, expected) in cases {
        let file = ConfigFile::new(&text);
        let err = file.load(pairs).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(expected),
            "expected {expected:?} in: {message}"
        );
        assert!(err.0.iter().any(|e| e.var == "RELAY_CONFIG"), "{message}");
        assert!(
            message.contains("relay.toml"),
            "the file is named: {message}"
        );
    }
}

#[test]
fn every_relay_key_works_from_the_file_or_is_refused_with_its_location() {
    let values = [
        ("hmac_keys", r#"{ k = "s3cret" }"#, r#"{"k":"****"}"#),
        ("hmac_secret", r#""s3cret""#, "****"),
        (
            "hmac_keys_secret_arn",
            r#""arn:aws:secretsmanager:us-east-1:1:secret:x""#,
            "arn:aws:secretsmanager:us-east-1:1:secret:x",
        ),
        ("allow_unsigned", "true", "true"),
        ("max_clock_skew_secs", "7", "7"),
        ("max_body_bytes", "2048", "2048"),
        ("payload_field", r#""p""#, "p"),
        ("sink_timeout_ms", "1234", "1234"),
        ("log_format", r#""json""#, "json"),
        ("metrics", r#""emf""#, "emf"),
        (
            "routes_url",
            r#""/srv/relay/routes.toml""#,
            "/srv/relay/routes.toml",
        ),
        ("routes_refresh_secs", "3", "3"),
        ("routes_max_bytes", "65536", "65536"),
        ("split_max_ttl_secs", "3600", "3600"),
        (
            "ledger_url",
            r#""dynamodb://relay-ledger""#,
            "dynamodb://relay-ledger",
        ),
        ("ledger_retention_secs", "864000", "864000"),
        ("ledger_key", r#""bundle_event""#, "bundle_event"),
        ("ledger_record_filtered", "false", "false"),
        (
            "archive_url",
            r#""s3://relay-archive/dss/""#,
            "s3://relay-archive/dss/",
        ),
        ("archive_key", r#""a key of sixteen bytes or more""#, "****"),
        (
            "archive_stream",
            r#""firehose://relay-archive""#,
            "firehose://relay-archive",
        ),
        ("archive_retention_days", "90", "90"),
        (
            "archive_key_secret_arn",
            r#""arn:aws:secretsmanager:us-east-1:1:secret:a""#,
            "arn:aws:secretsmanager:us-east-1:1:secret:a",
        ),
        ("batch_wait_ms", "5", "5"),
        ("warm_connections", "false", "false"),
        ("listen", r#""127.0.0.1:9""#, "127.0.0.1:9"),
        ("header_timeout_ms", "700", "700"),
        ("body_timeout_ms", "900", "900"),
        ("body_min_bytes_per_sec", "2048", "2048"),
        ("max_concurrent_requests", "3", "3"),
        ("max_buffered_bytes", "100000", "100000"),
        ("transform_timeout_ms", "250", "250"),
    ];
    for setting in SETTINGS {
        let value = values.iter().find(|(key, _, _)| *key == setting.key);
        let text = format!(
            "[relay]\nhmac_secret = \"x\"\n{} = {}\n",
            setting.key,
            value.map_or("\"v\"", |v| v.1)
        );
        let text = text.replace("hmac_secret = \"x\"\nhmac_secret", "hmac_secret");
        // The archive's key, which archive_url needs, is not in the file: that setting alone is.
        let key = match setting.key {
            "archive_url" => vec![("RELAY_ARCHIVE_KEY", "a key of sixteen bytes or more")],
            "archive_stream" => vec![
                ("RELAY_ARCHIVE_KEY", "a key of sixteen bytes or more"),
                ("RELAY_ARCHIVE_URL", "s3://relay-archive/dss/"),
            ],
            _ => vec![],
        };
        let result = ConfigFile::new(&text).load(&[&[("RELAY_FILE_SINK", "-")], &key[..]].concat());
        match (setting.in_file, value) {
            (true, Some((_, _, shown))) => {
                let c = result.unwrap_or_else(|e| panic!("{}: {e}", setting.key));
                assert_eq!(effective(&c, setting.var), *shown, "{}", setting.key);
            }
            (false, None) => {
                let message = result.unwrap_err().to_string();
                assert!(
                    message.contains("relay.toml:3:"),
                    "{}: {message}",
                    setting.key
                );
                assert!(message.contains(setting.key), "{message}");
            }
            (in_file, value) => panic!(
                "{}: in_file {in_file} and a test value {value:?}",
                setting.key
            ),
        }
    }
    let c = ConfigFile::new(
        "[relay]\nhmac_secret = \"x\"\nlog_format = \"json\"\nlisten = \"127.0.0.1:9\"\n",
    )
    .load(&[("RELAY_FILE_SINK", "-")])
    .unwrap();
    assert_eq!(
        (c.log_format, c.listen.map(|a| a.port())),
        (LogFormat::Json, Some(9))
    );
}

/// An engine writing the archive needs the archive it delivers to, and one it delivers to:
/// each refusal names the variable.
#[test]
fn an_archive_stream_needs_the_archive_it_delivers_to() {
    const KEY: (&str, &str) = ("RELAY_ARCHIVE_KEY", "a key of sixteen bytes or more");
    let cases: [(&[(&str, &str)], &str); 3] = [
        (
            &[("RELAY_ARCHIVE_STREAM", "firehose://archive")],
            "is firehose://archive, but RELAY_ARCHIVE_URL, where it delivers, is not set",
        ),
        (
            &[
                ("RELAY_ARCHIVE_STREAM", "firehose://archive"),
                ("RELAY_ARCHIVE_URL", "target/run/archive"),
                KEY,
            ],
            "firehose://archive delivers to an s3:// archive; RELAY_ARCHIVE_URL is target/run/archive",
        ),
        (
            &[
                ("RELAY_ARCHIVE_STREAM", "kinesis://archive"),
                ("RELAY_ARCHIVE_URL", "s3://relay-archive/dss/"),
                KEY,
            ],
            "expected firehose://<delivery stream name>",
        ),
    ];
    for (vars, expected) in cases {
        let err = config_errors(
            &[
                &[("RELAY_HMAC_SECRET", "x"), ("RELAY_FILE_SINK", "-")],
                vars,
            ]
            .concat(),
        );
        assert_eq!(vars_of(&err), ["RELAY_ARCHIVE_STREAM"], "{err}");
        assert!(err.to_string().contains(expected), "{err}");
    }
    let through = config(&[
        ("RELAY_HMAC_SECRET", "x"),
        ("RELAY_FILE_SINK", "-"),
        ("RELAY_ARCHIVE_STREAM", "firehose://archive"),
        ("RELAY_ARCHIVE_URL", "s3://relay-archive/dss/"),
        KEY,
    ]);
    let archive = through.archive.expect("an archive");
    assert_eq!(
        archive.stream.map(|s| s.to_string()).as_deref(),
        Some("firehose://archive")
    );
}

#[test]
fn a_missing_file_is_named() {
    let err = config_errors(&[("RELAY_CONFIG", "/nonexistent/relay.toml")]);
    assert_eq!(vars_of(&err), ["RELAY_CONFIG"]);
    assert!(
        err.to_string()
            .contains("cannot read /nonexistent/relay.toml")
    );
}

#[test]
fn spots_unknown_relay_variables() {
    let names = ["RELAY_HMAC_SECERT", "RELAY_FILE_SINK", "PATH"].map(String::from);
    assert_eq!(Config::unknown_vars(names), ["RELAY_HMAC_SECERT"]);
}

#[test]
fn the_configuration_page_is_the_settings_table() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/configuration.md"
    ))
    .unwrap();
    let start = page
        .find("<!-- settings:start -->")
        .expect("the start marker")
        + "<!-- settings:start -->".len();
    let end = page.find("<!-- settings:end -->").expect("the end marker");
    let expected = markdown_table();
    assert_eq!(
        page[start..end].trim(),
        expected.trim(),
        "docs/configuration.md's settings table should read:\n{expected}"
    );
}

#[test]
fn routes_url_and_refresh_are_checked() {
    let err = config_errors(&[
        ("RELAY_HMAC_SECRET", "s"),
        ("RELAY_FILE_SINK", "-"),
        ("RELAY_ROUTES_URL", "https://example.org/routes.toml"),
        ("RELAY_ROUTES_REFRESH_SECS", "0"),
    ]);
    assert_eq!(
        vars_of(&err),
        ["RELAY_ROUTES_URL", "RELAY_ROUTES_REFRESH_SECS"]
    );
    let c = config(&[
        ("RELAY_HMAC_SECRET", "s"),
        ("RELAY_FILE_SINK", "-"),
        ("RELAY_ROUTES_URL", "gs://routes/relay.toml"),
    ]);
    assert_eq!(c.routes_refresh, std::time::Duration::from_secs(10));
    assert_eq!(c.routes_url.unwrap().to_string(), "gs://routes/relay.toml");
}

#[test]
fn a_ledger_retention_no_longer_than_a_lease_is_refused() {
    let base = [
        ("RELAY_HMAC_SECRET", "s"),
        ("RELAY_FILE_SINK", "-"),
        ("RELAY_LEDGER_URL", "/tmp/unused-ledger.db"),
    ];
    // A lease lasts up to the sink timeout (5 s by default) plus 2 s.
    for (retention, timeout) in [("1", None), ("7", None), ("2", Some("100")), ("0", None)] {
        let mut vars = base.to_vec();
        vars.push(("RELAY_LEDGER_RETENTION_SECS", retention));
        vars.extend(timeout.map(|t| ("RELAY_SINK_TIMEOUT_MS", t)));
        let err = config_errors(&vars);
        assert_eq!(
            vars_of(&err),
            ["RELAY_LEDGER_RETENTION_SECS"],
            "{retention}"
        );
        assert!(
            err.to_string().contains("longer than an attempt's lease"),
            "{err}"
        );
    }
    for (retention, timeout) in [("8", None), ("3", Some("100"))] {
        let mut vars = base.to_vec();
        vars.push(("RELAY_LEDGER_RETENTION_SECS", retention));
        vars.extend(timeout.map(|t| ("RELAY_SINK_TIMEOUT_MS", t)));
        let ledger = config(&vars).ledger.unwrap();
        assert_eq!(ledger.retention.as_secs().to_string(), retention);
    }
}
