//! The delivery ledger's infrastructure, held to the ledger's storage design: the DynamoDB
//! table the Lambda writes and the Firestore collection the Cloud Run service writes, what each
//! relay may do on them, and the `RELAY_LEDGER_URL` that names them to the relay and to
//! `relay trace`.

use std::collections::BTreeSet;

use hcl::{Body, Expression};
use serde_json::Value;

use crate::eval::Scope;
use crate::model::{self, Config, attr, nested};
use crate::platform::{
    EnvVar, cloud_run_environment, lambda_environment, only_statement_on, plain_when,
    policy_statements,
};
use crate::policy::{
    assert_condition_on, assert_sources, assert_texts, only_block, output_source, resource_with,
    text,
};

/// The table's partition key (S): the bundle (or another sender's event id), which
/// `relay trace BUNDLE_UUID` queries.
const HASH_KEY: &str = "bundle_uuid";
/// The table's sort key (S): the ledger key, 64 hex characters.
const RANGE_KEY: &str = "ledger_key";
/// The TTL attribute of the table (epoch seconds) and the TTL field of the Firestore documents
/// (a timestamp): the last write plus the retention.
const EXPIRY_FIELD: &str = "expires_at";
/// The only item actions the relay calls: conditional writes, and the reset of an expired item.
const RELAY_ACTIONS: [&str; 2] = ["dynamodb:PutItem", "dynamodb:UpdateItem"];
/// What the relay's Firestore ledger calls need (crates/relay-core/src/ledger/firestore.rs):
/// `documents:batchGet` reads (get), `documents:commit` creates (`exists: false`) and replaces
/// (`updateTime`) a document; in the custom role's order.
const LEDGER_PERMISSIONS: [&str; 3] = [
    "datastore.entities.create",
    "datastore.entities.get",
    "datastore.entities.update",
];
/// The variable that turns the ledger on, in both relay modules.
const SWITCH: &str = "var.ledger_enabled";
/// A project id for the Google samples: `project_id` has no default, and the examples pass it
/// from variables without one.
const SAMPLE_PROJECT: &str = "relay-project";

/// The Lambda role's only DynamoDB grant is `dynamodb:UpdateItem` and `dynamodb:PutItem` on
/// the ledger table itself (not its indexes, not a pattern), granted exactly when the ledger is.
#[test]
fn lambda_ledger_grant_is_update_and_put_item_on_the_table() {
    let config = model::module("aws-relay");
    let statement = only_statement_on(&config, "this", "dynamodb:");
    let actions: BTreeSet<&str> = statement.actions.iter().map(String::as_str).collect();
    assert_eq!(
        actions,
        BTreeSet::from(RELAY_ACTIONS),
        "aws-relay: {} must grant exactly {RELAY_ACTIONS:?}",
        statement.sid
    );
    assert_eq!(statement.effect, "Allow");

    // dynamic "statement" { for_each = var.ledger_enabled ? [<the table's ARN>] : [] } with
    // resources = [statement.value]: granted with the ledger, on that one ARN.
    let gate = statement.gate.as_deref().unwrap_or_else(|| {
        panic!(
            "aws-relay: {} must be granted with the ledger",
            statement.sid
        )
    });
    let for_each: Expression = gate.parse().expect("for_each parses");
    let Expression::Conditional(c) = &for_each else {
        panic!(
            "aws-relay: {}: for_each must be {SWITCH} ? [arn] : [], not {gate}",
            statement.sid
        )
    };
    assert_eq!(
        c.cond_expr.to_string(),
        SWITCH,
        "aws-relay: {}",
        statement.sid
    );
    assert_eq!(
        c.false_expr.to_string(),
        "[]",
        "aws-relay: {}",
        statement.sid
    );
    let Expression::Array(arns) = &c.true_expr else {
        panic!(
            "aws-relay: {}: for_each must hold the table's ARN",
            statement.sid
        )
    };
    assert_eq!(arns.len(), 1, "aws-relay: {}: one resource", statement.sid);
    assert!(
        is_table_arn(&config, &arns[0]),
        "aws-relay: {} must be on the ledger table's ARN, not {}",
        statement.sid,
        arns[0]
    );
    let resources = match statement.resources {
        Some(Expression::Array(items)) => items.iter().map(ToString::to_string).collect(),
        _ => Vec::new(),
    };
    assert_eq!(
        resources,
        ["statement.value"],
        "aws-relay: {}",
        statement.sid
    );
}

