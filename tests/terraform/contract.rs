//! What `terraform validate` and a first `apply` would catch, checked offline:
//!
//! - every argument and nested block of an `aws_*` or `google_*` resource, data source or
//!   ephemeral resource exists in that provider's schema (`schemas/`, made by
//!   `infra/local/tf-schemas.sh`: the AWS one from the provider binary 5.100.0, the Google one
//!   from the provider's documentation of a 7.x release);
//! - the Lambda runtime is one on which Lambda runs a `bootstrap` executable;
//! - a public Function URL has both resource-policy statements Lambda requires;
//! - every GCP example enables, in the relay's project, the API of every resource created there.
//!
//! What they cannot check: values the provider validates only at plan time (an enum such as a
//! Cloud Run ingress, a region), arguments whose schema changed after the schema files were
//! made, and anything only the cloud knows (quotas, organisation policies). Other providers
//! (random, the built-in `terraform_data`) are not checked.
//!
//! Each check returns its problems. `every_mutation_is_caught` breaks the configurations in
//! the ways that slipped past earlier tests and expects a problem from each.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::OnceLock;

use hcl::Body;
use serde_json::Value;

use crate::model::{self, Config, attr, label, literal_string, literal_strings, nested};

/// Arguments the modules use that came after the AWS schema file's provider (5.100.0), with
/// the provider release that added them; the modules require >= 6.29.
const NEWER_AWS_ARGUMENTS: [(&str, &str, &str); 1] = [(
    "aws_lambda_permission",
    "invoked_via_function_url",
    "6.29.0, for Lambda's October 2025 Function URL permission change",
)];

/// Runtimes on which Lambda starts the package's `bootstrap` (the OS-only runtimes).
const BOOTSTRAP_RUNTIMES: [&str; 2] = ["provided.al2023", "provided.al2"];

/// The API each kind of Google resource needs enabled in its project, by type prefix (the
/// first that matches: a project's custom roles are IAM's, its grants Resource Manager's).
const API_OF_TYPE: [(&str, &str); 12] = [
    (
        "google_artifact_registry_",
        "artifactregistry.googleapis.com",
    ),
    ("google_cloud_run_v2_", "run.googleapis.com"),
    ("google_firestore_", "firestore.googleapis.com"),
    ("google_logging_", "logging.googleapis.com"),
    ("google_monitoring_", "monitoring.googleapis.com"),
    ("google_project_iam_custom_role", "iam.googleapis.com"),
    ("google_project_iam_", "cloudresourcemanager.googleapis.com"),
    ("google_pubsub_", "pubsub.googleapis.com"),
    ("google_secret_manager_", "secretmanager.googleapis.com"),
    ("google_service_account", "iam.googleapis.com"),
    ("google_storage_", "storage.googleapis.com"),
    ("google_project", "cloudresourcemanager.googleapis.com"),
];

/// APIs a module needs beyond its resources' own: the relay publishes with its service
/// account, and Pub/Sub charges (and refuses, when the API is off) in that account's project,
/// wherever the topic is; the image module runs `gcloud builds submit`.
const API_OF_MODULE: [(&str, &str); 2] = [
    ("gcp-relay", "pubsub.googleapis.com"),
    ("gcp-relay-image", "cloudbuild.googleapis.com"),
];

/// Every problem the contract checks find in `config`.
pub(crate) fn problems(config: &Config) -> Vec<String> {
    let mut problems = argument_problems(config);
    problems.extend(runtime_problems(config));
    problems.extend(function_url_problems(config));
    if config.name.starts_with("examples/") {
        problems.extend(api_problems(config));
    }
    problems
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Provider schemas
////////////////////////////////////////////////////////////////////////////////////////////////

/// The schema file of `provider` (`aws`, `google`).
fn schema(provider: &str) -> &'static Value {
    static AWS: OnceLock<Value> = OnceLock::new();
    static GOOGLE: OnceLock<Value> = OnceLock::new();
    let cell = match provider {
        "aws" => &AWS,
        "google" => &GOOGLE,
        other => panic!("no schema file for the {other} provider"),
    };
    cell.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("terraform/schemas")
            .join(format!("{provider}.json"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    })
}

