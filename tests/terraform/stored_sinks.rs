//! Stored sinks (`[sinks.<name>]` of the stored routes document) are deployable: the relay
//! modules' inputs `stored_sink_queue_arns`, `stored_sink_topic_arns`, `stored_sink_kms_key_arns`
//! (aws-relay) and `stored_sink_topics` (gcp-relay) grant exactly the destinations given, the
//! output `stored_sink_allowed` (what `relay routes put --allowed` takes) lists every destination
//! the relay may send to, and the operator page's example is granted as the page says.
//!
//! Nothing here runs Terraform: the role's policy is evaluated with [`Scope`], each dynamic
//! statement once per element of its `for_each`, as Terraform expands it.

use std::path::Path;

use hcl::Expression;
use relay_core::live::StoredRoutes;
use relay_core::sink::{Target, region_of_host};
use serde_json::{Value, json};

use crate::eval::{Scope, as_text};
use crate::model::{self, Config, attr, label, literal_string, literal_strings, nested};
use crate::platform::{Statement, policy_statements};

/// A stored sink's queue and topics, outside the split prefix.
const QUEUE: &str = "arn:aws:sqs:us-east-1:123456789012:dss-audit";
const TOPIC: &str = "arn:aws:sns:us-east-1:123456789012:dss-audit";
const PUBSUB_TOPIC: &str = "projects/relay-project/topics/dss-audit";
/// `project_id` has no default, and the examples pass it from variables without one.
const SAMPLE_PROJECT: &str = "relay-project";

/// The operator page whose example must work as written.
const PAGE: &str = "docs/live-routes.md";

/// Every resource the statements of the role's policy that grant `action` name, as
/// `(sid, resource)`, for every sample of the variables in `scope`.
fn granted(config: &Config, scope: &Scope<'_>, action: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for statement in policy_statements(config, "this") {
        if !statement.actions.iter().any(|a| a == action) {
            continue;
        }
        for resources in statement_resources(scope, &statement) {
            for resource in resources.iter().filter_map(as_text) {
                out.push((statement.sid.clone(), resource));
            }
        }
    }
    out
}

/// The statements that grant `action` on `resource`, by sid, for some sample in `scope`.
fn granting(config: &Config, scope: &Scope<'_>, action: &str, resource: &str) -> Vec<String> {
    (granted(config, scope, action).into_iter())
        .filter(|(_, r)| r == resource)
        .map(|(sid, _)| sid)
        .collect()
}

/// The resource lists a statement takes: a dynamic one's for each element of each sample of its
/// `for_each` (`resources = statement.value` or `[statement.value]`), a plain one's samples.
fn statement_resources(scope: &Scope<'_>, statement: &Statement<'_>) -> Vec<Vec<Value>> {
    let resources = statement.resources.expect("resources");
    let Some(gate) = &statement.gate else {
        return scope
            .samples(resources)
            .into_iter()
            .filter_map(|v| v.as_array().cloned())
            .collect();
    };
    let for_each: Expression = gate.parse().expect("for_each parses");
    let elements = scope
        .samples(&for_each)
        .into_iter()
        .filter_map(|v| v.as_array().cloned())
        .flatten();
    match compact(resources).as_str() {
        "statement.value" => elements.filter_map(|e| e.as_array().cloned()).collect(),
        "[statement.value]" => elements.map(|e| vec![e]).collect(),
        other => panic!(
            "{}: resources {other} of a dynamic statement",
            statement.sid
        ),
    }
}

/// An expression as hcl-rs prints it, without the whitespace.
fn compact(expr: &Expression) -> String {
    expr.to_string().split_whitespace().collect()
}

/// The statement `sid` of the role's policy.
fn statement<'a>(config: &'a Config, sid: &str) -> Statement<'a> {
    policy_statements(config, "this")
        .into_iter()
        .find(|s| s.sid == sid)
        .unwrap_or_else(|| panic!("aws-relay: no statement {sid}"))
}

/// `cond ? [var.<input>] : []` with `cond` reading `var.routes_enabled` and `var.<input>`: the
/// grant exists with stored routes, for a non-empty list (IAM refuses a statement without
/// resources), and holds the list as given.
fn assert_gated_on(statement: &Statement<'_>, input: &str) {
    let gate = statement.gate.as_deref().expect("a dynamic statement");
    let for_each: Expression = gate.parse().expect("for_each parses");
    let Expression::Conditional(c) = &for_each else {
        panic!("{}: for_each must be a conditional: {gate}", statement.sid)
    };
    let read = model::references(&c.cond_expr, "var");
    for var in ["routes_enabled", input] {
        assert!(
            read.iter().any(|r| r == var),
            "{}: granted only with var.{var}: {gate}",
            statement.sid
        );
    }
    assert_eq!(compact(&c.true_expr), format!("[var.{input}]"));
    assert_eq!(compact(&c.false_expr), "[]");
}