/// The ledger table is the one of the design: on demand, partition key `bundle_uuid` (S), sort
/// key `ledger_key` (S), no index (an index would be written with every claim and settlement:
/// four write units a notification where the design pays two), TTL on `expires_at`, encrypted,
/// point-in-time recovery as a variable; created with the ledger. The reader policy for
/// `relay trace` reads and queries that table.
#[test]
fn ledger_table_has_the_keys_and_ttl_of_the_design_and_no_index() {
    let config = model::module("aws-relay");
    let gated = format!("{SWITCH} ? 1 : 0");
    let body = resource_with(
        &config,
        "aws_dynamodb_table",
        "ledger",
        &[("count", &gated)],
    );
    assert_texts(
        body,
        &[
            ("billing_mode", "PAY_PER_REQUEST"),
            ("hash_key", HASH_KEY),
            ("range_key", RANGE_KEY),
        ],
    );

    let attributes: BTreeSet<(String, String)> = nested(body, "attribute")
        .map(|a| {
            let field = |k| text(a.body(), k).unwrap_or_default();
            (field("name"), field("type"))
        })
        .collect();
    let expected: BTreeSet<(String, String)> = [HASH_KEY, RANGE_KEY]
        .iter()
        .map(|n| ((*n).to_owned(), "S".to_owned()))
        .collect();
    assert_eq!(
        attributes, expected,
        "aws-relay: key attributes of the table"
    );

    assert!(
        nested(body, "global_secondary_index").next().is_none(),
        "aws-relay: no global secondary index"
    );
    assert!(
        nested(body, "local_secondary_index").next().is_none(),
        "aws-relay: no local secondary index"
    );

    let ttl = only_block(body, "ttl", "aws-relay: the table");
    assert_texts(ttl, &[("attribute_name", EXPIRY_FIELD)]);
    assert_sources(ttl, &[("enabled", "true")]);

    let sse = only_block(body, "server_side_encryption", "aws-relay: the table");
    assert_sources(
        sse,
        &[("enabled", "true"), ("kms_key_arn", "var.kms_key_arn")],
    );
    let pitr = only_block(body, "point_in_time_recovery", "aws-relay: the table");
    assert_sources(pitr, &[("enabled", "var.ledger_point_in_time_recovery")]);

    // `relay trace`: GetItem and Query on the table, nothing else on DynamoDB.
    let readers = policy_statements(&config, "ledger_readers");
    let mut granted = BTreeSet::new();
    for statement in &readers {
        let resources = statement.resources.expect("resources");
        let Expression::Array(items) = resources else {
            panic!(
                "aws-relay: ledger_readers {}: resources must be a list",
                statement.sid
            )
        };
        for action in statement
            .actions
            .iter()
            .filter(|a| a.starts_with("dynamodb:"))
        {
            assert_eq!(
                items.len(),
                1,
                "aws-relay: ledger_readers {}",
                statement.sid
            );
            let on = match action.as_str() {
                "dynamodb:GetItem" | "dynamodb:Query" => is_table_arn(&config, &items[0]),
                other => panic!("aws-relay: relay trace calls no {other}"),
            };
            assert!(
                on,
                "aws-relay: {action} is on {}, not where relay trace calls it",
                items[0]
            );
            granted.insert(action.as_str());
        }
    }
    assert_eq!(
        granted,
        BTreeSet::from(["dynamodb:GetItem", "dynamodb:Query"]),
        "aws-relay: what relay trace calls"
    );
    assert_eq!(
        output_source(&config, "ledger_reader_policy_json"),
        "one(data.aws_iam_policy_document.ledger_readers[*].json)"
    );
}

