//! Holds the Terraform under `terraform/` to the relay's code and to the project's module
//! conventions. Nothing here runs Terraform (its provider registry is out of reach): the modules
//! and examples are parsed with hcl-rs, and what they would set is handed to relay-core's own
//! configuration parser.
//!
//! Run with `cargo test -p relay-tests --test terraform`.

mod alarms;
mod archive;
mod config;
mod contract;
mod dashboard;
mod eval;
mod ledger;
mod model;
mod platform;
mod policy;
mod stored_sinks;
mod traps;

use std::collections::{BTreeMap, BTreeSet};

use hcl::Expression;
use relay_core::config::{Config as RelayConfig, SETTINGS};

use eval::Scope;
use model::{Config, attr, label, literal_string, literal_strings, nested, root_attribute, walk};
use platform::{
    EnvValue, EnvVar, cloud_run_environment, lambda_environment, policy_statements,
    role_policy_documents, set_by,
};

/// The modules that run the relay, each on its platform.
const RELAY_MODULES: [&str; 2] = ["aws-relay", "gcp-relay"];

/// Files every module and every example has (terraform-aws-modules / terraform-google-modules).
const STANDARD_FILES: [&str; 5] = [
    "main.tf",
    "variables.tf",
    "outputs.tf",
    "versions.tf",
    "README.md",
];

/// On Lambda, the relay's sinks, its secret, its stored routes, its delivery ledger, its
/// archive and its configuration file, and the IAM actions each calls. (SendMessageBatch is
/// authorized by sqs:SendMessage, PublishBatch by sns:Publish.) The stored routes: GetObject
/// reads the document, ListBucket makes a missing one a 404, and the splits' queues and topics
/// take SendMessage and Publish. The ledger: its conditional writes are UpdateItem, the reset of
/// an expired item PutItem. The archive: PutObject with If-None-Match, GetObject to read back
/// what a 412 found, and its key. The configuration file: a Secrets Manager secret, read once.
const ACTION_OF_VARIABLE: [(&str, &str); 15] = [
    ("RELAY_SQS_QUEUE_URL", "sqs:SendMessage"),
    ("RELAY_SNS_TOPIC_ARN", "sns:Publish"),
    (
        "RELAY_HMAC_KEYS_SECRET_ARN",
        "secretsmanager:GetSecretValue",
    ),
    ("RELAY_ROUTES_URL", "s3:GetObject"),
    ("RELAY_ROUTES_URL", "s3:ListBucket"),
    ("RELAY_ROUTES_URL", "sqs:SendMessage"),
    ("RELAY_ROUTES_URL", "sns:Publish"),
    ("RELAY_LEDGER_URL", "dynamodb:UpdateItem"),
    ("RELAY_LEDGER_URL", "dynamodb:PutItem"),
    ("RELAY_ARCHIVE_URL", "s3:PutObject"),
    ("RELAY_ARCHIVE_URL", "s3:GetObject"),
    ("RELAY_ARCHIVE_STREAM", "firehose:PutRecord"),
    ("RELAY_ARCHIVE_STREAM", "firehose:PutRecordBatch"),
    (
        "RELAY_ARCHIVE_KEY_SECRET_ARN",
        "secretsmanager:GetSecretValue",
    ),
    ("RELAY_CONFIG", "secretsmanager:GetSecretValue"),
];

/// The only statements whose resources end in a wildcard: a name prefix, the splits' queues
/// and topics (`<split_prefix>*`), which developers create and delete while the relay runs.
const SPLIT_STATEMENTS: [(&str, &str); 2] = [
    ("SendToSplitQueues", "local.split_queue_arns"),
    ("PublishToSplitTopics", "local.split_topic_arns"),
];

/// What a Lambda function needs to write its own log group, whatever it relays.
const LOG_ACTIONS: [&str; 2] = ["logs:CreateLogStream", "logs:PutLogEvents"];

/// What the sender of a message needs on a customer-managed KMS key (SQS), and the reader of a
/// secret encrypted with one (Secrets Manager).
const KMS_ACTIONS: [&str; 2] = ["kms:GenerateDataKey", "kms:Decrypt"];

////////////////////////////////////////////////////////////////////////////////////////////////
// Conventions
////////////////////////////////////////////////////////////////////////////////////////////////

/// Every module and example has main.tf, variables.tf, outputs.tf, versions.tf and a README,
/// and variables, outputs and the `terraform` block live in their own files.
#[test]
fn every_directory_has_the_standard_files() {
    for config in all_configs() {
        for file in STANDARD_FILES {
            let path = config.dir.join(file);
            assert!(path.is_file(), "{}: {file} is missing", config.name);
        }
        for (kind, file) in [
            ("variable", "variables.tf"),
            ("output", "outputs.tf"),
            ("terraform", "versions.tf"),
        ] {
            for (name, body) in &config.files {
                let misplaced = name != file && body.blocks().any(|b| b.identifier() == kind);
                assert!(
                    !misplaced,
                    "{}: {kind} blocks belong in {file}, not {name}",
                    config.name
                );
            }
        }
    }
}

