//! Deploy traps found in review, held closed: the route writers' SQS actions are what the CLI
//! calls and a reader needs, no more; `split_prefix` cannot widen the relay's send grant to
//! most of the account; Pub/Sub's service agent exists before it is granted; and no GCP
//! example needs a Docker engine for its image.

use std::collections::BTreeSet;
use std::path::Path;

use hcl::Expression;

use crate::model::{self, attr, literal_string, literal_strings, nested};
use crate::platform::only_statement_on;

/// Where `relay split` creates and deletes its queues.
const SPLIT_QUEUE_SOURCE: &str = "crates/relay-cli/src/split/queue.rs";

/// What a developer needs to read a split's queue (`aws sqs receive-message`, which the CLI
/// prints), beyond what the CLI itself calls.
const READER_ACTIONS: [&str; 4] = [
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
    "sqs:GetQueueUrl",
    "sqs:ReceiveMessage",
];

/// Actions a route writer must never hold on split queues: SetQueueAttributes can set a queue
/// policy that shares the queue with any account; AddPermission does the same; the CLI tags no
/// queue.
const NEVER_FOR_WRITERS: [&str; 3] = [
    "sqs:SetQueueAttributes",
    "sqs:AddPermission",
    "sqs:TagQueue",
];

/// The shortest `split_prefix`, with its trailing hyphen: the send grant is `…:<prefix>*`.
const MIN_SPLIT_PREFIX: usize = 4;

/// The SQS operations the CLI's split queues call (`client(…).await.create_queue()` is
/// `sqs:CreateQueue`).
fn cli_sqs_actions() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(SPLIT_QUEUE_SOURCE);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{SPLIT_QUEUE_SOURCE}: {e}"));
    let mut actions = BTreeSet::new();
    for rest in text.split(".await.").skip(1) {
        let op: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        if rest[op.len()..].starts_with("()") && !op.is_empty() {
            let pascal: String = op
                .split('_')
                .map(|w| {
                    let mut chars = w.chars();
                    chars.next().map_or_else(String::new, |c| {
                        c.to_ascii_uppercase().to_string() + chars.as_str()
                    })
                })
                .collect();
            actions.insert(format!("sqs:{pascal}"));
        }
    }
    actions
}

/// `route_writer_policy_json`'s split-queue statement grants what `relay split` calls (found in
/// its source) and what reading a split's queue needs, and nothing that changes a queue's policy
/// or tags.
#[test]
fn route_writers_may_manage_split_queues_and_no_more() {
    let config = model::module("aws-relay");
    let sqs = only_statement_on(&config, "route_writers", "sqs:");
    let granted: BTreeSet<String> = sqs.actions.iter().cloned().collect();

    let called = cli_sqs_actions();
    assert!(
        called.contains("sqs:CreateQueue") && called.contains("sqs:DeleteQueue"),
        "{SPLIT_QUEUE_SOURCE}: expected CreateQueue and DeleteQueue, found {called:?}"
    );
    let expected: BTreeSet<String> = called
        .iter()
        .cloned()
        .chain(READER_ACTIONS.iter().map(|a| (*a).to_owned()))
        .collect();
    assert_eq!(
        granted, expected,
        "aws-relay: route_writers' {} statement: what the CLI calls and a reader needs",
        sqs.sid
    );
    for action in NEVER_FOR_WRITERS {
        assert!(
            !granted.contains(action),
            "aws-relay: route_writers must not hold {action}"
        );
    }
    let resources = sqs
        .resources
        .map(|r| r.to_string().split_whitespace().collect::<String>());
    assert_eq!(
        resources.as_deref(),
        Some("[local.split_queue_arns]"),
        "aws-relay: only on the split queues"
    );
}

/// The one form a `split_prefix` validation regex takes here, `^[CLASS]{m,n}-$`: the class, and
/// the least and most characters before the final hyphen. None for any other form.
fn prefix_pattern(regex: &str) -> Option<(String, usize, usize)> {
    let body = regex.strip_prefix("^[")?.strip_suffix("-$")?;
    let (class, counts) = body.split_once("]{")?;
    let (min, max) = counts.strip_suffix('}')?.split_once(',')?;
    Some((class.to_owned(), min.parse().ok()?, max.parse().ok()?))
}

