//! The relay's configuration file (`RELAY_CONFIG`) and the sources' secrets in both relay
//! modules, and the guards around them: each reaches the relay from a secret store, readable by
//! exactly whom it should be; the role's keys only through the services that use them; buckets
//! and queues only over TLS; the role the module's or the operator's; the ledger and the archive
//! kept from deletion; the dashboards and alarms the operators look at.

use std::collections::{BTreeMap, BTreeSet};

use hcl::{Block, Body, Expression};

use crate::eval::Scope;
use crate::model::{self, Config, attr, label, literal_string, nested, walk};
use crate::platform::{cloud_run_environment, lambda_environment, plain_when};
use crate::policy::{
    self, assert_sources, assert_texts, document, find, only_block, output_source, resource_with,
    source, text,
};
use crate::stored_sinks::matches_a_wildcard;

/// The Cloud Run service account, as the grants name it.
const SERVICE_ACCOUNT: &str = "\"serviceAccount:${google_service_account.this.email}\"";
/// The role that reads a Secret Manager secret.
const ACCESSOR: &str = "roles/secretmanager.secretAccessor";
/// Where the Cloud Run container finds the configuration file.
const CONFIG_PATH: &str = "/etc/relay/relay.toml";

////////////////////////////////////////////////////////////////////////////////////////////////
// RELAY_CONFIG
////////////////////////////////////////////////////////////////////////////////////////////////