/// Both relays get `RELAY_LEDGER_URL` exactly when the ledger is on, in the scheme of their
/// store, naming what the module creates: `dynamodb://<the table's name>` on Lambda,
/// `firestore://<project>/<database>/<the TTL policy's collection>` on Cloud Run; and
/// `RELAY_LEDGER_RETENTION_SECS` with it (8 days by default). The `ledger_url` outputs carry
/// the same value, for `relay trace`.
#[test]
fn ledger_url_names_the_ledger_on_both_clouds() {
    let examples = model::examples();

    let aws = model::module("aws-relay");
    let scope = Scope::module(&aws, &examples);
    let env = lambda_environment(&aws);
    let urls = ledger_env(&aws, &env, &scope);
    crate::assert_relay_core_accepts(&aws.name, "RELAY_LEDGER_URL", &urls);
    let table = aws.resource_attr("aws_dynamodb_table", "ledger", "name");
    let tables = scope.evaluated(table, "aws-relay: the table's name");
    let named: BTreeSet<String> = urls
        .iter()
        .map(|url| {
            let table = url.strip_prefix("dynamodb://").unwrap_or_else(|| {
                panic!("aws-relay: RELAY_LEDGER_URL={url:?} is not dynamodb://TABLE")
            });
            assert!(
                !table.is_empty() && !table.contains('/'),
                "aws-relay: {url:?}"
            );
            table.to_owned()
        })
        .collect();
    assert_eq!(
        named, tables,
        "aws-relay: RELAY_LEDGER_URL names the ledger table"
    );

    let gcp = model::module("gcp-relay");
    let scope = Scope::module(&gcp, &examples)
        .with_sample("project_id", Value::String(SAMPLE_PROJECT.to_owned()));
    let env = cloud_run_environment(&gcp);
    let urls = ledger_env(&gcp, &env, &scope);
    crate::assert_relay_core_accepts(&gcp.name, "RELAY_LEDGER_URL", &urls);
    let field = gcp
        .resource("google_firestore_field", "ledger_expires_at")
        .body();
    let sampled = |key: &str| scope.texts(attr(field, key).expect(key));
    let (databases, collections) = (sampled("database"), sampled("collection"));
    let created = scope.texts(gcp.resource_attr("google_firestore_database", "ledger", "name"));
    assert!(
        !databases.is_empty() && !collections.is_empty() && created.is_subset(&databases),
        "gcp-relay: cannot evaluate the TTL policy's database {databases:?} (created: {created:?}) and collection {collections:?}"
    );
    for url in &urls {
        let path = url.strip_prefix("firestore://").unwrap_or_else(|| {
            panic!(
                "gcp-relay: RELAY_LEDGER_URL={url:?} is not firestore://PROJECT/DATABASE/COLLECTION"
            )
        });
        let parts: Vec<&str> = path.split('/').collect();
        let [project, database, collection] = parts[..] else {
            panic!("gcp-relay: RELAY_LEDGER_URL={url:?} has not three segments")
        };
        assert_eq!(
            project, SAMPLE_PROJECT,
            "gcp-relay: {url:?} names project_id"
        );
        assert!(
            databases.contains(database) && collections.contains(collection),
            "gcp-relay: {url:?} names another database or collection than the TTL policy's ({databases:?}, {collections:?})"
        );
    }

    for config in [&aws, &gcp] {
        assert_eq!(
            output_source(config, "ledger_url"),
            "local.ledger_url",
            "{}: the ledger_url output",
            config.name
        );
    }
}

/// Firestore's TTL policy is on the documents' `expires_at`, in the ledger's collection and
/// database, with no offset (the relay writes the expiry time itself), and exists with the
/// ledger. The field's automatic indexes are off: nothing queries it.
#[test]
fn firestore_ttl_policy_is_on_expires_at() {
    let config = model::module("gcp-relay");
    let gated = format!("{SWITCH} ? 1 : 0");
    let expected = [
        ("count", gated.as_str()),
        ("collection", "var.ledger_collection"),
        ("project", "var.project_id"),
    ];
    let body = resource_with(
        &config,
        "google_firestore_field",
        "ledger_expires_at",
        &expected,
    );
    assert_texts(body, &[("field", EXPIRY_FIELD)]);
    let ttl = only_block(body, "ttl_config", "gcp-relay: the field");
    assert!(
        attr(ttl, "expiration_offset").is_none(),
        "gcp-relay: the relay sets expires_at to the expiry itself; no offset"
    );
    let index = only_block(body, "index_config", "gcp-relay: the field");
    assert!(
        index.blocks().next().is_none(),
        "gcp-relay: no index on {EXPIRY_FIELD}"
    );
    // The TTL policy of no other field: a second one would delete records early.
    let ttl_fields = config
        .resources("google_firestore_field")
        .into_iter()
        .filter(|(_, b)| nested(b.body(), "ttl_config").next().is_some())
        .count();
    assert_eq!(ttl_fields, 1, "gcp-relay: one TTL policy");
}