/// versions.tf requires a minimum Terraform version and pins every provider (a hashicorp/
/// source) between a lower bound (`>=`) and an upper bound (`<`).
#[test]
fn versions_pin_terraform_and_every_provider() {
    for config in all_configs() {
        let terraform = config.blocks("terraform").next();
        let terraform = terraform.unwrap_or_else(|| panic!("{}: no terraform block", config.name));
        let required_version = attr(terraform.body(), "required_version").and_then(literal_string);
        assert!(
            required_version.is_some_and(|v| v.starts_with(">=")),
            "{}: required_version must set a lower bound",
            config.name
        );
        let providers = nested(terraform.body(), "required_providers").next();
        let providers =
            providers.unwrap_or_else(|| panic!("{}: no required_providers", config.name));
        assert!(
            providers.body().attributes().next().is_some(),
            "{}: no provider",
            config.name
        );
        for provider in providers.body().attributes() {
            let name = provider.key();
            let Expression::Object(spec) = provider.expr() else {
                panic!("{}: provider {name} is not an object", config.name)
            };
            let field = |k: &str| {
                let value = spec.iter().find(|(key, _)| model::object_key(key) == k);
                value
                    .and_then(|(_, v)| literal_string(v))
                    .unwrap_or_default()
            };
            let source = field("source");
            assert!(
                source.starts_with("hashicorp/"),
                "{}: provider {name}: source {source:?}",
                config.name
            );
            let version = field("version");
            let bounds: Vec<&str> = version.split(',').map(str::trim).collect();
            assert!(
                bounds.iter().any(|b| b.starts_with(">= "))
                    && bounds.iter().any(|b| b.starts_with("< ")),
                "{}: provider {name} must be pinned between >= and <, got {version:?}",
                config.name
            );
        }
    }
}

/// Every variable has a non-empty description and a type, and every output a description.
#[test]
fn every_variable_has_a_description_and_a_type() {
    for config in all_configs() {
        let variables = config
            .variables()
            .into_iter()
            .map(|(n, b)| ("variable", n, b));
        let outputs = config.outputs().into_iter().map(|(n, b)| ("output", n, b));
        for (kind, name, block) in variables.chain(outputs) {
            let description = attr(block.body(), "description")
                .and_then(literal_string)
                .unwrap_or_default();
            assert!(
                !description.trim().is_empty(),
                "{}: {kind} {name} has no description",
                config.name
            );
            assert!(
                kind != "variable" || attr(block.body(), "type").is_some(),
                "{}: variable {name} has no type",
                config.name
            );
        }
    }
}

/// Each module README has Inputs and Outputs tables (terraform-docs layout) with one row per
/// variable and per output, no more, no fewer.
#[test]
fn module_readmes_list_every_input_and_output() {
    for config in model::modules() {
        let readme = config.read_mentioning("README.md", &["## Inputs", "## Outputs"]);
        let anchors = |prefix: &str| -> BTreeSet<String> {
            readme
                .split("<a name=\"")
                .skip(1)
                .filter_map(|rest| rest.split('"').next())
                .filter_map(|anchor| anchor.strip_prefix(prefix))
                .map(str::to_owned)
                .collect()
        };
        let variables: BTreeSet<String> =
            config.variables().keys().map(|k| (*k).to_owned()).collect();
        let outputs: BTreeSet<String> = config.outputs().keys().map(|k| (*k).to_owned()).collect();
        assert_eq!(
            anchors("input_"),
            variables,
            "{}: README Inputs rows differ from variables.tf",
            config.name
        );
        assert_eq!(
            anchors("output_"),
            outputs,
            "{}: README Outputs rows differ from outputs.tf",
            config.name
        );
    }
}

/// Every `#checkov:skip` names a check, gives a reason, and sits inside the resource it concerns
/// (first lines of the block), so that no skip applies to more than that resource.
#[test]
fn checkov_skips_sit_in_their_resource_with_a_reason() {
    let mut skips = 0;
    for config in all_configs() {
        for file in config.files.keys() {
            let text = config.read(file);
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let Some(skip) = line.trim().strip_prefix("#checkov:skip=") else {
                    assert!(
                        !line.contains("checkov:skip"),
                        "{}/{file}:{}: malformed skip {line:?}",
                        config.name,
                        i + 1
                    );
                    continue;
                };
                skips += 1;
                let (id, reason) = skip.split_once(':').unwrap_or((skip, ""));
                assert!(
                    id.starts_with("CKV_") || id.starts_with("CKV2_"),
                    "{}/{file}:{}: {id:?} is not a checkov check id",
                    config.name,
                    i + 1
                );
                assert!(
                    reason.trim().len() >= 40,
                    "{}/{file}:{}: skip {id} needs a reason",
                    config.name,
                    i + 1
                );
                let opener = lines[..i]
                    .iter()
                    .rev()
                    .find(|l| !l.trim_start().starts_with('#'))
                    .copied()
                    .unwrap_or("");
                assert!(
                    opener.starts_with("resource \"") && opener.trim_end().ends_with('{'),
                    "{}/{file}:{}: skip {id} must be the first lines of its resource block",
                    config.name,
                    i + 1
                );
            }
        }
    }
    assert!(
        skips > 0,
        "expected the deliberate skips (public Function URL, …)"
    );
}

////////////////////////////////////////////////////////////////////////////////////////////////
// The relay's environment, held to relay-core
////////////////////////////////////////////////////////////////////////////////////////////////