/// With `relay_config`, and only then, each relay gets `RELAY_CONFIG` naming the module's own
/// secret: on Lambda the secret's ARN (the secret holds `relay_config`, encrypted with
/// `kms_key_arn`; the role and `archive_reader_policy_json` may read exactly it; the function
/// starts after it and changes with its version, and `replay_environment` carries it); on Cloud
/// Run the path of the file a secret volume puts there, at the version the apply wrote
/// (`replay_environment` leaves that path out: it is the container's).
#[test]
fn relay_config_names_the_modules_own_secret() {
    let aws = model::module("aws-relay");
    let env = lambda_environment(&aws);
    let gate = "var.relay_config != null";
    let expr = plain_when(&env, "aws-relay", "RELAY_CONFIG", gate);
    assert_eq!(
        expr.to_string(),
        "aws_secretsmanager_secret.relay_config[0].arn"
    );
    assert_eq!(
        aws.locals()["relay_config_enabled"].to_string(),
        "var.relay_config != null"
    );
    resource_with(
        &aws,
        "aws_secretsmanager_secret",
        "relay_config",
        &[
            ("count", "local.relay_config_enabled ? 1 : 0"),
            ("kms_key_id", "var.kms_key_arn"),
        ],
    );
    resource_with(
        &aws,
        "aws_secretsmanager_secret_version",
        "relay_config",
        &[
            ("secret_id", "aws_secretsmanager_secret.relay_config[0].id"),
            ("secret_string", "var.relay_config"),
        ],
    );
    let function = aws.resource("aws_lambda_function", "this").body();
    assert!(
        source(function, "depends_on")
            .unwrap_or_default()
            .contains("aws_secretsmanager_secret_version.relay_config"),
        "aws-relay: the function starts once its configuration is written"
    );
    assert!(
        source(function, "description")
            .unwrap_or_default()
            .contains("aws_secretsmanager_secret_version.relay_config[0].version_id"),
        "aws-relay: a new configuration changes the function, so that Lambda starts new \
         environments that read it"
    );
    for (document, what) in [
        ("this", "the role"),
        ("archive_readers", "archive_reader_policy_json"),
    ] {
        let statements = policy::document(&aws, document);
        let read = find(&statements, "ReadRelayConfig");
        assert_eq!(
            read.actions.clone(),
            ["secretsmanager:GetSecretValue"],
            "aws-relay: {what}"
        );
        assert_eq!(
            read.gate.as_deref(),
            Some("var.relay_config != null ? [aws_secretsmanager_secret.relay_config[0].arn] : []"),
            "aws-relay: {what} reads exactly the configuration secret, with relay_config"
        );
        assert_eq!(read.resources(), "[statement.value]", "aws-relay: {what}");
    }
    let replay = output_source(&aws, "replay_environment");
    assert!(
        !replay.contains("RELAY_CONFIG"),
        "aws-relay: replay_environment carries RELAY_CONFIG: {replay}"
    );

    let gcp = model::module("gcp-relay");
    let scope = Scope::module(&gcp, &model::examples());
    let env = cloud_run_environment(&gcp);
    // The path of the mounted file.
    let expr = plain_when(
        &env,
        "gcp-relay",
        "RELAY_CONFIG",
        "local.relay_config_enabled",
    );
    assert_eq!(
        scope.texts(expr),
        BTreeSet::from([CONFIG_PATH.to_owned()]),
        "gcp-relay: RELAY_CONFIG"
    );
    assert_eq!(
        gcp.locals()["relay_config_enabled"].to_string(),
        "var.relay_config != null"
    );

    resource_with(
        &gcp,
        "google_secret_manager_secret",
        "relay_config",
        &[("count", "local.relay_config_enabled ? 1 : 0")],
    );
    let version = resource_with(
        &gcp,
        "google_secret_manager_secret_version",
        "relay_config",
        &[("secret_data", "var.relay_config")],
    );
    let lifecycle = only_block(
        version,
        "lifecycle",
        "gcp-relay: the configuration's version",
    );
    assert_eq!(
        source(lifecycle, "create_before_destroy").as_deref(),
        Some("true"),
        "gcp-relay: the running revision keeps its version until the next one reads the new"
    );

    // The volume: the secret, at the version this apply wrote, as one file.
    let service = gcp.resource("google_cloud_run_v2_service", "this").body();
    let template = only_block(service, "template", "gcp-relay: the service");
    let volumes = dynamic(template, "volumes").expect("gcp-relay: the configuration's volume");
    assert_sources(
        volumes.body(),
        &[(
            "for_each",
            "local.relay_config_enabled ? [google_secret_manager_secret_version.relay_config[0].version] : []",
        )],
    );
    let volume = only_block(volumes.body(), "content", "gcp-relay: the volume");
    let volume_name = text(volume, "name").expect("a volume's name");
    let secret = only_block(volume, "secret", "gcp-relay: the volume");
    assert_sources(
        secret,
        &[(
            "secret",
            "google_secret_manager_secret.relay_config[0].secret_id",
        )],
    );
    let items = only_block(secret, "items", "gcp-relay: the volume's secret");
    assert_eq!(
        source(items, "version").as_deref(),
        Some("volumes.value"),
        "gcp-relay: the volume holds the version this apply wrote"
    );
    let files = scope.texts(attr(items, "path").expect("path"));

    // The mount: the volume's directory, in which the file is RELAY_CONFIG.
    let container = only_block(template, "containers", "gcp-relay: the template");
    let mounts = dynamic(container, "volume_mounts").expect("gcp-relay: the volume is mounted");
    assert_eq!(
        source(mounts.body(), "for_each"),
        Some(format!(
            "local.relay_config_enabled ? [\"{volume_name}\"] : []"
        ))
    );
    let mount = only_block(mounts.body(), "content", "gcp-relay: the mount");
    assert_sources(mount, &[("name", "volume_mounts.value")]);
    let directories = scope.texts(attr(mount, "mount_path").expect("mount_path"));
    let mounted: Vec<String> = directories
        .iter()
        .flat_map(|d| files.iter().map(move |f| format!("{d}/{f}")))
        .collect();
    assert_eq!(
        mounted,
        [CONFIG_PATH],
        "gcp-relay: RELAY_CONFIG is where the volume puts the file"
    );

    let replay = output_source(&gcp, "replay_environment");
    assert!(
        replay.contains("\"RELAY_CONFIG\""),
        "gcp-relay: replay_environment must leave out RELAY_CONFIG, a path in the container: \
         {replay}"
    );
    assert_eq!(
        output_source(&gcp, "relay_config_secret"),
        "one(google_secret_manager_secret.relay_config[*].id)",
        "gcp-relay: a replayer finds the file's secret"
    );
}