/// The Cloud Run service account's one project-level grant is the module's custom role, holding
/// exactly the Firestore permissions the relay's ledger calls (`documents:batchGet`: get;
/// `documents:commit` with `exists: false`: create, with `updateTime`: update; no list, delete
/// or transaction, which `roles/datastore.user` would add), with an IAM condition that limits it
/// to the ledger's database (exactly its name, or names below it), made with the ledger; no
/// other grant is on the project.
#[test]
fn gcp_ledger_grant_is_limited_to_the_ledger_database() {
    let config = model::module("gcp-relay");
    let grants = config.resources("google_project_iam_member");
    assert_eq!(
        grants.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        ["relay_ledger"],
        "gcp-relay: the only project-level grant is the ledger's"
    );
    let body = grants[0].1.body();
    assert_sources(
        body,
        &[
            ("count", &format!("{SWITCH} ? 1 : 0")),
            ("role", "google_project_iam_custom_role.ledger[0].name"),
        ],
    );
    let role = resource_with(
        &config,
        "google_project_iam_custom_role",
        "ledger",
        &[
            ("count", &format!("{SWITCH} ? 1 : 0")),
            ("project", "var.project_id"),
        ],
    );
    assert_eq!(
        attr(role, "permissions").and_then(crate::model::literal_strings),
        Some(LEDGER_PERMISSIONS.map(str::to_owned).to_vec()),
        "gcp-relay: the ledger role holds what the relay's Firestore calls need, and nothing else"
    );
    assert!(
        source(role, "role_id")
            .unwrap_or_default()
            .contains("replace(var.name, \"-\", \"_\")"),
        "gcp-relay: a role id takes no hyphens, which the relay's name may hold"
    );
    assert_sources(
        body,
        &[(
            "member",
            "\"serviceAccount:${google_service_account.this.email}\"",
        )],
    );
    let condition = only_block(body, "condition", "gcp-relay: the ledger grant");
    assert_sources(
        condition,
        &[("expression", "local.ledger_database_condition")],
    );

    let examples = model::examples();
    let scope = Scope::module(&config, &examples)
        .with_sample("project_id", Value::String(SAMPLE_PROJECT.to_owned()));
    let databases = scope.texts(config.resource_attr(
        "google_firestore_field",
        "ledger_expires_at",
        "database",
    ));
    let in_database = |database: &str| {
        let name = format!("projects/{SAMPLE_PROJECT}/databases/{database}");
        format!("resource.name == \"{name}\" || resource.name.startsWith(\"{name}/\")")
    };
    let condition = config.locals()["ledger_database_condition"];
    let grant = "gcp-relay: the ledger grant";
    assert_condition_on(&scope, condition, &databases, in_database, grant);
}

/// Every example runs its relay with the ledger: the module's default is on and no example
/// turns it off, and each example's README says how `relay trace` reads it.
#[test]
fn examples_turn_the_ledger_on() {
    for name in ["aws-relay", "gcp-relay"] {
        let module = model::module(name);
        let default = attr(module.variables()["ledger_enabled"].body(), "default");
        assert_eq!(
            default.map(ToString::to_string).as_deref(),
            Some("true"),
            "{name}: ledger_enabled defaults to true"
        );
    }
    for example in model::examples() {
        for (call, target, block) in example.module_calls() {
            if !["aws-relay", "gcp-relay"].contains(&target.as_str()) {
                continue;
            }
            let value = attr(block.body(), "ledger_enabled").map(ToString::to_string);
            assert!(
                value.is_none() || value.as_deref() == Some("true"),
                "{}: module {call} must keep the ledger on, not ledger_enabled = {value:?}",
                example.name
            );
        }
        example.read_mentioning("README.md", &["relay trace", "RELAY_LEDGER_URL"]);
    }
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Helpers
////////////////////////////////////////////////////////////////////////////////////////////////

/// The samples of `RELAY_LEDGER_URL`, after checking that it and `RELAY_LEDGER_RETENTION_SECS`
/// are plain values set exactly when the ledger is on.
fn ledger_env(config: &Config, env: &[EnvVar<'_>], scope: &Scope<'_>) -> BTreeSet<String> {
    let mut urls = BTreeSet::new();
    for (name, expected) in [
        ("RELAY_LEDGER_URL", None),
        ("RELAY_LEDGER_RETENTION_SECS", Some("691200")),
    ] {
        let expr = plain_when(env, &config.name, name, SWITCH);
        let samples = scope.evaluated(expr, &format!("{}: {name}", config.name));
        match expected {
            Some(default) => assert!(
                samples.contains(default),
                "{}: {name} defaults to {default}, got {samples:?}",
                config.name
            ),
            None => urls = samples,
        }
    }
    urls
}

/// Whether `expr` is the ARN of `aws_dynamodb_table.ledger`, directly or through a local.
fn is_table_arn(config: &Config, expr: &Expression) -> bool {
    let resolved = resolve(config, expr).to_string();
    [
        "aws_dynamodb_table.ledger[0].arn",
        "one(aws_dynamodb_table.ledger[*].arn)",
    ]
    .contains(&resolved.as_str())
}

/// `local.x` → the expression of local x (repeatedly); anything else as it is.
fn resolve<'a>(config: &'a Config, expr: &'a Expression) -> &'a Expression {
    let mut current = expr;
    for _ in 0..8 {
        match model::root_attribute(current, "local") {
            Some(name) if current.to_string() == format!("local.{name}") => {
                match config.locals().get(name.as_str()).copied() {
                    Some(next) => current = next,
                    None => break,
                }
            }
            _ => break,
        }
    }
    current
}

/// An attribute as written.
fn source(body: &Body, key: &str) -> Option<String> {
    attr(body, key).map(ToString::to_string)
}
