//! The archive's infrastructure, held to the archive's design: the S3 bucket the Lambda writes
//! and the Cloud Storage bucket the Cloud Run service writes, each object created once under
//! `PREFIX/YYYY/MM/DD/HH/<dedup key>`, read back only to check it, and never listed,
//! overwritten or deleted by the relay; the key records are sealed with, from a secret store;
//! what the operators who replay (`archive_readers`, `relay replay`) may do; the
//! `RELAY_ARCHIVE_URL` that names the bucket and prefix; and the alarm on notifications still
//! undelivered after an hour.

use std::collections::BTreeSet;

use hcl::{Block, Body, Expression};
use relay_core::archive::ArchiveUrl;
use serde_json::Value;

use crate::eval::Scope;
use crate::model::{self, Config, attr, label, nested};
use crate::platform::{EnvValue, cloud_run_environment, lambda_environment, plain_when, set_by};
use crate::policy::{
    Stmt, assert_condition_on, assert_sources, assert_texts, document, find, only_block,
    output_source, relay_metric_alarm, resource_with, source, text,
};

/// The variable that turns the archive on, in both relay modules.
const SWITCH: &str = "var.archive_enabled";
/// The prefix the archive's objects are written under by default.
const DEFAULT_PREFIX: &str = "notifications/";
/// Days an archived notification is kept by default.
const DEFAULT_RETENTION_DAYS: &str = "30";
/// A bucket name for the samples: the default name needs the account id (AWS), which nothing
/// offline knows.
const SAMPLE_BUCKET: &str = "dss-relay-archive-sample";
/// `project_id` has no default, and the examples pass it from variables without one.
const SAMPLE_PROJECT: &str = "relay-project";
/// The Cloud Run service account, as the grants name it.
const SERVICE_ACCOUNT: &str = "\"serviceAccount:${google_service_account.this.email}\"";
/// The longest AWS region name (ap-southeast-5 and the like) and an account id.
const LONGEST_REGION: usize = 14;
const ACCOUNT_ID: usize = 12;

////////////////////////////////////////////////////////////////////////////////////////////////
// AWS: the bucket
////////////////////////////////////////////////////////////////////////////////////////////////

/// The S3 bucket exists with the archive and is private (all four public access block settings,
/// bucket owner enforced), encrypted (SSE-S3 by default, SSE-KMS with `archive_kms_key_arn`),
/// not destroyed with its objects unless `archive_force_destroy` (false by default), and its
/// lifecycle rule expires the objects under the prefix after `archive_retention_days` (30 by
/// default, at least 1) and aborts incomplete uploads. No versioning: nothing overwrites an
/// object.
#[test]
fn s3_archive_bucket_is_private_encrypted_and_expires_under_the_prefix() {
    let config = model::module("aws-relay");
    resource_with(
        &config,
        "aws_s3_bucket",
        "archive",
        &[
            ("count", &gated_count()),
            ("bucket", "local.archive_bucket"),
            ("force_destroy", "var.archive_force_destroy"),
        ],
    );
    assert_eq!(
        variable_default(&config, "archive_force_destroy").as_deref(),
        Some("false")
    );

    let on_bucket = "aws_s3_bucket.archive[0].id";
    let block = resource_with(
        &config,
        "aws_s3_bucket_public_access_block",
        "archive",
        &[("bucket", on_bucket)],
    );
    for setting in [
        "block_public_acls",
        "block_public_policy",
        "ignore_public_acls",
        "restrict_public_buckets",
    ] {
        assert_eq!(
            source(block, setting).as_deref(),
            Some("true"),
            "aws-relay: the archive's public access block: {setting}"
        );
    }

    let ownership = resource_with(
        &config,
        "aws_s3_bucket_ownership_controls",
        "archive",
        &[("bucket", on_bucket)],
    );
    let rule = only_block(
        ownership,
        "rule",
        "aws-relay: the archive's ownership controls",
    );
    assert_texts(rule, &[("object_ownership", "BucketOwnerEnforced")]);

    let sse = resource_with(
        &config,
        "aws_s3_bucket_server_side_encryption_configuration",
        "archive",
        &[("bucket", on_bucket)],
    );
    let rule = only_block(sse, "rule", "aws-relay: the archive's encryption");
    let default = only_block(
        rule,
        "apply_server_side_encryption_by_default",
        "aws-relay: the archive's encryption rule",
    );
    assert_eq!(
        source(default, "sse_algorithm").as_deref(),
        Some("var.archive_kms_key_arn == null ? \"AES256\" : \"aws:kms\""),
        "aws-relay: SSE-S3 by default, SSE-KMS with archive_kms_key_arn"
    );
    assert_sources(default, &[("kms_master_key_id", "var.archive_kms_key_arn")]);
    assert_eq!(
        variable_default(&config, "archive_kms_key_arn").as_deref(),
        Some("null")
    );

    let lifecycle = resource_with(
        &config,
        "aws_s3_bucket_lifecycle_configuration",
        "archive",
        &[("bucket", on_bucket)],
    );
    let rules: Vec<&Body> = nested(lifecycle, "rule").map(Block::body).collect();
    for rule in &rules {
        assert_texts(rule, &[("status", "Enabled")]);
    }
    let expiring: Vec<&&Body> = rules
        .iter()
        .filter(|r| nested(r, "expiration").next().is_some())
        .collect();
    assert_eq!(
        expiring.len(),
        1,
        "aws-relay: one rule expires notifications"
    );
    let filter = only_block(expiring[0], "filter", "aws-relay: the expiring rule");
    assert_sources(filter, &[("prefix", "var.archive_prefix")]);
    let expiration = only_block(expiring[0], "expiration", "aws-relay: the expiring rule");
    assert_sources(expiration, &[("days", "var.archive_retention_days")]);
    let aborts = rules
        .iter()
        .flat_map(|r| nested(r, "abort_incomplete_multipart_upload"))
        .filter(|a| attr(a.body(), "days_after_initiation").is_some())
        .count();
    assert_eq!(aborts, 1, "aws-relay: incomplete uploads are aborted");
    assert_retention_and_prefix_variables(&config);

    assert!(
        !config
            .resources("aws_s3_bucket_versioning")
            .iter()
            .any(|(name, _)| *name == "archive"),
        "aws-relay: the archive is not versioned (nothing overwrites an object); a versioned \
         archive needs a noncurrent-version expiration"
    );
}

////////////////////////////////////////////////////////////////////////////////////////////////
// AWS: what the relay may do
////////////////////////////////////////////////////////////////////////////////////////////////