/// Whether `prefix` matches `^[class]{min,max}-$`, for the classes used here (ranges and
/// literal characters).
fn matches_prefix(pattern: &(String, usize, usize), prefix: &str) -> bool {
    let (class, min, max) = pattern;
    let Some(head) = prefix.strip_suffix('-') else {
        return false;
    };
    let chars: Vec<char> = class.chars().collect();
    let in_class = |c: char| {
        let mut i = 0;
        while i < chars.len() {
            if i + 2 < chars.len() && chars[i + 1] == '-' {
                if (chars[i]..=chars[i + 2]).contains(&c) {
                    return true;
                }
                i += 3;
            } else {
                if chars[i] == c {
                    return true;
                }
                i += 1;
            }
        }
        false
    };
    let n = head.chars().count();
    n >= *min && n <= *max && head.chars().all(in_class)
}

/// `split_prefix` is null or at least 4 characters ending in a hyphen: the relay's role may send
/// to `…:<split_prefix>*`, which a one-letter prefix would turn into most queues and topics of
/// the account. The default (`<name>-split-`) passes for every name the examples give.
#[test]
fn split_prefix_keeps_the_send_grant_narrow() {
    let config = model::module("aws-relay");
    let variables = config.variables();
    let block = variables["split_prefix"];
    let condition = nested(block.body(), "validation")
        .filter_map(|v| attr(v.body(), "condition"))
        .map(|c| hcl::format::to_string(c).unwrap_or_else(|_| c.to_string()))
        .collect::<Vec<_>>()
        .join(" ");
    let regex = condition
        .split("regex(\"")
        .nth(1)
        .and_then(|rest| rest.split("\", var.split_prefix").next())
        .map(|r| r.replace("\\\\", "\\"))
        .unwrap_or_else(|| panic!("aws-relay: split_prefix has no regex validation: {condition}"));
    assert!(
        condition.contains("var.split_prefix == null"),
        "aws-relay: split_prefix may be null (the default): {condition}"
    );
    let pattern = prefix_pattern(&regex).unwrap_or_else(|| {
        panic!("aws-relay: split_prefix's regex {regex:?} must be ^[…]{{m,n}}-$ (end in a hyphen)")
    });
    assert!(
        pattern.1 + 1 >= MIN_SPLIT_PREFIX,
        "aws-relay: split_prefix's regex {regex:?} allows prefixes shorter than {MIN_SPLIT_PREFIX}"
    );
    for refused in ["d", "d-", "dss", "ds-", "dss_", "dss-relay", "-"] {
        assert!(
            !matches_prefix(&pattern, refused),
            "aws-relay: split_prefix {refused:?} must be refused ({regex})"
        );
    }
    let mut defaults = vec!["dss-relay-split-".to_owned()];
    for example in model::examples() {
        for (_, target, call) in example.module_calls() {
            if target == "aws-relay" {
                if let Some(name) = attr(call.body(), "name").and_then(literal_string) {
                    defaults.push(format!("{name}-split-"));
                }
                if let Some(prefix) = attr(call.body(), "split_prefix").and_then(literal_string) {
                    defaults.push(prefix);
                }
            }
        }
    }
    defaults.push("a-split-".to_owned());
    for accepted in defaults {
        assert!(
            matches_prefix(&pattern, &accepted),
            "aws-relay: split_prefix {accepted:?} must be accepted ({regex})"
        );
    }
    let routes = config.read("routes.tf");
    assert!(
        routes.contains(r#"coalesce(var.split_prefix, "${var.name}-split-")"#),
        "aws-relay: the default split prefix is <name>-split-"
    );
}

/// No configuration grants a Google service agent by its written-out address
/// (`service-<number>@gcp-sa-….iam.gserviceaccount.com`), which may not exist yet on a fresh
/// project; gcp-pubsub takes Pub/Sub's from `google_project_service_identity`, which creates it,
/// after the API is enabled.
#[test]
fn service_agents_exist_before_they_are_granted() {
    let mut all = model::modules();
    all.extend(model::examples());
    for config in &all {
        for file in config.files.keys() {
            let text = config.read(file);
            for (i, line) in text.lines().enumerate() {
                let code = line.split('#').next().unwrap_or_default();
                assert!(
                    !code.contains("@gcp-sa-"),
                    "{}/{file}:{}: a service agent written out; use google_project_service_identity",
                    config.name,
                    i + 1
                );
            }
        }
    }

    let example = all
        .iter()
        .find(|c| c.name == "examples/gcp-pubsub")
        .expect("examples/gcp-pubsub");
    let identity = example.resource("google_project_service_identity", "pubsub");
    assert_eq!(
        attr(identity.body(), "service")
            .and_then(literal_string)
            .as_deref(),
        Some("pubsub.googleapis.com")
    );
    assert_eq!(
        attr(identity.body(), "provider")
            .map(ToString::to_string)
            .as_deref(),
        Some("google-beta"),
        "gcp-pubsub: google_project_service_identity is in google-beta only"
    );
    let after_apis = attr(identity.body(), "depends_on")
        .is_some_and(|d| d.to_string().contains("google_project_service.this"));
    assert!(
        after_apis,
        "gcp-pubsub: the identity is made after the API is enabled"
    );
    let agent = example.locals()["pubsub_service_agent"].to_string();
    assert_eq!(agent, "google_project_service_identity.pubsub.member");
    for ty in [
        "google_pubsub_topic_iam_member",
        "google_pubsub_subscription_iam_member",
    ] {
        for (name, grant) in example.resources(ty) {
            let member = attr(grant.body(), "member").map(ToString::to_string);
            assert_eq!(
                member.as_deref(),
                Some("local.pubsub_service_agent"),
                "gcp-pubsub: {ty}.{name} grants the service agent"
            );
        }
    }
}

/// Every GCP example builds its image with Cloud Build (gcp-relay-image) unless it is given
/// one: `image` defaults to null, and the relay module's image is the image module's then.
#[test]
fn gcp_examples_need_no_docker_engine() {
    for example in model::examples() {
        let calls = example.module_calls();
        let Some((_, _, relay)) = calls.iter().find(|(_, target, _)| target == "gcp-relay") else {
            continue;
        };
        let image_call = calls
            .iter()
            .find(|(_, target, _)| target == "gcp-relay-image")
            .unwrap_or_else(|| panic!("{}: no gcp-relay-image call", example.name));
        let count = attr(image_call.2.body(), "count").map(ToString::to_string);
        assert_eq!(
            count.as_deref(),
            Some("var.image == null ? 1 : 0"),
            "{}: the image is built only without var.image",
            example.name
        );
        let image = attr(relay.body(), "image").map(ToString::to_string);
        assert_eq!(
            image.as_deref(),
            Some(
                format!(
                    "var.image != null ? var.image : module.{}[0].image",
                    image_call.0
                )
                .as_str()
            ),
            "{}: the relay runs the built image without var.image",
            example.name
        );
        let variables = example.variables();
        let default = attr(variables["image"].body(), "default");
        assert!(
            matches!(default, Some(Expression::Null)),
            "{}: variable image defaults to null",
            example.name
        );
        let apis: Vec<String> = example
            .resources("google_project_service")
            .iter()
            .filter_map(|(_, b)| attr(b.body(), "for_each"))
            .flat_map(|e| match e {
                Expression::FuncCall(call) => call
                    .args
                    .iter()
                    .filter_map(literal_strings)
                    .flatten()
                    .collect(),
                _ => Vec::new(),
            })
            .collect();
        for api in [
            "cloudbuild.googleapis.com",
            "artifactregistry.googleapis.com",
        ] {
            assert!(
                apis.iter().any(|a| a == api),
                "{}: the image build needs {api}",
                example.name
            );
        }
    }
}

#[test]
fn the_prefix_pattern_reader_reads_the_one_form() {
    let pattern = prefix_pattern("^[A-Za-z0-9_-]{3,59}-$").expect("the form");
    assert_eq!(pattern, ("A-Za-z0-9_-".to_owned(), 3, 59));
    assert!(matches_prefix(&pattern, "dss-relay-split-"));
    assert!(matches_prefix(&pattern, "a_b-"));
    assert!(!matches_prefix(&pattern, "ab-"));
    assert!(!matches_prefix(&pattern, "abc.-"));
    assert_eq!(prefix_pattern("^[A-Za-z0-9_-]{1,60}$"), None);
}