/// Every environment variable a relay module sets is one relay-core knows
/// (`relay_core::config::SETTINGS`), set once; never `RELAY_LISTEN` (Cloud Run sets `PORT`,
/// Lambda has no listener) nor `RELAY_SEND_SECRET` (the CLI's); never a sink the platform cannot
/// serve (Pub/Sub or a file from Lambda, SQS/SNS from Cloud Run's Google identity).
#[test]
fn environment_variables_are_ones_relay_core_accepts() {
    for name in RELAY_MODULES {
        let config = model::module(name);
        let env = environment(&config);
        assert!(!env.is_empty(), "{name}: no environment found");
        let mut seen = BTreeSet::new();
        for var in &env {
            assert!(
                SETTINGS.iter().any(|s| s.var == var.name),
                "{name}: {} is not a variable relay-core reads",
                var.name
            );
            assert!(
                seen.insert(var.name.as_str()),
                "{name}: {} is set twice",
                var.name
            );
        }
        let forbidden: &[&str] = match name {
            "aws-relay" => &[
                "RELAY_LISTEN",
                "RELAY_SEND_SECRET",
                "RELAY_PUBSUB_TOPIC",
                "RELAY_FILE_SINK",
            ],
            _ => &[
                "RELAY_LISTEN",
                "RELAY_SEND_SECRET",
                "RELAY_SQS_QUEUE_URL",
                "RELAY_SNS_TOPIC_ARN",
                "RELAY_FILE_SINK",
            ],
        };
        for f in forbidden {
            assert!(!seen.contains(f), "{name}: must not set {f}");
        }
    }
}

/// Every value a relay module can give a `RELAY_*` variable, as far as the configuration shows
/// (literals, defaults, what the examples pass, both branches of conditionals, documented
/// formats of computed attributes), passes relay-core's own parser for that variable. A value
/// with no such sample must come from variables that validate their input. `RELAY_CONFIG` is
/// where the configuration file is (a secret's ARN, a mounted path), which relay-core reads at
/// start and cannot read here: `config::relay_config_names_the_modules_own_secret` holds it.
#[test]
fn environment_values_have_the_form_relay_core_accepts() {
    let examples = model::examples();
    for name in RELAY_MODULES {
        let config = model::module(name);
        let scope = Scope::module(&config, &examples);
        let variables = config.variables();
        for var in environment(&config) {
            let EnvValue::Plain(expr) = var.value else {
                continue;
            };
            if var.name == "RELAY_CONFIG" {
                continue;
            }
            let samples = scope.texts(expr);
            assert_relay_core_accepts(name, &var.name, &samples);
            for input in feeding_variables(&config, expr) {
                let block = variables
                    .get(input.as_str())
                    .unwrap_or_else(|| panic!("{name}: no variable {input}"));
                let is_bool = attr(block.body(), "type").is_some_and(|t| t.to_string() == "bool");
                assert!(
                    is_bool || nested(block.body(), "validation").next().is_some(),
                    "{name}: variable {input} feeds {} and needs a validation block",
                    var.name
                );
            }
            assert!(
                !samples.is_empty() || !feeding_variables(&config, expr).is_empty(),
                "{name}: no sample value of {} to check, and no validated variable behind it",
                var.name
            );
        }
    }
}

/// The HMAC keys never travel as a plain environment value: on Lambda the function gets the ARN
/// of its Secrets Manager secret (`RELAY_HMAC_KEYS_SECRET_ARN`), on Cloud Run `RELAY_HMAC_KEYS`
/// comes from Secret Manager (`value_source.secret_key_ref`) at the version Terraform wrote.
#[test]
fn hmac_keys_come_from_a_secret_store() {
    for name in RELAY_MODULES {
        let config = model::module(name);
        let env = environment(&config);
        assert!(
            env.iter().all(|v| v.name != "RELAY_HMAC_SECRET"),
            "{name}: RELAY_HMAC_SECRET would be a plain secret"
        );
        for var in &env {
            if let EnvValue::Plain(expr) = var.value {
                assert!(
                    !mentions_secret(&config, expr),
                    "{name}: {} carries the HMAC secret in plain text",
                    var.name
                );
            }
        }
    }

    let aws = model::module("aws-relay");
    let env = lambda_environment(&aws);
    let arn = set_by(&env, "aws-relay", "RELAY_HMAC_KEYS_SECRET_ARN");
    let EnvValue::Plain(expr) = arn.value else {
        unreachable!("Lambda variables are plain")
    };
    assert_eq!(expr.to_string(), "aws_secretsmanager_secret.hmac.arn");
    assert!(
        arn.gate.is_none(),
        "aws-relay: the secret ARN must always be set"
    );
    assert!(
        env.iter().all(|v| v.name != "RELAY_HMAC_KEYS"),
        "aws-relay: RELAY_HMAC_KEYS would be a plain secret"
    );

    let gcp = model::module("gcp-relay");
    let env = cloud_run_environment(&gcp);
    let keys = set_by(&env, "gcp-relay", "RELAY_HMAC_KEYS");
    let EnvValue::SecretRef { secret, version } = &keys.value else {
        panic!("gcp-relay: RELAY_HMAC_KEYS must use value_source.secret_key_ref")
    };
    assert_eq!(
        secret.to_string(),
        "google_secret_manager_secret.hmac.secret_id"
    );
    assert_eq!(
        version.map(ToString::to_string).as_deref(),
        Some("google_secret_manager_secret_version.hmac.version")
    );
}