/// Arguments and nested blocks that are not in their provider's schema.
fn argument_problems(config: &Config) -> Vec<String> {
    let mut problems = Vec::new();
    for kind in ["resource", "data", "ephemeral"] {
        for block in config.blocks(kind) {
            let ty = label(block, 0);
            let provider = ty.split('_').next().unwrap_or_default();
            if !matches!(provider, "aws" | "google") {
                continue;
            }
            let here = format!("{}: {kind} {ty}.{}", config.name, label(block, 1));
            match schema(provider)[kind].get(ty) {
                Some(block_schema) => {
                    check_body(block.body(), block_schema, ty, &here, &mut problems)
                }
                None => problems.push(format!(
                    "{here}: {ty} is not in schemas/{provider}.json (run infra/local/tf-schemas.sh)"
                )),
            }
        }
    }
    problems
}

fn check_body(body: &Body, schema: &Value, ty: &str, here: &str, problems: &mut Vec<String>) {
    const META_ARGUMENTS: [&str; 4] = ["count", "for_each", "depends_on", "provider"];
    const META_BLOCKS: [&str; 3] = ["lifecycle", "provisioner", "connection"];
    let listed = |key: &str, name: &str| {
        schema[key]
            .as_array()
            .is_some_and(|names| names.iter().any(|n| n == name))
    };
    for attribute in body.attributes() {
        let name = attribute.key();
        let newer = NEWER_AWS_ARGUMENTS
            .iter()
            .any(|(t, argument, _)| *t == ty && *argument == name);
        if META_ARGUMENTS.contains(&name) || listed("arguments", name) || newer {
            continue;
        }
        problems.push(if listed("computed", name) {
            format!("{here}: {name} is read-only, not an argument")
        } else {
            format!("{here}: no argument {name}")
        });
    }
    for block in body.blocks() {
        let (name, inner) = match block.identifier() {
            ident if META_BLOCKS.contains(&ident) => continue,
            // dynamic "x" { content { … } } writes x blocks.
            "dynamic" => match nested(block.body(), "content").next() {
                Some(content) => (label(block, 0), content.body()),
                None => {
                    problems.push(format!(
                        "{here}: dynamic {} without content",
                        label(block, 0)
                    ));
                    continue;
                }
            },
            ident => (ident, block.body()),
        };
        match schema["blocks"].get(name) {
            Some(inner_schema) => {
                check_body(inner, inner_schema, ty, &format!("{here}.{name}"), problems)
            }
            None => problems.push(format!("{here}: no block {name}")),
        }
    }
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Lambda
////////////////////////////////////////////////////////////////////////////////////////////////

/// A Lambda function whose runtime would not start the package's `bootstrap`.
fn runtime_problems(config: &Config) -> Vec<String> {
    config
        .resources("aws_lambda_function")
        .into_iter()
        .filter_map(|(name, function)| {
            let runtime = attr(function.body(), "runtime").and_then(literal_string);
            match runtime.as_deref() {
                Some(r) if BOOTSTRAP_RUNTIMES.contains(&r) => None,
                _ => Some(format!(
                    "{}: aws_lambda_function.{name}: runtime {runtime:?} is none of {BOOTSTRAP_RUNTIMES:?}, the runtimes that start bootstrap",
                    config.name
                )),
            }
        })
        .collect()
}

/// A public Function URL (authorization NONE) without the two statements Lambda requires since
/// October 2025: `lambda:InvokeFunctionUrl` for auth type NONE, and `lambda:InvokeFunction`
/// limited to calls through a Function URL.
fn function_url_problems(config: &Config) -> Vec<String> {
    let mut problems = Vec::new();
    let permissions = config.resources("aws_lambda_permission");
    for (url, block) in config.resources("aws_lambda_function_url") {
        if attr(block.body(), "authorization_type")
            .and_then(literal_string)
            .as_deref()
            != Some("NONE")
        {
            continue;
        }
        let function = attr(block.body(), "function_name").map(ToString::to_string);
        let statement = |action: &str, condition: (&str, &str)| {
            permissions.iter().any(|(_, p)| {
                let body = p.body();
                let text = |key| attr(body, key).map(ToString::to_string);
                text("action").as_deref() == Some(&format!("{action:?}"))
                    && text("principal").as_deref() == Some("\"*\"")
                    && text("function_name") == function
                    && text(condition.0).as_deref() == Some(condition.1)
            })
        };
        for (action, condition) in [
            (
                "lambda:InvokeFunctionUrl",
                ("function_url_auth_type", "\"NONE\""),
            ),
            (
                "lambda:InvokeFunction",
                ("invoked_via_function_url", "true"),
            ),
        ] {
            if !statement(action, condition) {
                problems.push(format!(
                    "{}: the public aws_lambda_function_url.{url} needs an aws_lambda_permission allowing {action} to \"*\" on the same function with {} = {}",
                    config.name, condition.0, condition.1
                ));
            }
        }
    }
    problems
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Google APIs
////////////////////////////////////////////////////////////////////////////////////////////////

/// APIs that the resources in the relay's project need and the example does not enable there.
fn api_problems(example: &Config) -> Vec<String> {
    let calls = example.module_calls();
    let Some(project) = calls.iter().find_map(|(_, target, block)| {
        (target == "gcp-relay")
            .then(|| attr(block.body(), "project_id").map(ToString::to_string))?
    }) else {
        return Vec::new();
    };
    let in_project = |body: &Body, key: &str| {
        attr(body, key).map(ToString::to_string).as_deref() == Some(project.as_str())
    };

    let mut needed = BTreeSet::new();
    for (_, target, block) in &calls {
        if !in_project(block.body(), "project_id") {
            continue;
        }
        let module = model::module(target);
        needed.extend(
            google_types(&module)
                .into_iter()
                .map(|ty| api_of(&module.name, &ty)),
        );
        needed.extend(
            API_OF_MODULE
                .iter()
                .filter(|(name, _)| name == target)
                .map(|(_, api)| (*api).to_owned()),
        );
    }
    for kind in ["resource", "data"] {
        for block in example.blocks(kind) {
            let ty = label(block, 0);
            if ty.starts_with("google_") && ty != "google_project_service" {
                let key = if ty == "google_project" {
                    "project_id"
                } else {
                    "project"
                };
                if in_project(block.body(), key) {
                    needed.insert(api_of(&example.name, ty));
                }
            }
        }
    }

    let enabled: BTreeSet<String> = example
        .resources("google_project_service")
        .into_iter()
        .filter(|(_, block)| in_project(block.body(), "project"))
        .flat_map(|(_, block)| services(block.body()))
        .collect();
    needed
        .difference(&enabled)
        .map(|api| format!("{}: {api} is not enabled in {project}", example.name))
        .collect()
}

/// The `google_*` resource and data source types a module declares.
fn google_types(config: &Config) -> Vec<String> {
    ["resource", "data"]
        .iter()
        .flat_map(|kind| config.blocks(kind))
        .map(|block| label(block, 0).to_owned())
        .filter(|ty| ty.starts_with("google_"))
        .collect()
}

fn api_of(config: &str, ty: &str) -> String {
    API_OF_TYPE
        .iter()
        .find(|(prefix, _)| ty.starts_with(prefix))
        .map(|(_, api)| (*api).to_owned())
        .unwrap_or_else(|| panic!("{config}: which API does {ty} need? Add it to API_OF_TYPE"))
}

/// The services a `google_project_service` enables: `service`, or the `for_each` set that
/// `service = each.value` reads.
fn services(body: &Body) -> Vec<String> {
    let service = attr(body, "service").expect("google_project_service.service");
    if let Some(one) = literal_string(service) {
        return vec![one];
    }
    attr(body, "for_each")
        .and_then(|set| match set {
            hcl::Expression::FuncCall(call) if call.name.name.as_str() == "toset" => {
                call.args.first().and_then(literal_strings)
            }
            other => literal_strings(other),
        })
        .unwrap_or_default()
}

////////////////////////////////////////////////////////////////////////////////////////////////
// Tests
////////////////////////////////////////////////////////////////////////////////////////////////

fn configurations() -> Vec<Config> {
    let mut all = model::modules();
    all.extend(model::examples());
    all
}

#[test]
fn the_configurations_meet_the_contract() {
    let problems: Vec<String> = configurations().iter().flat_map(problems).collect();
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The schema files hold what the checks rely on: a check against an empty schema would pass
/// nothing, and one against a schema without nesting would miss the deep arguments.
#[test]
fn the_schema_files_describe_the_resources_in_depth() {
    let run = &schema("google")["resource"]["google_cloud_run_v2_service"];
    let env = &run["blocks"]["template"]["blocks"]["containers"]["blocks"]["env"];
    assert!(
        env["blocks"]["value_source"]["blocks"]["secret_key_ref"]["arguments"]
            .as_array()
            .is_some_and(|a| a.iter().any(|n| n == "version")),
        "{env}"
    );
    let function = &schema("aws")["resource"]["aws_lambda_function"];
    assert!(function["blocks"]["environment"]["arguments"][0] == "variables");
    for (ty, argument, _) in NEWER_AWS_ARGUMENTS {
        let listed = schema("aws")["resource"][ty]["arguments"]
            .as_array()
            .is_some_and(|a| a.iter().any(|n| n == argument));
        assert!(
            !listed,
            "{ty}.{argument} is in the AWS schema file now: drop it from NEWER_AWS_ARGUMENTS"
        );
    }
}

/// One way to break a configuration, and what must notice it.
struct Mutation {
    what: &'static str,
    dir: &'static str,
    file: &'static str,
    edit: fn(&str) -> Option<String>,
    expect: &'static str,
}

const MUTATIONS: [Mutation; 5] = [
    Mutation {
        what: "a misspelled provider argument",
        dir: "modules/aws-relay",
        file: "main.tf",
        edit: |text| replace(text, "  memory_size ", "  memory_sise "),
        expect: "no argument memory_sise",
    },
    Mutation {
        what: "a Cloud Run argument that does not exist",
        dir: "modules/gcp-relay",
        file: "main.tf",
        edit: |text| {
            replace(
                text,
                "max_instance_request_concurrency =",
                "container_concurrency =",
            )
        },
        expect: "no argument container_concurrency",
    },
    Mutation {
        what: "a bad runtime string",
        dir: "modules/aws-relay",
        file: "main.tf",
        edit: |text| replace(text, "\"provided.al2023\"", "\"provided.al2025\""),
        expect: "runtime Some(\"provided.al2025\")",
    },
    Mutation {
        what: "the lambda:InvokeFunction permission deleted",
        dir: "modules/aws-relay",
        file: "main.tf",
        edit: |text| {
            let start = text.find("resource \"aws_lambda_permission\" \"function_url_invoke\"")?;
            let end = start + text[start..].find("\n}\n")? + 3;
            Some(format!("{}{}", &text[..start], &text[end..]))
        },
        expect: "allowing lambda:InvokeFunction to",
    },
    Mutation {
        what: "the Pub/Sub API removed from the gcp-pubsub example",
        dir: "examples/gcp-pubsub",
        file: "main.tf",
        edit: |text| replace(text, "    \"pubsub.googleapis.com\",\n", ""),
        expect: "pubsub.googleapis.com is not enabled",
    },
];

/// `text` with the first `from` replaced by `to`; `None` when `from` is not there.
fn replace(text: &str, from: &str, to: &str) -> Option<String> {
    text.contains(from).then(|| text.replacen(from, to, 1))
}

#[test]
fn every_mutation_is_caught() {
    for mutation in &MUTATIONS {
        let dir = model::terraform_dir().join(mutation.dir);
        assert!(
            problems(&Config::load(&dir)).is_empty(),
            "{}: has problems unmutated",
            mutation.dir
        );
        let mutated = Config::load_edited(&dir, &|file, text| {
            if file != mutation.file {
                return text;
            }
            (mutation.edit)(&text).unwrap_or_else(|| {
                panic!(
                    "{}: the mutation \"{}\" no longer applies to {file}; update it",
                    mutation.dir, mutation.what
                )
            })
        });
        let found = problems(&mutated);
        assert!(
            found.iter().any(|p| p.contains(mutation.expect)),
            "{} in {} went unnoticed; problems: {found:#?}",
            mutation.what,
            mutation.dir
        );
    }
}