/// Both modules own `RELAY_CONFIG` (`extra_environment` refuses it) and keep keys out of the
/// file, refusing the same keys with the same condition.
#[test]
fn both_modules_own_relay_config_and_keep_keys_out_of_it() {
    let mut refusals = Vec::new();
    for name in super::RELAY_MODULES {
        let config = model::module(name);
        let variables = config.variables();
        let extra = validations(variables["extra_environment"].body());
        assert!(
            extra.iter().any(|c| c.contains("\"RELAY_CONFIG\"")),
            "{name}: extra_environment must refuse RELAY_CONFIG: {extra:?}"
        );
        let relay_config = variables["relay_config"].body();
        assert_eq!(
            source(relay_config, "default").as_deref(),
            Some("null"),
            "{name}: no configuration file by default"
        );
        let keys = validations(relay_config)
            .into_iter()
            .find(|c| c.contains("hmac_secret"))
            .unwrap_or_else(|| panic!("{name}: relay_config must refuse keys"));
        for key in ["hmac_keys", "hmac_secret", "archive_key"] {
            assert!(keys.contains(key), "{name}: relay_config lets {key} in");
        }
        refusals.push(keys);
    }
    assert_eq!(
        refusals[0], refusals[1],
        "the two modules refuse the same keys the same way"
    );
}

////////////////////////////////////////////////////////////////////////////////////////////////
// The sources' secrets
////////////////////////////////////////////////////////////////////////////////////////////////

/// aws-relay: the role may read exactly the secrets of `source_secret_arns` (whole ARNs, no
/// wildcard), and decrypt with exactly `source_secret_kms_key_arns`, only through Secrets
/// Manager; neither without a configuration file to name them.
#[test]
fn aws_source_secrets_are_granted_by_their_exact_arns() {
    let aws = model::module("aws-relay");
    let statements = document(&aws, "this");
    let read = find(&statements, "ReadSourceSecrets");
    assert_eq!(read.actions.clone(), ["secretsmanager:GetSecretValue"]);
    assert_eq!(
        read.gate.as_deref(),
        Some(
            "length(var.source_secret_arns) > 0 ? [distinct(values(var.source_secret_arns))] : []"
        )
    );
    assert_eq!(read.resources(), "statement.value");
    let decrypt = find(&statements, "DecryptSourceSecrets");
    assert_eq!(decrypt.actions.clone(), ["kms:Decrypt"]);
    assert_eq!(
        decrypt.gate.as_deref(),
        Some("length(var.source_secret_kms_key_arns) > 0 ? [var.source_secret_kms_key_arns] : []")
    );
    let via = decrypt.conditions_as_written();
    assert_eq!(via.len(), 1, "aws-relay: DecryptSourceSecrets: {via:?}");
    assert_eq!(
        (via[0].0.as_str(), via[0].1.as_str()),
        ("StringEquals", "kms:ViaService")
    );
    assert!(
        via[0].2.contains("local.source_secret_regions") && via[0].2.contains("secretsmanager."),
        "aws-relay: the sources' keys only through Secrets Manager, where the secrets are: {}",
        via[0].2
    );

    let variables = aws.variables();
    let arns = variables["source_secret_arns"].body();
    assert_eq!(no_space(source(arns, "default")).as_deref(), Some("{}"));
    let patterns = regex_patterns(arns);
    assert!(
        !patterns.is_empty(),
        "aws-relay: source_secret_arns is validated"
    );
    for pattern in &patterns {
        assert!(
            pattern.starts_with('^') && pattern.ends_with('$') && !matches_a_wildcard(pattern),
            "aws-relay: source_secret_arns' pattern lets an IAM wildcard through: {pattern}"
        );
    }
    assert!(
        patterns.iter().any(|p| p.ends_with("-[A-Za-z0-9]{6}$")),
        "aws-relay: an IAM grant matches a secret by its whole ARN, with the six characters \
         Secrets Manager appends: {patterns:?}"
    );
    for input in ["source_secret_arns", "source_secret_kms_key_arns"] {
        let conditions = validations(variables[input].body());
        assert!(
            conditions
                .iter()
                .any(|c| c.contains("var.relay_config") || c.contains("var.source_secret_arns")),
            "aws-relay: {input} without what reads it must be refused: {conditions:?}"
        );
    }
}