/// An input's validation refuses anything but a whole ARN or id: its pattern is anchored and
/// matches no `*` or `?`, so no IAM wildcard gets through to a grant; and the input without
/// routes_enabled is refused rather than ignored.
fn assert_validates_names(config: &Config, input: &str) {
    let block = config.variable(input);
    assert_eq!(
        attr(block.body(), "default").map(ToString::to_string),
        Some("[]".to_owned()),
        "{}: {input} grants nothing by default",
        config.name
    );
    let conditions: Vec<String> = nested(block.body(), "validation")
        .filter_map(|v| attr(v.body(), "condition"))
        .map(ToString::to_string)
        .collect();
    let mut patterns = Vec::new();
    for validation in nested(block.body(), "validation") {
        let condition = attr(validation.body(), "condition").expect("condition");
        model::walk(condition, &mut |e| {
            if let Expression::FuncCall(call) = e
                && call.name.name.as_str() == "regex"
                && let Some(pattern) = call.args.first().and_then(literal_string)
            {
                patterns.push(pattern);
            }
        });
    }
    assert_eq!(
        patterns.len(),
        1,
        "{}: {input}: {conditions:?}",
        config.name
    );
    let pattern = &patterns[0];
    assert!(
        pattern.starts_with('^') && pattern.ends_with('$') && !matches_a_wildcard(pattern),
        "{}: {input}'s pattern lets an IAM wildcard (* or ?) through: {pattern}",
        config.name
    );
    assert!(
        conditions.iter().any(|c| c.contains("var.routes_enabled")),
        "{}: {input} without routes_enabled must be refused, not ignored: {conditions:?}",
        config.name
    );
}

/// Whether a regular expression may match `*` or `?`: a character class listing either, a
/// negated class, an unescaped `.` outside a class, or an escape other than `\.`.
pub(crate) fn matches_a_wildcard(pattern: &str) -> bool {
    let (mut in_class, mut escaped, mut previous) = (false, false, ' ');
    for c in pattern.chars() {
        let wild = if escaped {
            escaped = false;
            c != '.'
        } else if c == '\\' {
            escaped = true;
            false
        } else if in_class {
            in_class = c != ']';
            matches!(c, '*' | '?') || (c == '^' && previous == '[')
        } else {
            in_class = c == '[';
            c == '.'
        };
        if wild {
            return true;
        }
        previous = c;
    }
    false
}

/// A stored SQS sink's queue given in `stored_sink_queue_arns` is in the role's
/// `sqs:SendMessage` resources, in `SendToStoredSinkQueues` alone, as that exact ARN, and the
/// statement names nothing the input does not; without the input no statement names it.
#[test]
fn a_stored_sink_queue_given_in_the_input_may_be_sent_to_and_nothing_more() {
    let config = model::module("aws-relay");
    let examples = model::examples();
    let before = Scope::module(&config, &examples);
    let after =
        Scope::module(&config, &examples).with_sample("stored_sink_queue_arns", json!([QUEUE]));
    let stored = statement(&config, "SendToStoredSinkQueues");
    assert_eq!(stored.actions, ["sqs:SendMessage"]);
    assert_eq!(stored.effect, "Allow");
    assert_gated_on(&stored, "stored_sink_queue_arns");
    assert_validates_names(&config, "stored_sink_queue_arns");

    assert!(
        granting(&config, &before, "sqs:SendMessage", QUEUE).is_empty(),
        "aws-relay: {QUEUE} is granted without the input"
    );
    assert_eq!(
        granting(&config, &after, "sqs:SendMessage", QUEUE),
        ["SendToStoredSinkQueues"],
        "aws-relay"
    );
    let lists = statement_resources(&after, &stored);
    assert!(lists.contains(&vec![json!(QUEUE)]), "aws-relay: {lists:?}");
    assert!(
        lists.iter().flatten().all(|r| r == QUEUE),
        "aws-relay: SendToStoredSinkQueues names more than the input: {lists:?}"
    );
}