/// The Lambda role's grants on the archive: its key's secret, `s3:PutObject` on the objects
/// under the prefix (`arn:…:s3:::BUCKET/PREFIX*`) only with If-None-Match, and `s3:GetObject`
/// on the same objects (reading back what a 412 found), granted exactly when the archive is; no
/// statement of the role lists or deletes anything in the archive, and with
/// `archive_kms_key_arn` the role may only `kms:GenerateDataKey` and `kms:Decrypt` on that key.
#[test]
fn lambda_archive_grant_is_create_and_read_back_under_the_prefix_only() {
    let config = model::module("aws-relay");
    let statements = document(&config, "this");
    let on_archive: Vec<&Stmt<'_>> = statements
        .iter()
        .filter(|s| s.mentions("archive"))
        .collect();
    let sids: Vec<&str> = on_archive.iter().map(|s| s.sid.as_str()).collect();
    assert_eq!(
        sids,
        [
            "ReadOwnArchiveKey",
            "WriteArchive",
            "WriteArchiveStream",
            "ReadArchivedRecord",
            "EncryptArchive"
        ],
        "aws-relay: the role's statements on the archive"
    );
    let key = on_archive[0];
    assert_eq!(key.actions, ["secretsmanager:GetSecretValue"]);
    assert_gated(key, SWITCH, "aws_secretsmanager_secret.archive_key[0].arn");
    let stream = on_archive[2];
    assert_eq!(
        stream.actions,
        ["firehose:PutRecord", "firehose:PutRecordBatch"],
        "aws-relay: the relay only puts records in the archive's stream"
    );
    assert_gated(stream, "local.archive_firehose", "local.archive_stream_arn");
    let read = on_archive[3];
    assert_eq!(read.actions, ["s3:GetObject"]);
    assert_gated(read, SWITCH, "local.archive_objects_arn");
    assert!(read.conditions().is_empty());

    let write = on_archive[1];
    assert_eq!(write.effect, "Allow");
    assert_eq!(
        write.actions,
        ["s3:PutObject"],
        "aws-relay: the relay only creates archive objects"
    );
    assert_gated(write, SWITCH, "local.archive_objects_arn");
    assert_eq!(
        write.conditions(),
        [(
            "Null".to_owned(),
            "s3:if-none-match".to_owned(),
            vec!["false".to_owned()]
        )],
        "aws-relay: WriteArchive only with If-None-Match"
    );
    let locals = config.locals();
    assert_eq!(
        locals["archive_objects_arn"].to_string(),
        format!("{SWITCH} ? \"${{local.archive_bucket_arn}}/${{var.archive_prefix}}*\" : null"),
        "aws-relay: the role writes only under the prefix"
    );
    assert_eq!(
        locals["archive_bucket_arn"].to_string(),
        format!("{SWITCH} ? \"arn:${{local.partition}}:s3:::${{local.archive_bucket}}\" : null")
    );

    let encrypt = on_archive[4];
    assert_eq!(encrypt.actions, ["kms:GenerateDataKey", "kms:Decrypt"]);
    assert_gated(
        encrypt,
        "var.archive_enabled && var.archive_kms_key_arn != null",
        "var.archive_kms_key_arn",
    );

    // Nothing else of the role touches the archive, or S3 anywhere but the routes document.
    for statement in &statements {
        for action in &statement.actions {
            let reads = action.starts_with("s3:") && action != "s3:PutObject";
            let read_back = statement.sid == "ReadArchivedRecord" && action == "s3:GetObject";
            assert!(
                !(reads && statement.mentions("archive")) || read_back,
                "aws-relay: {} grants {action} on the archive",
                statement.sid
            );
            assert!(
                !reads || statement.mentions("routes") || read_back,
                "aws-relay: {} grants {action} beyond the routes document",
                statement.sid
            );
            assert!(
                action != "s3:PutObject" || statement.sid == "WriteArchive",
                "aws-relay: {} grants s3:PutObject",
                statement.sid
            );
        }
    }
}

/// With `archive_firehose` (the default), the records go through a delivery stream the module
/// creates: it delivers to the archive's bucket under `archive_prefix` (Firehose adds the
/// hour), uncompressed (replay reads the lines as they are), encrypted, with a role of its own
/// that only Firehose of this account may assume, and that may only create objects under the
/// prefix, find the bucket, and log to the relay's log group.
#[test]
fn the_archive_stream_delivers_under_the_prefix_with_a_role_of_its_own() {
    let config = model::module("aws-relay");
    assert_eq!(
        variable_default(&config, "archive_firehose").as_deref(),
        Some("true"),
        "aws-relay: the archive goes through Firehose by default"
    );
    assert_eq!(
        config.locals()["archive_firehose"].to_string(),
        "var.archive_enabled && var.archive_firehose"
    );
    let stream = config.resource("aws_kinesis_firehose_delivery_stream", "archive");
    let body = stream.body();
    assert_sources(body, &[("count", "local.archive_firehose ? 1 : 0")]);
    assert_texts(body, &[("destination", "extended_s3")]);
    let encryption = only_block(body, "server_side_encryption", "the archive's stream");
    assert_sources(encryption, &[("enabled", "true")]);
    let s3 = only_block(body, "extended_s3_configuration", "the archive's stream");
    assert_sources(
        s3,
        &[
            ("bucket_arn", "local.archive_bucket_arn"),
            ("prefix", "var.archive_prefix"),
            ("role_arn", "aws_iam_role.archive_delivery[0].arn"),
        ],
    );
    assert_texts(s3, &[("compression_format", "UNCOMPRESSED")]);
    // relay replay reads an object whole, within a record's size and 16 MiB more.
    assert_sources(s3, &[("buffering_size", "5")]);
    assert!(attr(s3, "error_output_prefix").is_none());

    let trust = document(&config, "archive_delivery_trust");
    assert_eq!(trust.len(), 1);
    assert_eq!(trust[0].actions, ["sts:AssumeRole"]);
    assert_eq!(
        trust[0].principals(),
        [(
            "Service".to_owned(),
            "[\"firehose.amazonaws.com\"]".to_owned()
        )]
    );
    let trust_conditions = trust[0].conditions();
    assert_eq!(
        trust_conditions,
        [(
            "StringEquals".to_owned(),
            "sts:ExternalId".to_owned(),
            vec!["local.account_id".to_owned()]
        )],
        "aws-relay: only Firehose on behalf of this account"
    );

    let delivery = document(&config, "archive_delivery");
    let grants: Vec<(&str, &[String], String)> = delivery
        .iter()
        .map(|s| (s.sid.as_str(), s.actions.as_slice(), s.resources()))
        .collect();
    assert_eq!(
        grants,
        [
            (
                "DeliverArchiveObjects",
                &[
                    "s3:PutObject".to_owned(),
                    "s3:AbortMultipartUpload".to_owned()
                ][..],
                "[local.archive_objects_arn]".to_owned()
            ),
            (
                "FindArchiveBucket",
                &[
                    "s3:GetBucketLocation".to_owned(),
                    "s3:ListBucketMultipartUploads".to_owned()
                ][..],
                "[local.archive_bucket_arn]".to_owned()
            ),
            (
                "LogArchiveDelivery",
                &["logs:PutLogEvents".to_owned()][..],
                "[\"${aws_cloudwatch_log_group.this.arn}:log-stream:archive-delivery\"]".to_owned()
            ),
            (
                "EncryptArchiveObjects",
                &["kms:GenerateDataKey".to_owned(), "kms:Decrypt".to_owned()][..],
                "[statement.value]".to_owned()
            ),
        ],
        "aws-relay: Firehose's role delivers under the prefix and does nothing else"
    );
    assert_eq!(
        delivery[3].gate.as_deref(),
        Some("var.archive_kms_key_arn != null ? [var.archive_kms_key_arn] : []")
    );
}