/// What Terraform stores in the secret is a `RELAY_HMAC_KEYS` value relay-core accepts: a JSON
/// object of one keyId (the subscription's `hmac_key_id`) to its secret.
#[test]
fn stored_secrets_are_relay_hmac_keys_objects() {
    let examples = model::examples();
    for (name, ty, field) in [
        (
            "aws-relay",
            "aws_secretsmanager_secret_version",
            "secret_string_wo",
        ),
        (
            "gcp-relay",
            "google_secret_manager_secret_version",
            "secret_data_wo",
        ),
    ] {
        let config = model::module(name);
        let scope = Scope::module(&config, &examples);
        let stored = attr(config.resource(ty, "hmac").body(), field)
            .unwrap_or_else(|| panic!("{name}: {ty}.hmac.{field}"));
        let samples = scope.evaluated(stored, &format!("{name}: {ty}.hmac.{field}"));
        let key_ids = scope.texts(config.locals()["hmac_key_id"]);
        assert_relay_core_accepts(name, "RELAY_HMAC_KEYS", &samples);
        for sample in samples {
            let object: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&sample).expect("a JSON object");
            assert_eq!(object.len(), 1, "{name}: one keyId per relay");
            let key_id = object.keys().next().expect("one key");
            assert!(
                key_ids.contains(key_id),
                "{name}: the stored keyId {key_id:?} is not the module's hmac_key_id"
            );
        }
    }
}

////////////////////////////////////////////////////////////////////////////////////////////////
// IAM: what the sinks call, and nothing else
////////////////////////////////////////////////////////////////////////////////////////////////

