//! What the relay modules hand the relay and its platform: the environment of the Lambda
//! function and of the Cloud Run container, and the statements of the Lambda's role policy.

use hcl::{Block, Expression};

use crate::model::{
    Config, attr, label, literal_string, literal_strings, nested, object_key, root_attribute,
};
use crate::policy::source;

/// How one environment variable gets its value.
#[derive(Debug)]
pub(crate) enum EnvValue<'a> {
    /// A plain value: the expression Terraform evaluates.
    Plain(&'a Expression),
    /// From Secret Manager (`value_source { secret_key_ref { secret, version } }`).
    SecretRef {
        secret: &'a Expression,
        version: Option<&'a Expression>,
    },
}

/// One environment variable a module sets.
#[derive(Debug)]
pub(crate) struct EnvVar<'a> {
    pub(crate) name: String,
    pub(crate) value: EnvValue<'a>,
    /// The condition under which it is set (source text), when it is set conditionally.
    pub(crate) gate: Option<String>,
}

/// The variable `name` in the environment `module` sets; panics when it sets none.
pub(crate) fn set_by<'e, 'a>(env: &'e [EnvVar<'a>], module: &str, name: &str) -> &'e EnvVar<'a> {
    env.iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("{module} sets {name}"))
}

/// The expression of the variable `name` that `module` sets exactly when `gate` holds; panics
/// when it sets none, sets it under another condition, or from a secret.
pub(crate) fn plain_when<'a>(
    env: &[EnvVar<'a>],
    module: &str,
    name: &str,
    gate: &str,
) -> &'a Expression {
    let var = set_by(env, module, name);
    assert_eq!(
        var.gate.as_deref(),
        Some(gate),
        "{module}: when {name} is set"
    );
    match var.value {
        EnvValue::Plain(expr) => expr,
        EnvValue::SecretRef { .. } => panic!("{module}: {name} is a plain value"),
    }
}

/// The environment of `aws_lambda_function.this` (`environment { variables = … }`): an object,
/// possibly assembled with `merge()` from conditional objects (`cond ? { … } : {}`) and locals.
pub(crate) fn lambda_environment(config: &Config) -> Vec<EnvVar<'_>> {
    let function = config.resource("aws_lambda_function", "this");
    let environment = nested(function.body(), "environment")
        .next()
        .expect("an environment block");
    let variables = attr(environment.body(), "variables").expect("environment.variables");
    let mut out = Vec::new();
    object_entries(config, variables, None, &mut out);
    out
}

fn object_entries<'a>(
    config: &'a Config,
    expr: &'a Expression,
    gate: Option<String>,
    out: &mut Vec<EnvVar<'a>>,
) {
    match expr {
        Expression::Object(object) => {
            for (key, value) in object.iter() {
                out.push(EnvVar {
                    name: object_key(key),
                    value: EnvValue::Plain(value),
                    gate: gate.clone(),
                });
            }
        }
        Expression::FuncCall(call) if call.name.name.as_str() == "merge" => {
            for arg in &call.args {
                object_entries(config, arg, gate.clone(), out);
            }
        }
        Expression::Conditional(c) => {
            let cond = c.cond_expr.to_string();
            object_entries(config, &c.true_expr, Some(cond.clone()), out);
            object_entries(config, &c.false_expr, Some(format!("!({cond})")), out);
        }
        Expression::Parenthesis(inner) => object_entries(config, inner, gate, out),
        // extra_environment: the operator's own RELAY_* settings, known only at plan (the
        // module refuses its own names there, and secrets by validation).
        _ if root_attribute(expr, "var").is_some() => {}
        _ => match root_attribute(expr, "local") {
            Some(name) => {
                let locals = config.locals();
                let local = locals
                    .get(name.as_str())
                    .unwrap_or_else(|| panic!("{}: no local.{name}", config.name));
                object_entries(config, local, gate, out);
            }
            None => panic!(
                "{}: cannot read environment entries from `{expr}`",
                config.name
            ),
        },
    }
}