/// Firehose answers the relay before it writes to the bucket: a delivery that keeps failing
/// (its role, the bucket's policy, a key) alarms on the age of the oldest record the stream
/// holds, above twice the longest buffering interval, so that buffering alone never fires it.
#[test]
fn a_stuck_archive_delivery_alarms() {
    let config = model::module("aws-relay");
    let alarm = resource_with(
        &config,
        "aws_cloudwatch_metric_alarm",
        "archive_delivery",
        &[(
            "count",
            "var.alarms_enabled && local.archive_firehose ? 1 : 0",
        )],
    );
    assert_texts(
        alarm,
        &[
            ("namespace", "AWS/Firehose"),
            ("metric_name", "DeliveryToS3.DataFreshness"),
        ],
    );
    assert_eq!(
        attr(alarm, "dimensions").map(|d| d.to_string().split_whitespace().collect::<String>()),
        Some("{DeliveryStreamName=local.archive_stream}".to_owned())
    );
    let threshold: u64 = source(alarm, "threshold").unwrap().parse().unwrap();
    let variables = config.variables();
    let longest = nested(
        variables["archive_firehose_buffer_seconds"].body(),
        "validation",
    )
    .map(|v| source(v.body(), "condition").unwrap_or_default())
    .collect::<String>();
    assert!(longest.contains("<= 900"), "{longest}");
    assert!(threshold >= 2 * 900, "{threshold}");
    assert_texts(alarm, &[("treat_missing_data", "notBreaching")]);
}

/// The archive's bucket policy refuses every request without TLS and the relay's `PutObject`
/// without `If-None-Match` (condition key `s3:if-none-match` absent), so that the role cannot
/// overwrite an object whatever its own policy says; and it is the bucket's policy.
#[test]
fn archive_bucket_policy_refuses_insecure_transport_and_overwrites() {
    let config = model::module("aws-relay");
    resource_with(
        &config,
        "aws_s3_bucket_policy",
        "archive",
        &[
            (
                "policy",
                "data.aws_iam_policy_document.archive_bucket[0].json",
            ),
            ("count", &gated_count()),
        ],
    );
    let statements = document(&config, "archive_bucket");

    let tls = find(&statements, "DenyInsecureTransport");
    assert_eq!(tls.effect, "Deny");
    assert_eq!(tls.actions, ["s3:*"]);
    assert_eq!(
        tls.resources(),
        "[aws_s3_bucket.archive[0].arn, \"${aws_s3_bucket.archive[0].arn}/*\"]"
    );
    assert_eq!(tls.principals(), [("*".to_owned(), "[\"*\"]".to_owned())]);
    assert_eq!(
        tls.conditions(),
        [(
            "Bool".to_owned(),
            "aws:SecureTransport".to_owned(),
            vec!["false".to_owned()]
        )]
    );

    let overwrite = find(&statements, "DenyRelayOverwrite");
    assert_eq!(overwrite.effect, "Deny");
    assert_eq!(overwrite.actions, ["s3:PutObject"]);
    assert_eq!(
        overwrite.resources(),
        "[\"${aws_s3_bucket.archive[0].arn}/*\"]"
    );
    assert_eq!(
        overwrite.principals(),
        [("AWS".to_owned(), "[local.role_arn]".to_owned())],
        "aws-relay: the deny is on the relay's role (the module's, or existing_role_arn)"
    );
    assert_eq!(
        overwrite.conditions(),
        [(
            "Null".to_owned(),
            "s3:if-none-match".to_owned(),
            vec!["true".to_owned()]
        )],
        "aws-relay: the role's PutObject without If-None-Match is refused"
    );
}