/// The Lambda role's one policy grants exactly the actions the enabled sinks call (derived from
/// the `RELAY_*` variables the module sets: SQS → sqs:SendMessage, SNS → sns:Publish, the secret
/// → secretsmanager:GetSecretValue), plus writing its own logs and, only with customer-managed
/// keys, kms:GenerateDataKey/kms:Decrypt. A conditional sink's statement carries the same
/// condition as its variable; no statement names `*`; no managed policy is attached.
#[test]
fn lambda_role_allows_exactly_what_the_enabled_sinks_call() {
    let config = model::module("aws-relay");
    let env = lambda_environment(&config);

    for ty in [
        "aws_iam_role_policy_attachment",
        "aws_iam_policy",
        "aws_iam_policy_attachment",
    ] {
        assert!(
            config.resources(ty).is_empty(),
            "aws-relay: no {ty}: the role gets one inline policy"
        );
    }
    let role = config.resource("aws_iam_role", "this");
    for a in ["managed_policy_arns", "inline_policy"] {
        assert!(
            attr(role.body(), a).is_none(),
            "aws-relay: the role must not set {a}"
        );
    }
    let documents = role_policy_documents(&config);
    assert_eq!(
        documents.len(),
        1,
        "aws-relay: the role has exactly one policy"
    );

    // (action, the condition under which it must be granted; None: always).
    let mut expected: Vec<(&str, Option<String>)> =
        LOG_ACTIONS.iter().map(|a| (*a, None)).collect();
    for var in &env {
        for (_, action) in ACTION_OF_VARIABLE
            .iter()
            .filter(|(name, _)| *name == var.name)
        {
            expected.push((action, var.gate.clone()));
        }
    }
    let customer_keys = config.variables().contains_key("kms_key_arn");
    if customer_keys {
        for action in KMS_ACTIONS {
            expected.push((action, Some("kms_key_arns".to_owned())));
        }
    }
    // The archive's own key: writing an object under SSE-KMS needs GenerateDataKey, reading
    // one back Decrypt.
    if config.variables().contains_key("archive_kms_key_arn") {
        for action in ["kms:GenerateDataKey", "kms:Decrypt"] {
            expected.push((action, Some("var.archive_kms_key_arn".to_owned())));
        }
    }
    // The sources' secrets that RELAY_CONFIG names (secret_arn), as source_secret_arns lists
    // them, and their keys (source_secret_kms_key_arns: Decrypt only, a gate that names
    // kms_key_arns as the other keys' does).
    if config.variables().contains_key("source_secret_arns") {
        expected.push((
            "secretsmanager:GetSecretValue",
            Some("var.source_secret_arns".to_owned()),
        ));
    }

    // tracing_mode = "Active": the function's segments to X-Ray, whose calls take no resource
    // (their statement's only resource is "*", gated on the variable).
    for action in ["xray:PutTraceSegments", "xray:PutTelemetryRecords"] {
        expected.push((action, Some("var.tracing_mode == \"Active\"".to_owned())));
    }

    let statements = policy_statements(&config, &documents[0]);
    let mut granted: Vec<(&str, Option<String>)> = Vec::new();
    for statement in &statements {
        assert_eq!(
            statement.effect, "Allow",
            "aws-relay: statement {} must allow",
            statement.sid
        );
        let resources = statement
            .resources
            .unwrap_or_else(|| panic!("aws-relay: statement {} names no resource", statement.sid));
        let mut star = false;
        walk(resources, &mut |e| {
            star |= literal_string(e).is_some_and(|s| s.contains('*') && !s.ends_with(":*"))
        });
        assert!(
            !star,
            "aws-relay: statement {} grants on a wildcard resource: {resources}",
            statement.sid
        );
        // A name-prefix wildcard, through a local, only where the splits need one.
        let gate = statement.gate.as_deref().unwrap_or_default();
        for (sid, local) in SPLIT_STATEMENTS {
            assert_eq!(
                gate.contains(local),
                statement.sid == sid,
                "aws-relay: {local} (a <split_prefix>* wildcard) belongs to {sid} only, not {}",
                statement.sid
            );
        }
        for action in &statement.actions {
            assert!(!action.contains('*'), "aws-relay: wildcard action {action}");
            let grant = (action.as_str(), statement.gate.clone());
            assert!(
                !granted.contains(&grant),
                "aws-relay: {action} granted twice under {gate:?}"
            );
            granted.push(grant);
        }
    }
    for (sid, local) in SPLIT_STATEMENTS {
        let arns = config.locals()[local.trim_start_matches("local.")].to_string();
        assert!(
            arns.ends_with(":${local.split_prefix}*\""),
            "aws-relay: {sid} must be limited to the split prefix: {arns}"
        );
    }

    // Each expected grant under its condition, and nothing else.
    let holds = |condition: &Option<String>, gate: &Option<String>| match (condition, gate) {
        (None, None) => true,
        (Some(condition), Some(gate)) => gate.contains(condition.as_str()),
        _ => false,
    };
    for (action, condition) in &expected {
        assert!(
            granted
                .iter()
                .any(|(a, gate)| a == action && holds(condition, gate)),
            "aws-relay: {action} must be granted under the same condition as its variable ({condition:?}); grants: {granted:?}"
        );
    }
    let unexpected: Vec<_> = granted
        .iter()
        .filter(|(action, gate)| {
            !expected
                .iter()
                .any(|(a, condition)| a == action && holds(condition, gate))
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "aws-relay: granted (action, condition) that no sink calls for: {unexpected:?}"
    );
}

/// The subscriber's queue policy (aws-queue-grant) allows the relay's role, and only it, to
/// sqs:SendMessage on that one queue; anything else it says is a Deny.
#[test]
fn queue_grant_lets_the_relay_role_send_and_only_send() {
    let config = model::module("aws-queue-grant");
    assert_eq!(
        config.resource_types(),
        ["aws_sqs_queue_policy"],
        "aws-queue-grant creates only the queue policy"
    );
    let policy = config.resource_attr("aws_sqs_queue_policy", "this", "policy");
    assert_eq!(policy.to_string(), "data.aws_iam_policy_document.this.json");

    let document = config.data("aws_iam_policy_document", "this");
    let allows: Vec<_> = nested(document.body(), "statement")
        .filter(|s| attr(s.body(), "effect").and_then(literal_string).as_deref() != Some("Deny"))
        .collect();
    assert_eq!(
        allows.len(),
        1,
        "aws-queue-grant: exactly one Allow statement"
    );
    let allow = allows[0].body();
    assert_eq!(
        attr(allow, "actions").and_then(literal_strings),
        Some(vec!["sqs:SendMessage".to_owned()])
    );
    let resources = match attr(allow, "resources") {
        Some(Expression::Array(items)) => items.iter().map(ToString::to_string).collect(),
        _ => Vec::new(),
    };
    assert_eq!(
        resources,
        ["var.queue_arn"],
        "aws-queue-grant: the grant is on the one queue"
    );
    let principals: Vec<_> = nested(allow, "principals").collect();
    assert_eq!(principals.len(), 1);
    assert_eq!(
        attr(principals[0].body(), "type")
            .and_then(literal_string)
            .as_deref(),
        Some("AWS")
    );
    assert_eq!(
        attr(principals[0].body(), "identifiers")
            .map(ToString::to_string)
            .as_deref(),
        Some("var.relay_role_arns")
    );
    assert!(
        nested(document.body(), "dynamic").next().is_none(),
        "aws-queue-grant: no dynamic statements"
    );
}

/// On Google Cloud every grant is on one resource: the relay's service account reads its own
/// secrets and publishes to its own topic; allUsers may invoke the service (the DSS cannot
/// present a Google identity); gcp-topic-grant grants roles/pubsub.publisher on one topic and
/// nothing else. The one grant made on the project, the ledger's custom role (Firestore has no
/// IAM policy on a database), carries a condition limiting it to the ledger's database
/// (ledger::gcp_ledger_grant_is_limited_to_the_ledger_database).
#[test]
fn gcp_grants_are_on_single_resources() {
    let relay = model::module("gcp-relay");
    let grant = model::module("gcp-topic-grant");
    for config in [&relay, &grant] {
        for ty in config.resource_types() {
            // A custom role defines permissions and grants nothing (the ledger's; checked in
            // ledger::gcp_ledger_grant_is_limited_to_the_ledger_database).
            if ty == "google_project_iam_custom_role" {
                continue;
            }
            assert!(
                ty.ends_with("_iam_member") || !ty.contains("_iam_"),
                "{}: {ty} is authoritative; use *_iam_member",
                config.name
            );
            for level in [
                "google_project_iam",
                "google_folder_iam",
                "google_organization_iam",
            ] {
                // The ledger's conditioned grant, checked in the ledger tests.
                let ledger = config.name == "modules/gcp-relay"
                    && ty == "google_project_iam_member"
                    && config
                        .resources(ty)
                        .iter()
                        .all(|(name, _)| *name == "relay_ledger");
                assert!(
                    ledger || !ty.starts_with(level),
                    "{}: no grant on a whole project/folder/organization ({ty})",
                    config.name
                );
            }
        }
    }

    let sa = "serviceAccount:${google_service_account.this.email}";
    let members = iam_members(&relay);
    let expected: BTreeSet<(String, String, String)> = [
        (
            "google_secret_manager_secret_iam_member",
            "roles/secretmanager.secretAccessor",
            sa,
        ),
        (
            "google_pubsub_topic_iam_member",
            "roles/pubsub.publisher",
            sa,
        ),
        (
            "google_cloud_run_v2_service_iam_member",
            "roles/run.invoker",
            "allUsers",
        ),
        // The stored routes: the relay reads the one object, route_writers write it (both
        // limited to it by an IAM condition, checked in gcp_routes_grants_are_on_the_one_object).
        (
            "google_storage_bucket_iam_member",
            "roles/storage.objectViewer",
            sa,
        ),
        (
            "google_storage_bucket_iam_member",
            "roles/storage.objectUser",
            "each.value",
        ),
        // The delivery ledger: the module's custom role, conditioned on its database.
        (
            "google_project_iam_member",
            "google_project_iam_custom_role.ledger[0].name",
            sa,
        ),
        // The archive: the relay creates objects under the prefix (conditioned on it, checked
        // in archive::gcp_relay_may_only_create_archive_objects_under_the_prefix), the
        // archive_readers list and read them.
        (
            "google_storage_bucket_iam_member",
            "roles/storage.objectCreator",
            sa,
        ),
        (
            "google_storage_bucket_iam_member",
            "roles/storage.objectViewer",
            "each.value",
        ),
        // The archive's key, the configuration file's secret: the relay and the archive_readers
        // read them; the sources' secrets (the relay reads them) are among these too.
        (
            "google_secret_manager_secret_iam_member",
            "roles/secretmanager.secretAccessor",
            "each.value",
        ),
        // archive_readers publish what they replay to the relay's own topic.
        (
            "google_pubsub_topic_iam_member",
            "roles/pubsub.publisher",
            "each.value",
        ),
        // With archive_pubsub, Pub/Sub's service agent writes the archive's subscription to
        // the bucket: objects under the prefix, and the bucket found.
        (
            "google_storage_bucket_iam_member",
            "roles/storage.objectCreator",
            "local.pubsub_service_agent",
        ),
        (
            "google_storage_bucket_iam_member",
            "roles/storage.legacyBucketReader",
            "local.pubsub_service_agent",
        ),
    ]
    .iter()
    .map(|(t, r, m)| ((*t).to_owned(), (*r).to_owned(), (*m).to_owned()))
    .collect();
    assert_eq!(members, expected, "gcp-relay: grants");

    let expected: BTreeSet<(String, String, String)> = [(
        "google_pubsub_topic_iam_member".to_owned(),
        "roles/pubsub.publisher".to_owned(),
        "serviceAccount:${var.relay_service_account_email}".to_owned(),
    )]
    .into();
    assert_eq!(iam_members(&grant), expected, "gcp-topic-grant: grants");
    assert_eq!(
        grant.resource_types(),
        ["google_pubsub_topic_iam_member"],
        "gcp-topic-grant creates only the grant"
    );
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Examples and the DSS subscription
////////////////////////////////////////////////////////////////////////////////////////////////

/// Every example calls modules of this repository with every input they require and no input
/// they do not declare.
#[test]
fn examples_call_their_modules_with_all_required_inputs() {
    const META: [&str; 6] = [
        "source",
        "version",
        "providers",
        "depends_on",
        "count",
        "for_each",
    ];
    for example in model::examples() {
        let calls = example.module_calls();
        assert!(!calls.is_empty(), "{}: calls no module", example.name);
        for (call, target, block) in calls {
            let module = model::module(&target);
            let variables = module.variables();
            let given: BTreeSet<&str> = block
                .body()
                .attributes()
                .map(|a| a.key())
                .filter(|k| !META.contains(k))
                .collect();
            for (name, var) in &variables {
                if attr(var.body(), "default").is_none() {
                    assert!(
                        given.contains(name),
                        "{}: module {call} ({target}) needs {name}",
                        example.name
                    );
                }
            }
            for name in &given {
                assert!(
                    variables.contains_key(name),
                    "{}: module {call} ({target}) has no input {name}",
                    example.name
                );
            }
        }
    }
}

/// Every example outputs `endpoint_url` and `dss_subscription` (the relay module's JSON body),
/// and no output of an example or a relay module carries the HMAC secret, which is written to
/// the secret store only; the relay modules' `dss_subscription` is a JSON object of exactly
/// callback_url (https, with the callback path), method POST, encoding application/json and
/// hmac_key_id, with no secret in it.
#[test]
fn examples_output_the_endpoint_and_the_dss_subscription() {
    for example in model::examples() {
        let outputs = example.outputs();
        let relay_call = example
            .module_calls()
            .into_iter()
            .find(|(_, target, _)| RELAY_MODULES.contains(&target.as_str()))
            .map(|(call, _, _)| call.to_owned())
            .unwrap_or_else(|| panic!("{}: calls no relay module", example.name));
        assert!(
            !outputs.contains_key("hmac_secret"),
            "{}: outputs the secret",
            example.name
        );
        for (output, from) in [
            ("endpoint_url", "endpoint_url"),
            ("dss_subscription", "dss_subscription"),
        ] {
            let block = outputs
                .get(output)
                .unwrap_or_else(|| panic!("{}: no output {output}", example.name));
            let value = attr(block.body(), "value").map(ToString::to_string);
            assert_eq!(
                value,
                Some(format!("module.{relay_call}.{from}")),
                "{}: output {output}",
                example.name
            );
        }
    }

    let examples = model::examples();
    for name in RELAY_MODULES {
        let config = model::module(name);
        let outputs = config.outputs();
        for (output, block) in &outputs {
            let value = attr(block.body(), "value").expect("value");
            assert!(
                !mentions_secret(&config, value),
                "{name}: output {output} carries the secret"
            );
        }

        let value = attr(outputs["dss_subscription"].body(), "value").expect("value");
        let Expression::FuncCall(call) = value else {
            panic!("{name}: dss_subscription must be jsonencode({{…}})")
        };
        assert_eq!(call.name.name.as_str(), "jsonencode");
        let Some(Expression::Object(body)) = call.args.first() else {
            panic!("{name}: dss_subscription must encode an object")
        };
        let fields: BTreeMap<String, &Expression> = body
            .iter()
            .map(|(k, v)| (model::object_key(k), v))
            .collect();
        let keys: Vec<&str> = fields.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["callback_url", "encoding", "hmac_key_id", "method"],
            "{name}: subscription fields"
        );
        assert_eq!(literal_string(fields["method"]).as_deref(), Some("POST"));
        assert_eq!(
            literal_string(fields["encoding"]).as_deref(),
            Some("application/json")
        );
        assert!(
            !mentions_secret(&config, value),
            "{name}: dss_subscription must not carry the secret"
        );

        let scope = Scope::module(&config, &examples);
        let urls = scope.evaluated(fields["callback_url"], &format!("{name}: callback_url"));
        for url in urls {
            assert!(
                url.starts_with("https://") && !url.contains("//?") && !url[8..].contains("//"),
                "{name}: callback_url {url:?}"
            );
        }
    }
}

/// The stored routes' grants on Cloud Storage are on the bucket, so each carries an IAM
/// condition that limits it to the one routes object.
#[test]
fn gcp_routes_grants_are_on_the_one_object() {
    let relay = model::module("gcp-relay");
    let condition = relay.locals()["routes_object_condition"].to_string();
    assert!(
        condition.contains(
            r#"resource.name == "projects/_/buckets/${local.routes_bucket}/objects/${var.routes_object}""#
        ),
        "gcp-relay: the condition names one object: {condition}"
    );
    let grants: Vec<_> = relay
        .resources("google_storage_bucket_iam_member")
        .into_iter()
        .filter(|(name, _)| !name.contains("archive"))
        .collect();
    assert_eq!(grants.len(), 2, "gcp-relay: the routes grants");
    for (name, grant) in grants {
        let expression = nested(grant.body(), "condition")
            .next()
            .and_then(|c| attr(c.body(), "expression"))
            .map(ToString::to_string);
        assert_eq!(
            expression.as_deref(),
            Some("local.routes_object_condition"),
            "gcp-relay: google_storage_bucket_iam_member.{name} must be limited to the routes object"
        );
    }
}

/// Each relay module alarms on answers an operator must act on (alarms.rs holds them to the
/// DSS's retry pace) and on dead letters, with text for whoever is told, and sends the alarms to
/// a list the caller gives, checked by a validation.
#[test]
fn relay_modules_alarm_on_refused_answers_and_dead_letters() {
    for (module, ty, text, notify, variable, signals) in [
        (
            "aws-relay",
            "aws_cloudwatch_metric_alarm",
            "alarm_description",
            "alarm_actions",
            "alarm_actions",
            [
                ("needs_operator", "sink_failed"),
                ("dead_letters", "ApproximateNumberOfMessagesVisible"),
            ],
        ),
        (
            "gcp-relay",
            "google_monitoring_alert_policy",
            "documentation",
            "notification_channels",
            "alert_notification_channels",
            [
                ("needs_operator", "sink_failed"),
                ("dead_letters", "subscription/num_undelivered_messages"),
            ],
        ),
    ] {
        let config = model::module(module);
        for (name, signal) in signals {
            let alarm = config.resource(ty, name);
            let source = hcl::to_string(alarm.body()).expect("printable");
            assert!(
                source.contains(signal),
                "{module}: {ty}.{name} does not watch {signal}"
            );
            let described =
                attr(alarm.body(), text).is_some() || nested(alarm.body(), text).next().is_some();
            assert!(described, "{module}: {ty}.{name} has no {text}");
            let target = attr(alarm.body(), notify).map(ToString::to_string);
            assert_eq!(
                target.as_deref(),
                Some(format!("var.{variable}").as_str()),
                "{module}: {ty}.{name} must notify var.{variable}"
            );
        }
        assert!(
            nested(config.variable(variable).body(), "validation")
                .next()
                .is_some(),
            "{module}: variable {variable} has no validation"
        );
    }
}

/// The platform's own deadline stays above the relay's sink deadline, for the defaults and for
/// every value the examples pass, and a precondition says so at plan time: the relay answers
/// 503 in time instead of the platform timing out.
#[test]
fn platform_timeouts_exceed_the_sink_deadline() {
    let examples = model::examples();
    for (name, ty, platform_timeout) in [
        ("aws-relay", "aws_lambda_function", "timeout"),
        (
            "gcp-relay",
            "google_cloud_run_v2_service",
            "request_timeout_seconds",
        ),
    ] {
        let config = model::module(name);
        let scope = Scope::module(&config, &examples);
        let numbers = |var: &str| -> Vec<f64> {
            let expr: Expression = format!("var.{var}").parse().expect("a traversal");
            scope
                .samples(&expr)
                .iter()
                .filter_map(serde_json::Value::as_f64)
                .collect()
        };
        let (timeouts, sinks) = (numbers(platform_timeout), numbers("sink_timeout_ms"));
        assert!(
            !timeouts.is_empty() && !sinks.is_empty(),
            "{name}: no default for {platform_timeout} or sink_timeout_ms"
        );
        for t in &timeouts {
            for s in &sinks {
                assert!(
                    t * 1000.0 > *s,
                    "{name}: {platform_timeout} {t}s is not above sink_timeout_ms {s}"
                );
            }
        }

        let resource = config.resource(ty, "this");
        let guarded = nested(resource.body(), "lifecycle")
            .flat_map(|l| nested(l.body(), "precondition"))
            .filter_map(|p| attr(p.body(), "condition"))
            .any(|c| {
                let vars = model::references(c, "var");
                vars.iter().any(|v| v == "sink_timeout_ms")
                    && vars.iter().any(|v| v == platform_timeout)
            });
        assert!(
            guarded,
            "{name}: {ty}.this needs a precondition comparing sink_timeout_ms with {platform_timeout}"
        );
    }
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Helpers
////////////////////////////////////////////////////////////////////////////////////////////////

fn all_configs() -> Vec<Config> {
    let mut all = model::modules();
    all.extend(model::examples());
    all
}

/// The relay's environment as the module sets it, on whichever platform the module targets.
fn environment(config: &Config) -> Vec<EnvVar<'_>> {
    if !config.resources("aws_lambda_function").is_empty() {
        lambda_environment(config)
    } else if !config.resources("google_cloud_run_v2_service").is_empty() {
        cloud_run_environment(config)
    } else {
        panic!("{}: runs no relay", config.name)
    }
}

/// Asserts that relay-core's configuration parser takes each of `values` as variable `name`,
/// as the module or example `config` sets it.
#[track_caller]
fn assert_relay_core_accepts(config: &str, name: &str, values: &BTreeSet<String>) {
    for value in values {
        let problems = relay_core_problems(name, value);
        assert!(
            problems.is_empty(),
            "{config}: relay-core refuses {name}={value:?}: {problems:?}"
        );
    }
}

/// What relay-core's configuration parser says about `name=value`, and only about that variable
/// (a lone variable also draws "no key"/"no sink" complaints about others).
fn relay_core_problems(name: &str, value: &str) -> Vec<String> {
    // The archive's delivery stream is read with the archive it delivers to.
    let context = |n: &str| match (name, n) {
        ("RELAY_ARCHIVE_STREAM", "RELAY_ARCHIVE_URL") => Some("s3://archive-bucket/notifications/"),
        _ => None,
    };
    let var = |n: &str| match n == name {
        true => Some(value.to_owned()),
        false => context(n).map(str::to_owned),
    };
    match RelayConfig::from_vars(var) {
        Ok(_) => Vec::new(),
        Err(errors) => errors
            .0
            .into_iter()
            .filter(|e| e.var == name)
            .map(|e| e.message)
            .collect(),
    }
}

/// An expression and every local it reads, directly or through other locals.
fn with_locals<'a>(config: &'a Config, expr: &'a Expression) -> Vec<&'a Expression> {
    let locals = config.locals();
    let mut found = vec![expr];
    let mut visited = BTreeSet::new();
    let mut i = 0;
    while i < found.len() {
        for local in model::references(found[i], "local") {
            if let Some(next) = locals.get(local.as_str())
                && visited.insert(local)
            {
                found.push(next);
            }
        }
        i += 1;
    }
    found
}

/// The input variables an expression reads, directly or through locals.
fn feeding_variables(config: &Config, expr: &Expression) -> BTreeSet<String> {
    with_locals(config, expr)
        .into_iter()
        .flat_map(|e| model::references(e, "var"))
        .collect()
}

/// Whether an expression reads the HMAC secret: `var.hmac_secret`, `local.hmac_secret` or a
/// `random_password`, directly or through locals.
fn mentions_secret(config: &Config, expr: &Expression) -> bool {
    with_locals(config, expr).into_iter().any(|e| {
        let mut hit = false;
        walk(e, &mut |inner| {
            hit |= root_attribute(inner, "var").is_some_and(|v| v == "hmac_secret")
                || root_attribute(inner, "random_password").is_some()
                || root_attribute(inner, "ephemeral").is_some_and(|t| t == "random_password")
                || root_attribute(inner, "local").is_some_and(|l| l == "hmac_secret");
        });
        hit
    })
}

/// `(resource type, role, member as written)` of every `*_iam_member` resource: a predefined
/// role by its name, a custom role by the reference to it.
fn iam_members(config: &Config) -> BTreeSet<(String, String, String)> {
    config
        .blocks("resource")
        .filter(|b| label(b, 0).ends_with("_iam_member"))
        .map(|b| {
            let role = attr(b.body(), "role")
                .map(|r| literal_string(r).unwrap_or_else(|| r.to_string()))
                .expect("a role");
            let member = attr(b.body(), "member").map(|m| match literal_string(m) {
                Some(s) => s,
                None => template_source(m),
            });
            (label(b, 0).to_owned(), role, member.expect("a member"))
        })
        .collect()
}

/// A template such as `"serviceAccount:${x.email}"` as written, without the quotes.
fn template_source(expr: &Expression) -> String {
    let text = expr.to_string();
    text.trim_matches('"').to_owned()
}