/// The environment of every container of `google_cloud_run_v2_service.this`.
pub(crate) fn cloud_run_environment(config: &Config) -> Vec<EnvVar<'_>> {
    let service = config.resource("google_cloud_run_v2_service", "this");
    let mut out = Vec::new();
    for template in nested(service.body(), "template") {
        for container in nested(template.body(), "containers") {
            for env in nested(container.body(), "env") {
                let name = attr(env.body(), "name")
                    .and_then(literal_string)
                    .expect("env.name is a literal");
                let value = match (
                    attr(env.body(), "value"),
                    nested(env.body(), "value_source").next(),
                ) {
                    (Some(value), None) => EnvValue::Plain(value),
                    (None, Some(source)) => {
                        let key_ref = nested(source.body(), "secret_key_ref")
                            .next()
                            .expect("secret_key_ref");
                        EnvValue::SecretRef {
                            secret: attr(key_ref.body(), "secret").expect("secret_key_ref.secret"),
                            version: attr(key_ref.body(), "version"),
                        }
                    }
                    _ => panic!(
                        "{}: env {name} needs exactly one of value and value_source",
                        config.name
                    ),
                };
                out.push(EnvVar {
                    name,
                    value,
                    gate: None,
                });
            }
            // dynamic "env" { for_each = cond ? { NAME = value, … } : {}  content { name =
            // env.key, value = env.value } }: variables set only when cond holds.
            for dynamic in nested(container.body(), "dynamic").filter(|d| label(d, 0) == "env") {
                // The operator's own variables (source_secret_ids: a source's secret, in the
                // variable its secret_env names), known only at plan, never RELAY_* (their
                // validation refuses those); config::gcp_source_secrets_reach_the_container_as_
                // secret_variables holds them.
                let for_each = attr(dynamic.body(), "for_each").expect("dynamic env for_each");
                if root_attribute(for_each, "var").is_some() {
                    continue;
                }
                let content = nested(dynamic.body(), "content")
                    .next()
                    .expect("dynamic env content");
                // The value is env.value, or a secret whose version is env.value.
                let secret = nested(content.body(), "value_source").next().map(|from| {
                    let key_ref = nested(from.body(), "secret_key_ref")
                        .next()
                        .expect("secret_key_ref");
                    assert_eq!(
                        source(key_ref.body(), "version").as_deref(),
                        Some("env.value"),
                        "{}: a dynamic secret env's version is env.value",
                        config.name
                    );
                    attr(key_ref.body(), "secret").expect("secret_key_ref.secret")
                });
                let value = attr(content.body(), "value").map(ToString::to_string);
                assert_eq!(
                    (secret.is_some(), value.as_deref()),
                    match secret {
                        Some(_) => (true, None),
                        None => (false, Some("env.value")),
                    },
                    "{}: a dynamic env sets value = env.value or value_source",
                    config.name
                );
                assert_eq!(
                    source(content.body(), "name").as_deref(),
                    Some("env.key"),
                    "{}: a dynamic env sets name = env.key",
                    config.name
                );
                if secret.is_none() {
                    // Plain values: an object, possibly a local built with merge() of
                    // conditional objects, as the Lambda's.
                    object_entries(config, for_each, None, &mut out);
                    continue;
                }
                let (gate, object) = match for_each {
                    Expression::Conditional(c) => (Some(c.cond_expr.to_string()), &c.true_expr),
                    other => (None, other),
                };
                let Expression::Object(object) = object else {
                    panic!(
                        "{}: a dynamic env's for_each is an object, or cond ? object : {{}}",
                        config.name
                    );
                };
                for (key, value) in object.iter() {
                    out.push(EnvVar {
                        name: object_key(key),
                        value: match secret {
                            Some(secret) => EnvValue::SecretRef {
                                secret,
                                version: Some(value),
                            },
                            None => EnvValue::Plain(value),
                        },
                        gate: gate.clone(),
                    });
                }
            }
        }
    }
    out
}