/// The same for a stored SNS sink's topic and `stored_sink_topic_arns` (`sns:Publish`), and for
/// the keys of encrypted ones in `stored_sink_kms_key_arns`, which join the role's
/// customer-managed keys.
#[test]
fn a_stored_sink_topic_and_its_key_given_in_the_inputs_may_be_used_and_nothing_more() {
    let config = model::module("aws-relay");
    let examples = model::examples();
    let after =
        Scope::module(&config, &examples).with_sample("stored_sink_topic_arns", json!([TOPIC]));
    let stored = statement(&config, "PublishToStoredSinkTopics");
    assert_eq!(stored.actions, ["sns:Publish"]);
    assert_gated_on(&stored, "stored_sink_topic_arns");
    assert_validates_names(&config, "stored_sink_topic_arns");
    assert_eq!(
        granting(&config, &after, "sns:Publish", TOPIC),
        ["PublishToStoredSinkTopics"],
        "aws-relay"
    );
    let lists = statement_resources(&after, &stored);
    assert!(lists.iter().flatten().all(|r| r == TOPIC), "{lists:?}");

    // The keys: UseCustomerManagedKeys covers local.role_kms_key_arns, which holds the stored
    // sinks' keys (with stored routes) and every key of main.tf.
    assert_validates_names(&config, "stored_sink_kms_key_arns");
    let keys = statement(&config, "UseCustomerManagedKeys");
    let gate = keys.gate.as_deref().expect("a dynamic statement");
    let for_each: Expression = gate.parse().expect("for_each parses");
    assert_eq!(
        model::references(&for_each, "local"),
        ["role_kms_key_arns", "role_kms_key_arns"],
        "aws-relay: UseCustomerManagedKeys: {gate}"
    );
    let locals = config.locals();
    let role_keys = locals["role_kms_key_arns"];
    assert_eq!(model::references(role_keys, "local"), ["kms_key_arns"]);
    let vars = model::references(role_keys, "var");
    assert!(
        vars.contains(&"stored_sink_kms_key_arns".to_owned())
            && vars.contains(&"routes_enabled".to_owned()),
        "aws-relay: role_kms_key_arns: {role_keys}"
    );
}

/// gcp-relay grants its service account `roles/pubsub.publisher` on exactly each topic of
/// `stored_sink_topics`, one `_iam_member` per topic, with stored routes only.
#[test]
fn gcp_grants_publishing_on_exactly_the_stored_sink_topics() {
    let config = model::module("gcp-relay");
    let examples = model::examples();
    let scope = Scope::module(&config, &examples)
        .with_sample("project_id", json!(SAMPLE_PROJECT))
        .with_sample("stored_sink_topics", json!([PUBSUB_TOPIC]));
    assert_validates_names(&config, "stored_sink_topics");
    let grant = config.resource("google_pubsub_topic_iam_member", "stored_sinks");
    let body = grant.body();
    assert_eq!(
        attr(body, "role").and_then(literal_string).as_deref(),
        Some("roles/pubsub.publisher")
    );
    assert_eq!(
        attr(body, "member").map(ToString::to_string).as_deref(),
        Some("\"serviceAccount:${google_service_account.this.email}\"")
    );
    assert_eq!(
        attr(body, "topic").map(ToString::to_string).as_deref(),
        Some("each.value")
    );
    // for_each = toset(var.routes_enabled ? var.stored_sink_topics : []).
    let for_each = attr(body, "for_each").expect("for_each");
    let Expression::FuncCall(call) = for_each else {
        panic!("gcp-relay: stored_sinks for_each: {for_each}")
    };
    assert_eq!(call.name.name.as_str(), "toset");
    let Some(Expression::Conditional(c)) = call.args.first() else {
        panic!("gcp-relay: stored_sinks for_each: {for_each}")
    };
    assert_eq!(compact(&c.cond_expr), "var.routes_enabled");
    assert_eq!(compact(&c.false_expr), "[]");
    let topics: Vec<Value> = scope
        .samples(&c.true_expr)
        .into_iter()
        .filter_map(|v| v.as_array().cloned())
        .flatten()
        .collect();
    assert_eq!(topics, [json!(PUBSUB_TOPIC)], "gcp-relay: granted topics");
}

/// `stored_sink_allowed`, what `relay routes put --allowed` takes, lists every destination the
/// role's `sqs:SendMessage` and `sns:Publish` statements name (aws-relay) and every topic the
/// service account may publish to (gcp-relay), so that the CLI warns exactly about the rest.
#[test]
fn stored_sink_allowed_lists_every_destination_the_relay_may_send_to() {
    let aws = model::module("aws-relay");
    let value = aws.output_value("stored_sink_allowed");
    let (vars, locals) = (
        model::references(value, "var"),
        model::references(value, "local"),
    );
    for statement in policy_statements(&aws, "this") {
        if !statement
            .actions
            .iter()
            .any(|a| a == "sqs:SendMessage" || a == "sns:Publish")
        {
            continue;
        }
        let gate = statement.gate.as_deref().expect("a dynamic statement");
        let Expression::Conditional(c) = gate.parse::<Expression>().expect("parses") else {
            panic!("{}: {gate}", statement.sid)
        };
        for var in model::references(&c.true_expr, "var") {
            assert!(
                vars.contains(&var),
                "aws-relay: output misses var.{var} ({})",
                statement.sid
            );
        }
        for local in model::references(&c.true_expr, "local") {
            assert!(
                locals.contains(&local),
                "aws-relay: output misses local.{local} ({})",
                statement.sid
            );
        }
    }

    let gcp = model::module("gcp-relay");
    let value = gcp.output_value("stored_sink_allowed");
    let mut topics: Vec<String> = gcp
        .resources("google_pubsub_topic_iam_member")
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .collect();
    topics.sort();
    // archive_readers publish a replay to the relay's own topic, which the output names; the
    // archive's topic (relay_archive_stream) takes only its records, never a stored sink's.
    assert_eq!(
        topics,
        [
            "archive_readers",
            "relay",
            "relay_archive_stream",
            "stored_sinks"
        ],
        "gcp-relay: publisher grants"
    );
    assert!(model::references(value, "local").contains(&"topic_id".to_owned()));
    assert!(model::references(value, "var").contains(&"stored_sink_topics".to_owned()));
}