/// `archive_readers` get, through the bucket policy, `s3:GetObject` under the prefix and
/// `s3:ListBucket` limited to the prefix, and nothing else; `archive_reader_policy_json`, what
/// `relay replay` calls: the same two, Decrypt on `archive_kms_key_arn`, the configuration
/// file's secret with `relay_config`, and on the ledger what `relay trace` reads (GetItem, Query
/// on the table) and what a replay records (UpdateItem, PutItem), with the ledger.
#[test]
fn archive_readers_may_list_and_read_and_nothing_more() {
    let config = model::module("aws-relay");
    let allows: Vec<Stmt<'_>> = document(&config, "archive_bucket")
        .into_iter()
        .filter(|s| s.effect == "Allow")
        .collect();
    let mut granted = BTreeSet::new();
    for statement in &allows {
        assert_eq!(
            statement.gate.as_deref(),
            Some("length(var.archive_readers) > 0 ? [var.archive_readers] : []"),
            "aws-relay: {} lets in only archive_readers",
            statement.sid
        );
        assert_eq!(
            statement.principals(),
            [("AWS".to_owned(), "statement.value".to_owned())],
            "aws-relay: {}",
            statement.sid
        );
        for action in &statement.actions {
            let (resources, conditions) = match action.as_str() {
                "s3:GetObject" => (
                    "[\"${aws_s3_bucket.archive[0].arn}/${var.archive_prefix}*\"]",
                    vec![],
                ),
                "s3:ListBucket" => (
                    "[aws_s3_bucket.archive[0].arn]",
                    vec![(
                        "StringLike".to_owned(),
                        "s3:prefix".to_owned(),
                        vec!["${var.archive_prefix}*".to_owned()],
                    )],
                ),
                other => panic!("aws-relay: archive readers may not {other}"),
            };
            assert_eq!(statement.resources(), resources, "aws-relay: {action}");
            assert_eq!(statement.conditions(), conditions, "aws-relay: {action}");
            granted.insert(action.clone());
        }
    }
    assert_eq!(
        granted,
        BTreeSet::from(["s3:GetObject".to_owned(), "s3:ListBucket".to_owned()]),
        "aws-relay: what archive_readers get in the bucket policy"
    );

    // The identity policy for `relay replay`.
    let replay = document(&config, "archive_readers");
    let sources = attr(
        config
            .data("aws_iam_policy_document", "archive_readers")
            .body(),
        "source_policy_documents",
    )
    .map(ToString::to_string);
    let sources = sources.unwrap_or_default();
    assert!(
        sources.starts_with("concat(data.aws_iam_policy_document.ledger_readers[*].json,")
            && sources.contains("Statement = local.replay_route_statements"),
        "aws-relay: replay reads the ledger as relay trace does, and the stored routes as the relay does: {sources}"
    );
    // Those statements are the role's own, by Sid, and every one of them is in the role's
    // document: a replay reads the stored routes and sends where they may send.
    let locals = config.locals();
    let filter = locals
        .get("replay_route_statements")
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(
        filter.contains("jsondecode(data.aws_iam_policy_document.this.json).Statement")
            && filter.contains("contains(local.replay_route_sids"),
        "aws-relay: {filter}"
    );
    let role_sids: BTreeSet<String> = document(&config, "this")
        .iter()
        .map(|s| s.sid.clone())
        .collect();
    let copied = locals
        .get("replay_route_sids")
        .map(ToString::to_string)
        .unwrap_or_default();
    for sid in [
        "ReadStoredRoutes",
        "FindStoredRoutes",
        "SendToSplitQueues",
        "PublishToSplitTopics",
        "SendToStoredSinkQueues",
        "PublishToStoredSinkTopics",
    ] {
        assert!(
            copied.contains(&format!("\"{sid}\"")),
            "aws-relay: a replay needs {sid}: {copied}"
        );
        assert!(role_sids.contains(sid), "aws-relay: the role has no {sid}");
    }
    let mut actions = BTreeSet::new();
    for statement in &replay {
        assert_eq!(statement.effect, "Allow");
        for action in &statement.actions {
            let expected = match action.as_str() {
                "s3:ListBucket" => {
                    assert_eq!(
                        statement.conditions(),
                        [(
                            "StringLike".to_owned(),
                            "s3:prefix".to_owned(),
                            vec!["${var.archive_prefix}*".to_owned()]
                        )]
                    );
                    "[local.archive_bucket_arn]"
                }
                "s3:GetObject" => "[local.archive_objects_arn]",
                // The relay's configuration file, which a replay routes by (RELAY_CONFIG).
                "secretsmanager:GetSecretValue" if statement.sid == "ReadRelayConfig" => {
                    assert_gated(
                        statement,
                        "var.relay_config != null",
                        "aws_secretsmanager_secret.relay_config[0].arn",
                    );
                    "[statement.value]"
                }
                "secretsmanager:GetSecretValue" => "aws_secretsmanager_secret.archive_key[*].arn",
                "sqs:SendMessage" => {
                    assert_gated(statement, "local.sqs_enabled", "local.queue_arn");
                    "[statement.value]"
                }
                "sns:Publish" => {
                    assert_gated(statement, "local.sns_enabled", "var.sns_topic_arn");
                    "[statement.value]"
                }
                "kms:GenerateDataKey" | "kms:Decrypt"
                    if statement.sid == "EncryptForDestination" =>
                {
                    "statement.value"
                }
                "kms:Decrypt" if statement.sid == "DecryptArchiveKey" => {
                    assert_gated(statement, "var.kms_key_arn != null", "var.kms_key_arn");
                    "[statement.value]"
                }
                "kms:Decrypt" => {
                    assert_gated(
                        statement,
                        "var.archive_kms_key_arn != null",
                        "var.archive_kms_key_arn",
                    );
                    "[statement.value]"
                }
                "dynamodb:UpdateItem" | "dynamodb:PutItem" => {
                    assert_gated(statement, "var.ledger_enabled", "local.ledger_table_arn");
                    "[statement.value]"
                }
                other => panic!("aws-relay: relay replay calls no {other}"),
            };
            assert_eq!(
                statement.resources(),
                expected,
                "aws-relay: replay's {action}"
            );
            actions.insert(action.clone());
        }
    }
    for statement in document(&config, "ledger_readers") {
        actions.extend(statement.actions.iter().cloned());
    }
    let expected: BTreeSet<String> = [
        "s3:ListBucket",
        "s3:GetObject",
        "secretsmanager:GetSecretValue",
        "kms:Decrypt",
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        "dynamodb:PutItem",
        "sqs:SendMessage",
        "sns:Publish",
        "kms:GenerateDataKey",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(actions, expected, "aws-relay: what relay replay may call");
    assert_eq!(
        output_source(&config, "archive_reader_policy_json"),
        "one(data.aws_iam_policy_document.archive_readers[*].json)"
    );
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Both clouds: the archive's key, RELAY_ARCHIVE_URL
////////////////////////////////////////////////////////////////////////////////////////////////

/// The key records are sealed with reaches the relay from a secret store exactly when the
/// archive is on, never as a plain value: on Lambda the secret's ARN
/// (`RELAY_ARCHIVE_KEY_SECRET_ARN`), on Cloud Run `RELAY_ARCHIVE_KEY` from Secret Manager; the
/// secret is written once (version 1) from an ephemeral random value, so it stays out of the
/// state and never changes under the records it sealed.
#[test]
fn the_archive_key_comes_from_a_secret_store() {
    let aws = model::module("aws-relay");
    let env = lambda_environment(&aws);
    assert!(env.iter().all(|v| v.name != "RELAY_ARCHIVE_KEY"));
    let expr = plain_when(&env, "aws-relay", "RELAY_ARCHIVE_KEY_SECRET_ARN", SWITCH);
    assert_eq!(
        expr.to_string(),
        "aws_secretsmanager_secret.archive_key[0].arn"
    );
    let version = aws.resource("aws_secretsmanager_secret_version", "archive_key");
    assert_sources(
        version.body(),
        &[
            (
                "secret_string_wo",
                "ephemeral.random_password.archive_key.result",
            ),
            ("secret_string_wo_version", "1"),
        ],
    );

    let gcp = model::module("gcp-relay");
    let env = cloud_run_environment(&gcp);
    let key = set_by(&env, "gcp-relay", "RELAY_ARCHIVE_KEY");
    assert_eq!(key.gate.as_deref(), Some(SWITCH));
    let EnvValue::SecretRef { secret, version } = &key.value else {
        panic!("gcp-relay: RELAY_ARCHIVE_KEY must use value_source.secret_key_ref")
    };
    assert_eq!(
        secret.to_string(),
        "google_secret_manager_secret.archive_key[0].secret_id"
    );
    assert_eq!(
        version.map(ToString::to_string).as_deref(),
        Some("google_secret_manager_secret_version.archive_key[0].version")
    );
    let version = gcp.resource("google_secret_manager_secret_version", "archive_key");
    assert_sources(
        version.body(),
        &[
            (
                "secret_data_wo",
                "ephemeral.random_password.archive_key.result",
            ),
            ("secret_data_wo_version", "1"),
        ],
    );
}

/// Both relays get `RELAY_ARCHIVE_URL` exactly when the archive is on, naming the bucket the
/// module creates and the prefix (`s3://BUCKET/notifications/` on Lambda,
/// `gs://BUCKET/notifications/` on Cloud Run), in a form relay-core parses; the default bucket
/// names fit in 63 characters; the `archive_url` outputs carry the same value, for
/// `relay replay`.
#[test]
fn archive_url_names_the_bucket_and_prefix_on_both_clouds() {
    let examples = model::examples();

    let aws = model::module("aws-relay");
    let scope = Scope::module(&aws, &examples).with_sample(
        "archive_bucket_name",
        Value::String(SAMPLE_BUCKET.to_owned()),
    );
    let env = lambda_environment(&aws);
    let expr = plain_when(&env, "aws-relay", "RELAY_ARCHIVE_URL", SWITCH);
    let bucket = aws.resource_attr("aws_s3_bucket", "archive", "bucket");
    let buckets = scope.evaluated(bucket, "aws-relay: the bucket's name");
    let urls = scope.evaluated(expr, "aws-relay: RELAY_ARCHIVE_URL");
    assert_names(&aws, &urls, &buckets, true);

    // The default name: <name, cut>-archive-<account id>-<region>, at most 63 characters.
    let name = aws.locals()["archive_bucket"].to_string();
    assert!(
        name.contains(
            "\"${local.archive_bucket_base}-archive-${local.account_id}-${local.region}\""
        ),
        "aws-relay: the default archive bucket name: {name}"
    );
    let cut = substr_length(aws.locals()["archive_bucket_base"])
        .expect("aws-relay: archive_bucket_base cuts the name with substr(…, 0, N)");
    let longest = cut + "-archive-".len() + ACCOUNT_ID + 1 + LONGEST_REGION;
    assert!(
        longest <= 63,
        "aws-relay: the default archive bucket name takes up to {longest} characters"
    );

    let gcp = model::module("gcp-relay");
    let env = cloud_run_environment(&gcp);
    let expr = plain_when(&env, "gcp-relay", "RELAY_ARCHIVE_URL", SWITCH);
    // The longest project id (30) and name (24) the variables accept.
    let longest_project = "p".repeat(30);
    let longest_name = "n".repeat(24);
    let scope = Scope::module(&gcp, &examples)
        .with_sample("project_id", Value::String(SAMPLE_PROJECT.to_owned()))
        .with_sample("project_id", Value::String(longest_project))
        .with_sample("name", Value::String(longest_name));
    let bucket = gcp.resource_attr("google_storage_bucket", "archive", "name");
    let buckets = scope.evaluated(bucket, "gcp-relay: the bucket's name");
    let urls = scope.evaluated(expr, "gcp-relay: RELAY_ARCHIVE_URL");
    assert_names(&gcp, &urls, &buckets, false);

    for config in [&aws, &gcp] {
        assert_eq!(
            output_source(config, "archive_url"),
            "local.archive_url",
            "{}: the archive_url output",
            config.name
        );
        assert!(
            config.outputs().contains_key("archive_bucket"),
            "{}: no archive_bucket output",
            config.name
        );
    }
}

////////////////////////////////////////////////////////////////////////////////////////////////
// GCP
////////////////////////////////////////////////////////////////////////////////////////////////

/// The Cloud Storage bucket exists with the archive, has uniform bucket-level access (which IAM
/// conditions need) and enforced public access prevention, is not destroyed with its objects
/// unless `archive_force_destroy` (false by default), lives in `archive_location` or the
/// module's region, takes `archive_kms_key_name` as its default key, and deletes objects under
/// the prefix after `archive_retention_days`.
#[test]
fn gcs_archive_bucket_is_uniform_private_and_expires_under_the_prefix() {
    let config = model::module("gcp-relay");
    let bucket = resource_with(
        &config,
        "google_storage_bucket",
        "archive",
        &[
            ("count", &gated_count()),
            ("name", "local.archive_bucket"),
            ("uniform_bucket_level_access", "true"),
        ],
    );
    assert_texts(bucket, &[("public_access_prevention", "enforced")]);
    assert_sources(bucket, &[("force_destroy", "var.archive_force_destroy")]);
    assert_eq!(
        variable_default(&config, "archive_force_destroy").as_deref(),
        Some("false")
    );
    assert_sources(
        bucket,
        &[("location", "coalesce(var.archive_location, var.region)")],
    );
    assert_eq!(
        variable_default(&config, "archive_location").as_deref(),
        Some("null")
    );

    let encryption: Vec<&Block> = nested(bucket, "dynamic")
        .filter(|d| label(d, 0) == "encryption")
        .collect();
    assert_eq!(encryption.len(), 1, "gcp-relay: the archive's CMEK");
    assert_sources(
        encryption[0].body(),
        &[(
            "for_each",
            "var.archive_kms_key_name != null ? [var.archive_kms_key_name] : []",
        )],
    );

    let rules: Vec<&Block> = nested(bucket, "lifecycle_rule").collect();
    assert_eq!(rules.len(), 1, "gcp-relay: one lifecycle rule");
    let condition = only_block(
        rules[0].body(),
        "condition",
        "gcp-relay: the lifecycle rule",
    );
    assert_sources(
        condition,
        &[
            ("age", "var.archive_retention_days"),
            ("matches_prefix", "[var.archive_prefix]"),
        ],
    );
    let action = only_block(rules[0].body(), "action", "gcp-relay: the lifecycle rule");
    assert_texts(action, &[("type", "Delete")]);
    assert_retention_and_prefix_variables(&config);
}

/// The Cloud Run service account's grants on the archive bucket are
/// `roles/storage.objectCreator` (create: no get, no list, no delete, so no overwrite) and
/// `roles/storage.objectViewer` (reading back what a 412 found), each with an IAM condition
/// limiting it to the objects under the prefix (which leaves it no list); `archive_readers` get
/// `roles/storage.objectViewer`; no one gets an object admin, object user or legacy role there.
#[test]
fn gcp_relay_may_only_create_and_read_archive_objects_under_the_prefix() {
    let config = model::module("gcp-relay");
    let on_archive: Vec<(&str, &Body)> = [
        "google_storage_bucket_iam_member",
        "google_storage_bucket_iam_binding",
        "google_storage_bucket_iam_policy",
    ]
    .iter()
    .flat_map(|ty| config.resources(ty))
    .filter(|(_, b)| {
        source(b.body(), "bucket").is_some_and(|s| s.contains("google_storage_bucket.archive"))
    })
    .map(|(name, b)| (name, b.body()))
    .collect();

    let relay: Vec<&(&str, &Body)> = on_archive
        .iter()
        .filter(|(_, b)| source(b, "member").as_deref() == Some(SERVICE_ACCOUNT))
        .collect();
    let roles: Vec<Option<String>> = relay.iter().map(|(_, g)| text(g, "role")).collect();
    assert_eq!(
        roles,
        [
            Some("roles/storage.objectCreator".to_owned()),
            Some("roles/storage.objectViewer".to_owned())
        ],
        "gcp-relay: the relay's grants on the archive"
    );
    for (name, grant) in &relay {
        assert_eq!(
            source(grant, "count").as_deref(),
            Some(gated_count().as_str()),
            "gcp-relay: {name}"
        );
        let condition = only_block(grant, "condition", "gcp-relay: the relay's archive grant");
        assert_eq!(
            source(condition, "expression").as_deref(),
            Some("local.archive_prefix_condition"),
            "gcp-relay: {name} is on the prefix only"
        );
    }
    let scope = Scope::module(&config, &model::examples())
        .with_sample("project_id", Value::String(SAMPLE_PROJECT.to_owned()));
    let buckets = scope.texts(config.resource_attr("google_storage_bucket", "archive", "name"));
    let on_prefix = |bucket: &str| {
        format!(
            "resource.name.startsWith(\"projects/_/buckets/{bucket}/objects/{DEFAULT_PREFIX}\")"
        )
    };
    let condition = config.locals()["archive_prefix_condition"];
    let grant = "gcp-relay: the archive grant";
    assert_condition_on(&scope, condition, &buckets, on_prefix, grant);

    let readers: Vec<&(&str, &Body)> = on_archive
        .iter()
        .filter(|(_, b)| {
            let member = source(b, "member");
            ![Some(SERVICE_ACCOUNT), Some(PUBSUB_AGENT)].contains(&member.as_deref())
        })
        .collect();
    assert_eq!(readers.len(), 1, "gcp-relay: the archive readers' grant");
    let (_, readers) = readers[0];
    assert_texts(readers, &[("role", "roles/storage.objectViewer")]);
    assert_sources(
        readers,
        &[
            ("member", "each.value"),
            (
                "for_each",
                "toset(var.archive_enabled ? var.archive_readers : [])",
            ),
        ],
    );

    for (name, grant) in &on_archive {
        let role = text(grant, "role").unwrap_or_default();
        // A Cloud Storage subscription's writer needs the bucket's legacy reader role.
        if source(grant, "member").as_deref() == Some(PUBSUB_AGENT) {
            continue;
        }
        for forbidden in ["objectAdmin", "objectUser", "legacy", "storage.admin"] {
            assert!(
                !role.contains(forbidden),
                "gcp-relay: {name} grants {role} on the archive"
            );
        }
    }
}

/// The Pub/Sub service agent, which writes a Cloud Storage subscription's objects.
const PUBSUB_AGENT: &str = "local.pubsub_service_agent";

/// With `archive_pubsub` (the default), the records go through a topic the module creates,
/// which only the relay may publish to, and a Cloud Storage subscription writes them under
/// `archive_prefix` and the hour, as lines (text format, no Avro), in objects that readers take
/// whole; the Pub/Sub service agent gets exactly the two roles a subscription needs, the object
/// one on the prefix only, before the subscription exists; and a record it cannot write alerts.
#[test]
fn the_archive_topic_is_written_under_the_prefix_by_its_subscription() {
    let config = model::module("gcp-relay");
    assert_eq!(
        variable_default(&config, "archive_pubsub").as_deref(),
        Some("true")
    );
    assert_eq!(
        config.locals()["archive_pubsub"].to_string(),
        "var.archive_enabled && var.archive_pubsub"
    );
    let gated = Some("local.archive_pubsub ? 1 : 0");
    let subscription = config
        .resource("google_pubsub_subscription", "archive")
        .body();
    assert_eq!(source(subscription, "count").as_deref(), gated);
    assert_sources(
        subscription,
        &[("topic", "google_pubsub_topic.archive[0].id")],
    );
    let storage = only_block(
        subscription,
        "cloud_storage_config",
        "the archive's subscription",
    );
    assert_sources(
        storage,
        &[
            ("bucket", "google_storage_bucket.archive[0].name"),
            ("filename_prefix", "var.archive_prefix"),
        ],
    );
    // The hour's folder first, as the relay's own objects and `relay replay`'s listing have it.
    assert_texts(
        storage,
        &[("filename_datetime_format", "YYYY/MM/DD/hh/mm_ss")],
    );
    assert!(
        nested(storage, "avro_config").next().is_none(),
        "text, a line each"
    );
    let max_bytes: u64 = source(storage, "max_bytes").unwrap().parse().unwrap();
    assert!(
        max_bytes <= 16 << 20,
        "readers take an engine's object of up to 16 MiB"
    );
    assert_eq!(
        source(subscription, "ack_deadline_seconds").as_deref(),
        Some("var.archive_pubsub_max_duration_secs"),
        "an object's duration may not exceed the ack deadline"
    );
    let depends = source(subscription, "depends_on").unwrap_or_default();
    for grant in ["archive_subscription", "archive_subscription_bucket"] {
        assert!(
            depends.contains(&format!("google_storage_bucket_iam_member.{grant}")),
            "{depends}"
        );
    }

    let agent: Vec<(&str, &Body)> = config
        .resources("google_storage_bucket_iam_member")
        .into_iter()
        .map(|(name, b)| (name, b.body()))
        .filter(|(_, b)| source(b, "member").as_deref() == Some(PUBSUB_AGENT))
        .collect();
    let roles: Vec<(&str, Option<String>, Option<String>)> = agent
        .iter()
        .map(|(name, b)| {
            let condition = nested(b, "condition")
                .next()
                .and_then(|c| source(c.body(), "expression"));
            (*name, text(b, "role"), condition)
        })
        .collect();
    assert_eq!(
        roles,
        [
            (
                "archive_subscription",
                Some("roles/storage.objectCreator".to_owned()),
                Some("local.archive_prefix_condition".to_owned())
            ),
            (
                "archive_subscription_bucket",
                Some("roles/storage.legacyBucketReader".to_owned()),
                None
            ),
        ],
        "gcp-relay: the subscription's writer creates objects under the prefix, and finds the bucket"
    );
    for (name, grant) in &agent {
        assert_eq!(source(grant, "count").as_deref(), gated, "{name}");
    }

    let publishers: Vec<&Body> = config
        .resources("google_pubsub_topic_iam_member")
        .into_iter()
        .map(|(_, b)| b.body())
        .filter(|b| source(b, "topic").is_some_and(|t| t.contains("google_pubsub_topic.archive")))
        .collect();
    assert_eq!(
        publishers.len(),
        1,
        "gcp-relay: one grant on the archive's topic"
    );
    assert_texts(publishers[0], &[("role", "roles/pubsub.publisher")]);
    assert_sources(publishers[0], &[("member", SERVICE_ACCOUNT)]);

    let env = cloud_run_environment(&config);
    let stream = set_by(&env, "gcp-relay", "RELAY_ARCHIVE_STREAM");
    assert_eq!(stream.gate.as_deref(), Some("local.archive_pubsub"));

    let alert = config
        .resource("google_monitoring_alert_policy", "archive_delivery")
        .body();
    assert_eq!(source(alert, "count").as_deref(), gated);
    let conditions = format!("{alert:?}");
    assert!(
        conditions.contains("subscription/oldest_unacked_message_age")
            && conditions.contains("archive-to-storage"),
        "{conditions}"
    );
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Examples, and the alarm on undelivered notifications
////////////////////////////////////////////////////////////////////////////////////////////////

/// Every example runs its relay with the archive: the module's default is on, no example turns
/// it off, and an example with operators (`route_writers`) lets them replay (`archive_readers`).
#[test]
fn examples_turn_the_archive_on() {
    for name in ["aws-relay", "gcp-relay"] {
        let module = model::module(name);
        assert_eq!(
            variable_default(&module, "archive_enabled").as_deref(),
            Some("true"),
            "{name}: archive_enabled defaults to true"
        );
    }
    let mut calls = 0;
    for example in model::examples() {
        for (call, target, block) in example.module_calls() {
            if !["aws-relay", "gcp-relay"].contains(&target.as_str()) {
                continue;
            }
            calls += 1;
            let value = source(block.body(), "archive_enabled");
            assert!(
                value.is_none() || value.as_deref() == Some("true"),
                "{}: module {call} must keep the archive on, not archive_enabled = {value:?}",
                example.name
            );
            if example.variables().contains_key("route_writers") {
                assert_eq!(
                    source(block.body(), "archive_readers").as_deref(),
                    Some("var.route_writers"),
                    "{}: the operators replay from the archive",
                    example.name
                );
            }
        }
    }
    assert_eq!(calls, 4, "the four examples run a relay");
}

/// Each relay module alarms, with the ledger, on the relay's `Undelivered` metric (a
/// notification first received more than an hour ago with a destination that has not
/// acknowledged it), over one hour, notifying the alarms' recipients, and tells the operator what
/// it means and what to do: `relay trace`, fix the destination, `relay replay --undelivered
/// --since`.
#[test]
fn undelivered_notifications_alarm_with_what_to_do() {
    let aws = model::module("aws-relay");
    let alarm = resource_with(
        &aws,
        "aws_cloudwatch_metric_alarm",
        "undelivered",
        &[("count", "var.alarms_enabled && var.ledger_enabled ? 1 : 0")],
    );
    assert_sources(
        alarm,
        &[
            ("namespace", "\"DssRelay\""),
            ("metric_name", "\"Undelivered\""),
            ("dimensions", "{ Relay = local.alarm_relay }"),
            ("statistic", "\"Sum\""),
            ("period", "3600"),
            ("evaluation_periods", "1"),
            ("datapoints_to_alarm", "1"),
            ("threshold", "var.alarm_undelivered_threshold"),
            ("comparison_operator", "\"GreaterThanOrEqualToThreshold\""),
            ("treat_missing_data", "\"notBreaching\""),
            ("alarm_actions", "var.alarm_actions"),
            ("ok_actions", "var.alarm_actions"),
            ("alarm_name", "\"${var.name}-undelivered\""),
        ],
    );
    assert_eq!(
        variable_default(&aws, "alarm_undelivered_threshold").as_deref(),
        Some("1")
    );
    assert_alarm_local_is_the_relay(&aws);
    let description = source(alarm, "alarm_description").unwrap_or_default();
    assert_tells_what_to_do("aws-relay", &description, UNDELIVERED_SAYS);

    let gcp = model::module("gcp-relay");
    let metric = resource_with(
        &gcp,
        "google_logging_metric",
        "undelivered",
        &[("count", "var.ledger_enabled ? 1 : 0")],
    );
    assert_eq!(
        source(metric, "filter").as_deref(),
        Some("\"${local.metric_lines} AND jsonPayload.Undelivered:*\""),
        "gcp-relay: the metric counts the relay's Undelivered lines"
    );
    let policy = resource_with(
        &gcp,
        "google_monitoring_alert_policy",
        "undelivered",
        &[
            ("count", "var.ledger_enabled ? 1 : 0"),
            ("notification_channels", "var.alert_notification_channels"),
            ("enabled", "var.alerts_enabled"),
        ],
    );
    let threshold = only_threshold(policy, "gcp-relay: the undelivered alert");
    let filter = source(threshold, "filter").unwrap_or_default();
    assert!(
        filter.contains("google_logging_metric.undelivered[0].name"),
        "gcp-relay: the alert reads the undelivered metric: {filter}"
    );
    let aggregation = only_block(threshold, "aggregations", "gcp-relay: the condition");
    assert_texts(
        aggregation,
        &[
            ("alignment_period", "3600s"),
            ("per_series_aligner", "ALIGN_SUM"),
        ],
    );
    let documentation = only_block(policy, "documentation", "gcp-relay: the undelivered alert");
    let content = source(documentation, "content").unwrap_or_default();
    assert_tells_what_to_do("gcp-relay", &content, UNDELIVERED_SAYS);
}

/// Each relay module alarms on one request refused after its signature verified (the relay's
/// `VerifiedRefused` lines: only a key holder sends one), whatever the ledger and the archive,
/// and says what to do: `relay trace --refused`, fix the configuration, `relay replay
/// --refused`.
#[test]
fn a_verified_request_refused_alarms_on_one_datapoint_with_what_to_do() {
    let aws = model::module("aws-relay");
    let alarm = relay_metric_alarm(&aws, "verified_refused", "VerifiedRefused");
    assert_sources(alarm, &[("treat_missing_data", "\"notBreaching\"")]);
    let description = source(alarm, "alarm_description").unwrap_or_default();
    assert_tells_what_to_do("aws-relay", &description, REFUSED_SAYS);

    let gcp = model::module("gcp-relay");
    let metric = gcp
        .resource("google_logging_metric", "verified_refused")
        .body();
    assert_eq!(source(metric, "count"), None, "gcp-relay: always counted");
    assert_sources(
        metric,
        &[(
            "filter",
            "\"${local.metric_lines} AND jsonPayload.VerifiedRefused:*\"",
        )],
    );
    let policy = gcp
        .resource("google_monitoring_alert_policy", "verified_refused")
        .body();
    let threshold = only_threshold(policy, "gcp-relay: the refused alert");
    let filter = source(threshold, "filter").unwrap_or_default();
    assert!(
        filter.contains("google_logging_metric.verified_refused.name"),
        "gcp-relay: the alert reads the refused metric: {filter}"
    );
    assert_sources(threshold, &[("threshold_value", "0")]);
    assert_eq!(
        source(threshold, "comparison").as_deref(),
        Some("\"COMPARISON_GT\""),
        "gcp-relay: one line opens an incident"
    );
    let documentation = only_block(policy, "documentation", "gcp-relay: the refused alert");
    let content = source(documentation, "content").unwrap_or_default();
    assert_tells_what_to_do("gcp-relay", &content, REFUSED_SAYS);
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Helpers
////////////////////////////////////////////////////////////////////////////////////////////////

/// That a dynamic statement's `for_each` is `<condition> ? [<value>] : []` and its resources
/// `[statement.value]`.
fn assert_gated(statement: &Stmt<'_>, condition: &str, value: &str) {
    assert_eq!(
        statement.gate.as_deref(),
        Some(format!("{condition} ? [{value}] : []").as_str()),
        "aws-relay: {} must be granted on {value} when {condition}",
        statement.sid
    );
    assert_eq!(
        statement.resources(),
        "[statement.value]",
        "aws-relay: {}",
        statement.sid
    );
}

/// `archive_retention_days` defaults to 30 and must be at least 1; `archive_prefix` defaults
/// to `notifications/` and is validated.
fn assert_retention_and_prefix_variables(config: &Config) {
    assert_eq!(
        variable_default(config, "archive_retention_days").as_deref(),
        Some(DEFAULT_RETENTION_DAYS),
        "{}: archive_retention_days",
        config.name
    );
    let variables = config.variables();
    let validations: Vec<String> = nested(variables["archive_retention_days"].body(), "validation")
        .filter_map(|v| source(v.body(), "condition"))
        .collect();
    assert!(
        validations
            .iter()
            .any(|c| c.contains("var.archive_retention_days >= 1")),
        "{}: archive_retention_days must be validated >= 1: {validations:?}",
        config.name
    );
    assert_eq!(
        variable_default(config, "archive_prefix"),
        Some(format!("\"{DEFAULT_PREFIX}\"")),
        "{}: archive_prefix",
        config.name
    );
    assert!(
        nested(variables["archive_prefix"].body(), "validation")
            .next()
            .is_some(),
        "{}: archive_prefix needs a validation",
        config.name
    );
}

/// That every URL is the bucket (one of `buckets`) and the default prefix, in relay-core's form,
/// and every bucket name a valid one.
fn assert_names(config: &Config, urls: &BTreeSet<String>, buckets: &BTreeSet<String>, s3: bool) {
    crate::assert_relay_core_accepts(&config.name, "RELAY_ARCHIVE_URL", urls);
    let mut named = BTreeSet::new();
    for url in urls {
        let parsed: ArchiveUrl = url
            .parse()
            .unwrap_or_else(|e| panic!("{}: {url:?} is no archive URL: {e}", config.name));
        let (bucket, prefix) = match (parsed, s3) {
            (ArchiveUrl::S3 { bucket, prefix }, true)
            | (ArchiveUrl::Gcs { bucket, prefix }, false) => (bucket, prefix),
            (other, _) => panic!("{}: {url:?} is {other:?}", config.name),
        };
        assert_eq!(prefix, DEFAULT_PREFIX, "{}: {url:?}", config.name);
        named.insert(bucket);
    }
    assert_eq!(
        &named, buckets,
        "{}: RELAY_ARCHIVE_URL names the archive bucket",
        config.name
    );
    for bucket in buckets {
        assert!(
            (3..=63).contains(&bucket.len())
                && bucket
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "{}: {bucket:?} is no bucket name",
            config.name
        );
    }
}

/// `N` in `substr(…, 0, N)` anywhere in `expr`.
fn substr_length(expr: &Expression) -> Option<usize> {
    let mut found = None;
    model::walk(expr, &mut |e| {
        if let Expression::FuncCall(call) = e
            && call.name.name.as_str() == "substr"
            && let Some(Expression::Number(n)) = call.args.get(2)
        {
            found = n.as_u64().and_then(|n| usize::try_from(n).ok());
        }
    });
    found
}

/// The alarms' `Relay` dimension is the function's name, which the relay writes as `Relay`.
fn assert_alarm_local_is_the_relay(config: &Config) {
    assert_eq!(
        config.locals()["alarm_relay"].to_string(),
        "aws_lambda_function.this.function_name"
    );
}

/// The threshold of an alert policy's one condition.
fn only_threshold<'a>(policy: &'a Body, what: &str) -> &'a Body {
    let conditions = only_block(policy, "conditions", what);
    only_block(conditions, "condition_threshold", what)
}

/// What the operator must read in an alarm on undelivered notifications.
const UNDELIVERED_SAYS: &[&str] = &[
    "more than an hour ago",
    "not acknowledged",
    "relay trace",
    "fix that destination",
    "relay replay --undelivered --since",
];

/// What the operator must read in an alarm on verified requests refused.
const REFUSED_SAYS: &[&str] = &[
    "signature verified",
    "relay trace --refused",
    "fix the configuration",
    "relay replay --refused --since",
];

/// Holds `text`, one of `module`'s alarm texts, to say each of `needed`.
fn assert_tells_what_to_do(module: &str, text: &str, needed: &[&str]) {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for needed in needed {
        assert!(
            flat.contains(needed),
            "{module}: the alarm's text does not say {needed:?}: {flat}"
        );
    }
}

fn gated_count() -> String {
    format!("{SWITCH} ? 1 : 0")
}

/// A variable's default as written.
fn variable_default(config: &Config, name: &str) -> Option<String> {
    source(config.variable(name).body(), "default")
}