/// gcp-relay: each secret of `source_secret_ids` reaches the container as the variable it is
/// keyed by, from Secret Manager (never a plain value), at its latest version; the names are
/// neither the module's (`RELAY_*`) nor Cloud Run's.
#[test]
fn gcp_source_secrets_reach_the_container_as_secret_variables() {
    let gcp = model::module("gcp-relay");
    let service = gcp.resource("google_cloud_run_v2_service", "this").body();
    let template = only_block(service, "template", "gcp-relay: the service");
    let container = only_block(template, "containers", "gcp-relay: the template");
    let env = nested(container, "dynamic")
        .filter(|d| label(d, 0) == "env")
        .find(|d| source(d.body(), "for_each").as_deref() == Some("var.source_secret_ids"))
        .expect("gcp-relay: an env per source secret");
    let content = only_block(env.body(), "content", "gcp-relay: the sources' env");
    assert_sources(content, &[("name", "env.key")]);
    assert!(
        attr(content, "value").is_none(),
        "gcp-relay: a source's secret is never a plain value"
    );
    let value_source = only_block(content, "value_source", "gcp-relay: the sources' env");
    let key_ref = only_block(
        value_source,
        "secret_key_ref",
        "gcp-relay: the sources' env",
    );
    assert_sources(key_ref, &[("secret", "env.value")]);
    assert_texts(key_ref, &[("version", "latest")]);

    let variables = gcp.variables();
    let ids = variables["source_secret_ids"].body();
    assert_eq!(no_space(source(ids, "default")).as_deref(), Some("{}"));
    let conditions = validations(ids).join("\n");
    for needed in [
        "startswith(name, \"RELAY_\")",
        "\"PORT\"",
        "\"K_SERVICE\"",
        "\"K_REVISION\"",
        "\"K_CONFIGURATION\"",
        "var.relay_config",
    ] {
        assert!(
            conditions.contains(needed),
            "gcp-relay: source_secret_ids' validations lack {needed}: {conditions}"
        );
    }
    for var in cloud_run_environment(&gcp) {
        assert!(
            var.name.starts_with("RELAY_"),
            "gcp-relay: {} could collide with a source's variable",
            var.name
        );
    }
}