/// One statement of an IAM policy document.
#[derive(Debug)]
pub(crate) struct Statement<'a> {
    pub(crate) sid: String,
    pub(crate) effect: String,
    pub(crate) actions: Vec<String>,
    pub(crate) resources: Option<&'a Expression>,
    /// The `for_each` of a `dynamic "statement"` block (source text): when it is granted.
    pub(crate) gate: Option<String>,
}

/// The statements of `data "aws_iam_policy_document" "<name>"`, dynamic ones included.
pub(crate) fn policy_statements<'a>(config: &'a Config, name: &str) -> Vec<Statement<'a>> {
    let document = config.data("aws_iam_policy_document", name);
    let mut out: Vec<Statement<'a>> = nested(document.body(), "statement")
        .map(|s| statement(config, s, None))
        .collect();
    for dynamic in nested(document.body(), "dynamic").filter(|d| label(d, 0) == "statement") {
        let gate = attr(dynamic.body(), "for_each").map(ToString::to_string);
        let content = nested(dynamic.body(), "content")
            .next()
            .expect("dynamic statement content");
        out.push(statement(config, content, gate));
    }
    out
}

/// The one statement of policy document `name` that grants actions of `service` (`"sqs:"`).
#[track_caller]
pub(crate) fn only_statement_on<'a>(
    config: &'a Config,
    name: &str,
    service: &str,
) -> Statement<'a> {
    let mut found: Vec<Statement<'a>> = policy_statements(config, name)
        .into_iter()
        .filter(|s| s.actions.iter().any(|a| a.starts_with(service)))
        .collect();
    let sids: Vec<&str> = found.iter().map(|s| s.sid.as_str()).collect();
    assert_eq!(
        sids.len(),
        1,
        "{}: one statement of {name} grants {service} actions, got {sids:?}",
        config.name
    );
    found.remove(0)
}

fn statement<'a>(config: &Config, block: &'a Block, gate: Option<String>) -> Statement<'a> {
    let body = block.body();
    let sid = attr(body, "sid")
        .and_then(literal_string)
        .unwrap_or_default();
    let actions = attr(body, "actions")
        .and_then(literal_strings)
        .unwrap_or_else(|| {
            panic!(
                "{}: statement {sid:?} must list its actions as literals",
                config.name
            )
        });
    Statement {
        effect: attr(body, "effect")
            .and_then(literal_string)
            .unwrap_or_else(|| "Allow".to_owned()),
        actions,
        resources: attr(body, "resources"),
        gate,
        sid,
    }
}

/// The policy documents attached to `aws_iam_role.<role>` through `aws_iam_role_policy`
/// (`policy = data.aws_iam_policy_document.<name>.json`), by document name.
pub(crate) fn role_policy_documents(config: &Config) -> Vec<String> {
    config
        .resources("aws_iam_role_policy")
        .into_iter()
        // Firehose's own role, which delivers the archive's objects: archive.rs holds it.
        .filter(|(_, block)| {
            attr(block.body(), "role")
                .is_none_or(|role| !role.to_string().contains("aws_iam_role.archive_delivery"))
        })
        .map(|(name, block)| {
            let policy = attr(block.body(), "policy").expect("aws_iam_role_policy.policy");
            let Expression::Traversal(t) = policy else {
                panic!(
                    "{}: aws_iam_role_policy.{name} must use a data.aws_iam_policy_document",
                    config.name
                )
            };
            let path: Vec<String> = t
                .operators
                .iter()
                .filter_map(|op| match op {
                    hcl::expr::TraversalOperator::GetAttr(a) => Some(a.to_string()),
                    _ => None,
                })
                .collect();
            match path.as_slice() {
                [ty, doc, json] if ty == "aws_iam_policy_document" && json == "json" => doc.clone(),
                _ => panic!(
                    "{}: aws_iam_role_policy.{name} must use a data.aws_iam_policy_document",
                    config.name
                ),
            }
        })
        .collect()
}