/// The operator page's stored sink, granted as the page says (its `hcl` block), is one the
/// relay's role may send to: the queue its `queue_url` stands for is in `SendToStoredSinkQueues`.
#[test]
fn the_operator_pages_stored_sink_is_granted_as_written() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(PAGE);
    let page = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{PAGE}: {e}"));
    let block = |lang: &str, needle: &str| -> String {
        page.split(&format!("```{lang}\n"))
            .skip(1)
            .filter_map(|rest| rest.split("```").next())
            .find(|b| b.contains(needle))
            .unwrap_or_else(|| panic!("{PAGE}: no ```{lang} block with {needle}"))
            .to_owned()
    };

    // The document's sink: [sinks.audit], an SQS queue.
    let document = StoredRoutes::parse(&block("toml", "[sinks.")).expect("the page's document");
    let queues: Vec<String> = document
        .sinks
        .values()
        .filter_map(|spec| match &spec.target {
            Target::Sqs(sqs) => Some(sqs.queue_url.as_str().to_owned()),
            _ => None,
        })
        .collect();
    assert!(!queues.is_empty(), "{PAGE}: no SQS sink in the example");

    // The module call that grants it.
    let hcl: hcl::Body = hcl::from_str(&block("hcl", "stored_sink_queue_arns")).expect("HCL");
    let call = hcl
        .blocks()
        .find(|b| b.identifier() == "module")
        .expect("a module block");
    let source = attr(call.body(), "source").and_then(literal_string);
    assert!(
        source.as_deref().is_some_and(|s| s.ends_with("/aws-relay")),
        "{PAGE}: the example calls aws-relay, not {source:?} ({})",
        label(call, 0)
    );
    assert_eq!(
        attr(call.body(), "routes_enabled").map(ToString::to_string),
        Some("true".to_owned()),
        "{PAGE}: stored sinks need routes_enabled"
    );
    let given = attr(call.body(), "stored_sink_queue_arns")
        .and_then(literal_strings)
        .expect("a literal list");

    let config = model::module("aws-relay");
    let scope = Scope::module(&config, &model::examples())
        .with_sample("stored_sink_queue_arns", Value::from(given.clone()));
    let sendable = granted(&config, &scope, "sqs:SendMessage");
    for url in queues {
        let arn = queue_arn(&url);
        assert!(
            given.contains(&arn),
            "{PAGE}: {url} ({arn}) is not in {given:?}"
        );
        assert!(
            sendable
                .iter()
                .any(|(sid, r)| sid == "SendToStoredSinkQueues" && *r == arn),
            "{PAGE}: the role may not send to {arn}: {sendable:?}"
        );
    }
}

/// The ARN of the queue at `url` (`https://sqs.<region>.amazonaws.com/<account>/<name>`).
fn queue_arn(url: &str) -> String {
    let parts: Vec<&str> = url.split('/').collect();
    let [_, _, host, account, name] = parts[..] else {
        panic!("not a queue URL: {url}")
    };
    let region = region_of_host(host).unwrap_or_else(|| panic!("no region in {url}"));
    format!("arn:aws:sqs:{region}:{account}:{name}")
}

/// The wildcard check behind `assert_validates_names` finds what it looks for.
#[test]
fn the_wildcard_check_finds_patterns_that_let_a_wildcard_through() {
    for wild in [
        "^arn:[A-Za-z*]+$",
        "^arn:[a-z?]$",
        "^arn:.+$",
        "^arn:[^:]+$",
        "^arn:\\S+$",
    ] {
        assert!(matches_a_wildcard(wild), "{wild}");
    }
    for exact in [
        "^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,75}(\\.fifo)?$",
        "^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/topics/[A-Za-z][A-Za-z0-9._~%+-]{2,254}$",
    ] {
        assert!(!matches_a_wildcard(exact), "{exact}");
    }
}