/// gcp-relay's Secret Manager grants, all `roles/secretmanager.secretAccessor` on one secret
/// each: the relay reads the HMAC keys, the archive's key, the configuration file and exactly
/// the sources' secrets; `archive_readers` the archive's key and the configuration file (a
/// replay routes by it), never a source's secret.
#[test]
fn gcp_secrets_are_readable_by_exactly_whom_they_should_be() {
    let gcp = model::module("gcp-relay");
    let grants: BTreeMap<&str, &Body> = gcp
        .resources("google_secret_manager_secret_iam_member")
        .into_iter()
        .map(|(name, block)| (name, block.body()))
        .collect();
    // (grant, secret as written, member as written, count or for_each as written)
    let expected = [
        (
            "relay",
            "google_secret_manager_secret.hmac.secret_id",
            SERVICE_ACCOUNT,
            None,
        ),
        (
            "relay_archive_key",
            "google_secret_manager_secret.archive_key[0].secret_id",
            SERVICE_ACCOUNT,
            Some("var.archive_enabled ? 1 : 0"),
        ),
        (
            "archive_readers_key",
            "google_secret_manager_secret.archive_key[0].secret_id",
            "each.value",
            Some("toset(var.archive_enabled ? var.archive_readers : [])"),
        ),
        (
            "relay_config",
            "google_secret_manager_secret.relay_config[0].secret_id",
            SERVICE_ACCOUNT,
            Some("local.relay_config_enabled ? 1 : 0"),
        ),
        (
            "archive_readers_config",
            "google_secret_manager_secret.relay_config[0].secret_id",
            "each.value",
            Some(
                "toset(var.archive_enabled && local.relay_config_enabled ? var.archive_readers : [])",
            ),
        ),
    ];
    let names: BTreeSet<&str> = grants.keys().copied().collect();
    let mut wanted: BTreeSet<&str> = expected.iter().map(|(name, ..)| *name).collect();
    wanted.insert("source_secrets");
    assert_eq!(names, wanted, "gcp-relay: the Secret Manager grants");
    for (name, body) in &grants {
        assert_eq!(
            text(body, "role").as_deref(),
            Some(ACCESSOR),
            "gcp-relay: {name}"
        );
    }
    for (name, secret, member, gate) in expected {
        let body = grants[name];
        assert_eq!(
            source(body, "secret_id").as_deref(),
            Some(secret),
            "gcp-relay: {name}"
        );
        assert_eq!(
            source(body, "member").as_deref(),
            Some(member),
            "gcp-relay: {name}"
        );
        let written = source(body, "count").or_else(|| source(body, "for_each"));
        assert_eq!(written.as_deref(), gate, "gcp-relay: {name}");
    }
    let sources = grants["source_secrets"];
    assert_eq!(
        source(sources, "for_each").as_deref(),
        Some("var.source_secret_ids"),
        "gcp-relay: one grant per source secret"
    );
    assert_eq!(
        source(sources, "member").as_deref(),
        Some(SERVICE_ACCOUNT),
        "gcp-relay: only the relay reads the sources' secrets"
    );
    assert!(
        source(sources, "secret_id")
            .unwrap_or_default()
            .contains("each.value"),
        "gcp-relay: on exactly the secret given"
    );
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Keys, TLS, the role, deletion
////////////////////////////////////////////////////////////////////////////////////////////////

/// Every statement of the Lambda role that uses a KMS key has a `kms:ViaService` condition:
/// the module's and the destinations' keys through Secrets Manager, S3, DynamoDB, Lambda, SQS
/// and SNS, in the regions where those are; the archive's key through S3 only.
#[test]
fn aws_keys_are_used_only_through_the_services_that_use_them() {
    let aws = model::module("aws-relay");
    let statements = document(&aws, "this");
    let mut with_keys = Vec::new();
    for statement in &statements {
        if !statement
            .actions
            .clone()
            .iter()
            .any(|a| a.starts_with("kms:"))
        {
            continue;
        }
        with_keys.push(statement.sid.clone());
        let via: Vec<_> = statement
            .conditions_as_written()
            .into_iter()
            .filter(|(_, variable, _)| variable == "kms:ViaService")
            .collect();
        assert_eq!(
            via.len(),
            1,
            "aws-relay: {} uses a key without kms:ViaService",
            statement.sid
        );
        assert_eq!(via[0].0, "StringEquals", "aws-relay: {}", statement.sid);
    }
    assert_eq!(
        with_keys,
        [
            "DecryptSourceSecrets",
            "EncryptArchive",
            "UseCustomerManagedKeys"
        ],
        "aws-relay: the role's statements on keys"
    );
    let managed = find(&statements, "UseCustomerManagedKeys").conditions_as_written();
    assert_eq!(managed[0].2, "local.kms_via_services");
    let services = [
        "\"secretsmanager\"",
        "\"s3\"",
        "\"dynamodb\"",
        "\"lambda\"",
        "sqs.",
        "sns.",
    ];
    assert_local_mentions(&aws, "kms_via_services", &services);
    // A destination named by any of these may be in another region than the relay's.
    let arns = [
        "existing_queue",
        "sns_topic_arn",
        "stored_sink_queue_arns",
        "stored_sink_topic_arns",
    ];
    assert_local_mentions(&aws, "destination_regions", &arns);
    let archive = find(&statements, "EncryptArchive").conditions_as_written();
    assert_eq!(archive[0].2, "[\"s3.${local.region}.amazonaws.com\"]");
}

/// Asserts that local `name` of `config`, as written, mentions each of `needles`.
#[track_caller]
fn assert_local_mentions(config: &Config, name: &str, needles: &[&str]) {
    let written = config.locals()[name].to_string();
    for needle in needles {
        assert!(
            written.contains(needle),
            "{}: local {name} lacks {needle}: {written}",
            config.name
        );
    }
}

/// The buckets aws-relay creates refuse requests without TLS and with TLS older than 1.2; the
/// queue and dead-letter queue it creates refuse requests without TLS, each with a policy of
/// its own that allows nothing, the queue's joined by `queue_policy_documents`.
#[test]
fn aws_buckets_and_queues_refuse_insecure_requests() {
    let aws = model::module("aws-relay");
    for (document, bucket) in [("routes_bucket", "routes"), ("archive_bucket", "archive")] {
        let statements = policy::document(&aws, document);
        let resources =
            format!("[aws_s3_bucket.{bucket}[0].arn, \"${{aws_s3_bucket.{bucket}[0].arn}}/*\"]");
        for (sid, test, variable, values) in [
            (
                "DenyInsecureTransport",
                "Bool",
                "aws:SecureTransport",
                "[\"false\"]",
            ),
            (
                "DenyOutdatedTls",
                "NumericLessThan",
                "s3:TlsVersion",
                "[\"1.2\"]",
            ),
        ] {
            let statement = find(&statements, sid);
            assert_eq!(
                statement.effect.clone(),
                "Deny",
                "aws-relay: {document}.{sid}"
            );
            assert_eq!(
                statement.actions.clone(),
                ["s3:*"],
                "aws-relay: {document}.{sid}"
            );
            assert_eq!(
                statement.resources(),
                resources,
                "aws-relay: {document}.{sid}"
            );
            assert_eq!(
                statement.principal_identifiers(),
                ["*"],
                "aws-relay: {document}.{sid}"
            );
            assert_eq!(
                statement.conditions_as_written(),
                [(test.to_owned(), variable.to_owned(), values.to_owned())],
                "aws-relay: {document}.{sid}"
            );
        }
    }
    for (policy, document, queue) in [("this", "queue", "this"), ("dlq", "dlq", "dlq")] {
        let resource = resource_with(
            &aws,
            "aws_sqs_queue_policy",
            policy,
            &[("count", "var.create_queue ? 1 : 0")],
        );
        assert_eq!(
            source(resource, "queue_url"),
            Some(format!("aws_sqs_queue.{queue}[0].id"))
        );
        assert_eq!(
            source(resource, "policy"),
            Some(format!("data.aws_iam_policy_document.{document}[0].json"))
        );
        let statements = policy::document(&aws, document);
        assert!(
            statements.iter().all(|s| s.effect.clone() == "Deny"),
            "aws-relay: the module's queue policy {document} allows nothing"
        );
        let deny = find(&statements, "DenyInsecureTransport");
        assert_eq!(deny.actions.clone(), ["sqs:*"]);
        assert_eq!(deny.resources(), format!("[aws_sqs_queue.{queue}[0].arn]"));
        assert_eq!(deny.principal_identifiers(), ["*"]);
        assert_eq!(
            deny.conditions_as_written(),
            [(
                "Bool".to_owned(),
                "aws:SecureTransport".to_owned(),
                "[\"false\"]".to_owned()
            )]
        );
    }
    let queue = aws.data("aws_iam_policy_document", "queue").body();
    assert_sources(
        queue,
        &[("source_policy_documents", "var.queue_policy_documents")],
    );
}

/// aws-relay's role is the module's (with `role_path` and `permissions_boundary_arn`) or,
/// with `existing_role_arn`, the operator's: then no role and no policy are created, the
/// function runs as that role, and `role_policy_json` is the policy to attach to it. A
/// deployment of before keeps its role: the single resources move to index 0.
#[test]
fn aws_role_is_the_modules_or_the_operators() {
    let aws = model::module("aws-relay");
    resource_with(
        &aws,
        "aws_iam_role",
        "this",
        &[
            ("count", "local.create_role ? 1 : 0"),
            ("path", "var.role_path"),
            ("permissions_boundary", "var.permissions_boundary_arn"),
        ],
    );
    resource_with(
        &aws,
        "aws_iam_role_policy",
        "this",
        &[
            ("count", "local.create_role ? 1 : 0"),
            ("policy", "data.aws_iam_policy_document.this.json"),
        ],
    );
    assert_eq!(
        aws.locals()["create_role"].to_string(),
        "var.existing_role_arn == null"
    );
    resource_with(
        &aws,
        "aws_lambda_function",
        "this",
        &[("role", "local.role_arn")],
    );
    assert_eq!(
        output_source(&aws, "role_policy_json"),
        "data.aws_iam_policy_document.this.json",
        "aws-relay: the policy a role of the operator's needs"
    );
    for (input, default) in [
        ("existing_role_arn", "null"),
        ("role_path", "\"/\""),
        ("permissions_boundary_arn", "null"),
    ] {
        assert_eq!(
            source(aws.variables()[input].body(), "default").as_deref(),
            Some(default),
            "aws-relay: {input}"
        );
    }
    let moves: Vec<(String, String)> = aws
        .blocks("moved")
        .map(|m| {
            (
                source(m.body(), "from").unwrap_or_default(),
                source(m.body(), "to").unwrap_or_default(),
            )
        })
        .collect();
    for resource in ["aws_iam_role.this", "aws_iam_role_policy.this"] {
        assert!(
            moves.contains(&(resource.to_owned(), format!("{resource}[0]"))),
            "aws-relay: no moved block for {resource}: {moves:?}"
        );
    }
}

/// The ledger table is protected from deletion by default (`ledger_deletion_protection`), the
/// archive buckets are not destroyed with their objects unless asked (`archive_force_destroy`,
/// false), and the ledger database gcp-relay creates follows `deletion_protection`.
#[test]
fn ledger_and_archive_are_kept_from_deletion_by_default() {
    let aws = model::module("aws-relay");
    resource_with(
        &aws,
        "aws_dynamodb_table",
        "ledger",
        &[(
            "deletion_protection_enabled",
            "var.ledger_deletion_protection",
        )],
    );
    assert_eq!(
        source(
            aws.variables()["ledger_deletion_protection"].body(),
            "default"
        )
        .as_deref(),
        Some("true")
    );
    for (name, ty) in [
        ("aws-relay", "aws_s3_bucket"),
        ("gcp-relay", "google_storage_bucket"),
    ] {
        let config = model::module(name);
        assert_eq!(
            source(config.resource(ty, "archive").body(), "force_destroy").as_deref(),
            Some("var.archive_force_destroy"),
            "{name}"
        );
        assert_eq!(
            source(
                config.variables()["archive_force_destroy"].body(),
                "default"
            )
            .as_deref(),
            Some("false"),
            "{name}"
        );
    }
    let gcp = model::module("gcp-relay");
    let database = gcp.resource("google_firestore_database", "ledger").body();
    assert_sources(
        database,
        &[(
            "delete_protection_state",
            "var.deletion_protection ? \"DELETE_PROTECTION_ENABLED\" : \"DELETE_PROTECTION_DISABLED\"",
        )],
    );
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Dashboards and alarms
////////////////////////////////////////////////////////////////////////////////////////////////

/// gcp-relay's dashboard JSON is written as the Monitoring API returns it, so that a plan after
/// an apply shows no change: no number (the API writes int64 fields as strings: columns "2"),
/// no `false`, and no empty list or object (the API leaves defaults out, and the provider
/// ignores only fields the API adds, not values it changes or drops).
#[test]
fn gcp_dashboard_json_is_written_as_the_api_returns_it() {
    let gcp = model::module("gcp-relay");
    let dashboard = gcp.resource("google_monitoring_dashboard", "this").body();
    let Some(Expression::FuncCall(call)) = attr(dashboard, "dashboard_json") else {
        panic!("gcp-relay: dashboard_json must be jsonencode(…)")
    };
    assert_eq!(call.name.name.as_str(), "jsonencode");
    let body = call.args.first().expect("jsonencode's argument");
    let locals = gcp.locals();
    let Expression::Array(entries) = locals["dashboard_widgets"] else {
        panic!("gcp-relay: dashboard_widgets is a list of {{ shown, widget }}")
    };
    let mut roots = vec![body];
    roots.extend(
        entries
            .iter()
            .map(|e| field(e, "widget").expect("a widget")),
    );
    let mut problems = Vec::new();
    for root in roots {
        walk(root, &mut |e| match e {
            Expression::Number(n) => problems.push(format!("the number {n}")),
            Expression::Bool(false) => problems.push("false".to_owned()),
            Expression::Array(items) if items.is_empty() => problems.push("[]".to_owned()),
            Expression::Object(object) if object.is_empty() => problems.push("{}".to_owned()),
            _ => {}
        });
    }
    assert!(
        problems.is_empty(),
        "gcp-relay: the dashboard JSON holds what the API rewrites: {problems:?}"
    );
    let columns = field(body, "gridLayout").and_then(|g| field(g, "columns"));
    assert_eq!(
        columns.and_then(literal_string).as_deref(),
        Some("2"),
        "gcp-relay: columns as the API returns it"
    );
}

/// Both modules alarm on metric lines the relay dropped (every other alarm reads those lines),
/// any in the alarms' window, notifying the alarms' recipients, and list the alarm with the
/// others.
#[test]
fn both_modules_alarm_on_dropped_metric_lines() {
    let aws = model::module("aws-relay");
    policy::relay_metric_alarm(&aws, "metric_lines_dropped", "MetricLinesDropped");
    assert!(
        output_source(&aws, "alarm_arns")
            .contains("aws_cloudwatch_metric_alarm.metric_lines_dropped"),
        "aws-relay: alarm_arns lists it"
    );

    let gcp = model::module("gcp-relay");
    let metric = gcp
        .resource("google_logging_metric", "metric_lines_dropped")
        .body();
    let filter = source(metric, "filter").unwrap_or_default();
    assert!(
        filter.contains("${local.metric_lines}")
            && filter.contains("jsonPayload.MetricLinesDropped:*"),
        "gcp-relay: the metric reads the relay's dropped-lines lines: {filter}"
    );
    let policy = resource_with(
        &gcp,
        "google_monitoring_alert_policy",
        "metric_lines_dropped",
        &[
            ("enabled", "var.alerts_enabled"),
            ("notification_channels", "var.alert_notification_channels"),
        ],
    );
    let condition = only_block(policy, "conditions", "gcp-relay: metric_lines_dropped");
    let threshold = only_block(
        condition,
        "condition_threshold",
        "gcp-relay: metric_lines_dropped",
    );
    assert!(
        source(threshold, "filter")
            .unwrap_or_default()
            .contains("google_logging_metric.metric_lines_dropped.name"),
        "gcp-relay: the policy reads the metric"
    );
    assert_sources(threshold, &[("threshold_value", "0")]);
    assert!(
        output_source(&gcp, "alert_policy_names")
            .contains("google_monitoring_alert_policy.metric_lines_dropped"),
        "gcp-relay: alert_policy_names lists it"
    );
}

/// Every example outputs its relay's dashboard URL and its alarms (`alarm_arns` on AWS,
/// `alert_policy_names` on GCP), from the module.
#[test]
fn examples_output_their_dashboard_and_alarms() {
    for example in model::examples() {
        let outputs = example.outputs();
        let (call, target, _) = example
            .module_calls()
            .into_iter()
            .find(|(_, target, _)| super::RELAY_MODULES.contains(&target.as_str()))
            .unwrap_or_else(|| panic!("{}: calls no relay module", example.name));
        let alarms = if target == "aws-relay" {
            "alarm_arns"
        } else {
            "alert_policy_names"
        };
        for output in ["dashboard_url", alarms] {
            let value = outputs
                .get(output)
                .and_then(|block| source(block.body(), "value"));
            assert_eq!(
                value,
                Some(format!("module.{call}.{output}")),
                "{}: output {output}",
                example.name
            );
        }
    }
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Helpers
////////////////////////////////////////////////////////////////////////////////////////////////

/// The `dynamic "<label>"` block of a body.
fn dynamic<'a>(body: &'a Body, block: &str) -> Option<&'a Block> {
    nested(body, "dynamic").find(|d| label(d, 0) == block)
}

/// The conditions of a variable's validations, as written.
fn validations(variable: &Body) -> Vec<String> {
    nested(variable, "validation")
        .filter_map(|v| source(v.body(), "condition"))
        .collect()
}

/// The patterns of every `regex(…)` of a variable's validations.
fn regex_patterns(variable: &Body) -> Vec<String> {
    let mut patterns = Vec::new();
    for validation in nested(variable, "validation") {
        let condition = attr(validation.body(), "condition").expect("condition");
        walk(condition, &mut |e| {
            if let Expression::FuncCall(call) = e
                && call.name.name.as_str() == "regex"
                && let Some(pattern) = call.args.first().and_then(literal_string)
            {
                patterns.push(pattern);
            }
        });
    }
    patterns
}

/// The value of `key` in an object expression.
fn field<'a>(expr: &'a Expression, key: &str) -> Option<&'a Expression> {
    let Expression::Object(object) = expr else {
        return None;
    };
    object
        .iter()
        .find(|(k, _)| model::object_key(k) == key)
        .map(|(_, v)| v)
}

/// Text without its spaces (an empty object as written, `{}` or `{ }`).
fn no_space(text: Option<String>) -> Option<String> {
    text.map(|t| t.replace(' ', ""))
}
