//! Sample values of Terraform expressions, so that the tests can hand what a module would set to
//! relay-core's own configuration parser.
//!
//! Nothing here runs Terraform. An expression evaluates to every value it can take that the
//! configuration itself shows: literals; variable defaults and the values the examples pass to a
//! module; both branches of a conditional; and, for attributes that providers compute (a queue's
//! URL, a topic's ID), a sample in the format the provider documents. An expression that depends
//! on anything else evaluates to no sample at all.

use std::collections::{BTreeMap, BTreeSet};

use hcl::Expression;
use hcl::expr::TraversalOperator;
use hcl::template::{Element, Template};
use serde_json::{Map, Value};

use crate::model::{Config, attr, object_key};

/// Cartesian products (templates, objects) stop growing at this many samples.
const MAX_SAMPLES: usize = 64;

/// Where the names of an expression resolve: one configuration, and sample values for its input
/// variables.
#[derive(Debug)]
pub(crate) struct Scope<'a> {
    config: &'a Config,
    vars: BTreeMap<String, Vec<Value>>,
}

impl<'a> Scope<'a> {
    /// A root configuration (an example): its variables take their literal defaults.
    pub(crate) fn root(config: &'a Config) -> Scope<'a> {
        let mut scope = Scope {
            config,
            vars: BTreeMap::new(),
        };
        scope.vars = scope.defaults();
        scope
    }

    /// A module: its variables take their literal defaults and every value an example passes.
    pub(crate) fn module(config: &'a Config, examples: &[Config]) -> Scope<'a> {
        let mut scope = Scope {
            config,
            vars: BTreeMap::new(),
        };
        let mut vars = scope.defaults();
        for example in examples {
            let caller = Scope::root(example);
            for (_, target, call) in example.module_calls() {
                if target != config.base_name() {
                    continue;
                }
                for a in call.body().attributes() {
                    let samples = caller.samples(a.expr());
                    vars.entry(a.key().to_owned()).or_default().extend(samples);
                }
            }
        }
        for samples in vars.values_mut() {
            dedup(samples);
        }
        scope.vars = vars;
        scope
    }

    /// The same scope with `name` also taking `sample`: for an input that has no default and
    /// that the examples pass from a variable of their own without one (a project id).
    pub(crate) fn with_sample(mut self, name: &str, sample: Value) -> Scope<'a> {
        let samples = self.vars.entry(name.to_owned()).or_default();
        samples.push(sample);
        dedup(samples);
        self
    }

    fn defaults(&self) -> BTreeMap<String, Vec<Value>> {
        let empty = Scope {
            config: self.config,
            vars: BTreeMap::new(),
        };
        self.config
            .variables()
            .into_iter()
            .map(|(name, block)| {
                let samples = attr(block.body(), "default")
                    .map(|d| empty.samples(d))
                    .unwrap_or_default();
                (name.to_owned(), samples)
            })
            .collect()
    }

    /// Every text `expr` can take (as [`as_text`] writes it), as far as the configuration shows.
    pub(crate) fn texts(&self, expr: &Expression) -> BTreeSet<String> {
        self.samples(expr).iter().filter_map(as_text).collect()
    }

    /// [`texts`](Self::texts), asserting there is one: `what` names the expression in the
    /// failure (`aws-relay: the table's name`).
    #[track_caller]
    pub(crate) fn evaluated(&self, expr: &Expression, what: &str) -> BTreeSet<String> {
        let texts = self.texts(expr);
        assert!(!texts.is_empty(), "{what}: cannot be evaluated");
        texts
    }

    /// Every value `expr` can take, as far as the configuration shows.
    pub(crate) fn samples(&self, expr: &Expression) -> Vec<Value> {
        let mut out = match expr {
            Expression::Null => vec![Value::Null],
            Expression::Bool(b) => vec![Value::Bool(*b)],
            Expression::Number(n) => vec![number(n)],
            Expression::String(s) => vec![Value::String(s.clone())],
            Expression::Array(items) => product(items.iter().map(|i| self.samples(i)).collect())
                .into_iter()
                .map(Value::Array)
                .collect(),
            Expression::Object(object) => {
                let keys: Vec<String> = object.keys().map(|k| self.key(k)).collect();
                product(object.values().map(|v| self.samples(v)).collect())
                    .into_iter()
                    .map(|values| {
                        Value::Object(keys.iter().cloned().zip(values).collect::<Map<_, _>>())
                    })
                    .collect()
            }
            Expression::TemplateExpr(t) => self.template(t),
            Expression::Traversal(t) => self.traversal(&t.expr, &t.operators),
            Expression::FuncCall(call) => self.call(call.name.name.as_str(), &call.args),
            Expression::Parenthesis(inner) => self.samples(inner),
            Expression::Conditional(c) => {
                let mut both = self.samples(&c.true_expr);
                both.extend(self.samples(&c.false_expr));
                both
            }
            _ => Vec::new(),
        };
        dedup(&mut out);
        out
    }

    /// An object key: `name`, `"name"`, or `(expression)`, whose first sample names it.
    fn key(&self, key: &hcl::ObjectKey) -> String {
        match key {
            hcl::ObjectKey::Expression(e) => self
                .samples(e)
                .into_iter()
                .find_map(|v| as_text(&v))
                .unwrap_or_else(|| object_key(key)),
            _ => object_key(key),
        }
    }

    fn template(&self, t: &hcl::expr::TemplateExpr) -> Vec<Value> {
        let Ok(template) = Template::from_expr(t) else {
            return Vec::new();
        };
        let mut parts = Vec::new();
        for element in template.elements() {
            match element {
                Element::Literal(s) => parts.push(vec![Value::String(s.clone())]),
                Element::Interpolation(i) => parts.push(self.samples(&i.expr)),
                _ => return Vec::new(),
            }
        }
        product(parts)
            .into_iter()
            .filter_map(|values| values.iter().map(as_text).collect::<Option<String>>())
            .map(Value::String)
            .collect()
    }

    fn traversal(&self, root: &Expression, ops: &[TraversalOperator]) -> Vec<Value> {
        let Expression::Variable(v) = root else {
            return self
                .samples(root)
                .into_iter()
                .flat_map(|value| apply(value, ops))
                .collect();
        };
        let (first, rest) = match ops.split_first() {
            Some((TraversalOperator::GetAttr(name), rest)) => (name.as_str(), rest),
            _ => return Vec::new(),
        };
        let base = match v.as_str() {
            "var" => self.vars.get(first).cloned().unwrap_or_default(),
            "local" => self
                .config
                .locals()
                .get(first)
                .map(|e| self.samples(e))
                .unwrap_or_default(),
            "data" | "module" | "path" | "each" | "count" | "self" | "terraform" => Vec::new(),
            // An ephemeral resource: `ephemeral.<type>.<name>.<attribute>`.
            "ephemeral" => return resource_attribute(first, rest.get(1..).unwrap_or_default()),
            // A resource: `<type>.<name>[index].<attribute>`.
            resource_type => return resource_attribute(resource_type, rest),
        };
        base.into_iter()
            .flat_map(|value| apply(value, rest))
            .collect()
    }

    fn call(&self, name: &str, args: &[Expression]) -> Vec<Value> {
        match (name, args) {
            ("tostring", [arg]) => self
                .samples(arg)
                .iter()
                .filter_map(as_text)
                .map(Value::String)
                .collect(),
            ("jsonencode", [arg]) => self
                .samples(arg)
                .iter()
                .map(|v| Value::String(v.to_string()))
                .collect(),
            ("trimsuffix", [text, suffix]) => {
                let suffixes: Vec<String> =
                    self.samples(suffix).iter().filter_map(as_text).collect();
                self.samples(text)
                    .iter()
                    .filter_map(as_text)
                    .flat_map(|t| {
                        suffixes.iter().map(move |s| {
                            Value::String(t.strip_suffix(s.as_str()).unwrap_or(&t).to_owned())
                        })
                    })
                    .collect()
            }
            ("try" | "coalesce", _) => {
                let mut all: Vec<Value> = args.iter().flat_map(|a| self.samples(a)).collect();
                if name == "coalesce" {
                    all.retain(|v| !v.is_null());
                }
                all
            }
            _ => Vec::new(),
        }
    }
}

/// Attribute access and indexing on a sample; splats and unknown indexes give nothing.
fn apply(value: Value, ops: &[TraversalOperator]) -> Vec<Value> {
    let mut current = value;
    for op in ops {
        current = match (op, current) {
            (TraversalOperator::GetAttr(name), Value::Object(mut map)) => {
                match map.remove(name.as_str()) {
                    Some(v) => v,
                    None => return Vec::new(),
                }
            }
            (TraversalOperator::LegacyIndex(i), Value::Array(items)) => {
                match usize::try_from(*i)
                    .ok()
                    .and_then(|i| items.into_iter().nth(i))
                {
                    Some(v) => v,
                    None => return Vec::new(),
                }
            }
            _ => return Vec::new(),
        };
    }
    vec![current]
}

/// Samples of attributes that providers compute, in the formats their documentation gives.
fn computed_attribute(resource_type: &str, attribute: &str) -> Option<Value> {
    let sample = match (resource_type, attribute) {
        // aws_sqs_queue: `id` and `url` are the queue URL, `arn` its ARN.
        ("aws_sqs_queue", "url" | "id") => {
            "https://sqs.us-east-1.amazonaws.com/123456789012/dss-relay-events"
        }
        ("aws_sqs_queue", "arn") => "arn:aws:sqs:us-east-1:123456789012:dss-relay-events",
        ("aws_sns_topic", "arn" | "id") => "arn:aws:sns:us-east-1:123456789012:dss-relay-events",
        // Secrets Manager appends a hyphen and six random characters to the name.
        ("aws_secretsmanager_secret", "arn" | "id") => {
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:dss-relay-hmac-keys-20260101-a1B2c3"
        }
        ("aws_iam_role", "arn") => "arn:aws:iam::123456789012:role/dss-relay-relay",
        ("aws_lambda_function_url", "function_url") => {
            "https://abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws/"
        }
        // google_pubsub_topic: `id` is projects/{{project}}/topics/{{name}}.
        ("google_pubsub_topic", "id") => "projects/relay-project/topics/dss-events",
        ("google_pubsub_topic", "name") => "dss-events",
        ("google_cloud_run_v2_service", "uri") => "https://dss-relay-abcdefghij-ue.a.run.app",
        ("google_service_account", "email") => {
            "relay-dss-relay@relay-project.iam.gserviceaccount.com"
        }
        ("random_password", "result") => "sample0hmac0secret0with0forty0eight0characters00",
        _ => return None,
    };
    Some(Value::String(sample.to_owned()))
}

/// The text Terraform converts a primitive to: strings as they are, numbers and booleans
/// written out. Objects, lists and null have none.
pub(crate) fn as_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn number(n: &hcl::Number) -> Value {
    if let Some(i) = n.as_i64() {
        Value::from(i)
    } else {
        n.as_f64().map(Value::from).unwrap_or(Value::Null)
    }
}

/// Every combination of one sample per part, at most [`MAX_SAMPLES`].
fn product(parts: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    let mut combos: Vec<Vec<Value>> = vec![Vec::new()];
    for part in parts {
        let mut next = Vec::new();
        for combo in &combos {
            for value in &part {
                if next.len() == MAX_SAMPLES {
                    break;
                }
                let mut extended = combo.clone();
                extended.push(value.clone());
                next.push(extended);
            }
        }
        combos = next;
    }
    combos
}

fn dedup(values: &mut Vec<Value>) {
    let mut seen = Vec::new();
    values.retain(|v| {
        if seen.contains(v) {
            false
        } else {
            seen.push(v.clone());
            true
        }
    });
}

/// What a resource's computed attribute may hold, from `ops` after the resource's name.
fn resource_attribute(resource_type: &str, ops: &[TraversalOperator]) -> Vec<Value> {
    let attribute = ops.iter().find_map(|op| match op {
        TraversalOperator::GetAttr(a) => Some(a.as_str()),
        _ => None,
    });
    attribute
        .and_then(|a| computed_attribute(resource_type, a))
        .into_iter()
        .collect()
}
