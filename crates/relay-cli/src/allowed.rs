//! `relay routes put --allowed`: whether a stored sink's destination is one the deployed relay
//! may publish to. The relay modules say what that is in their output `stored_sink_allowed`:
//! the ARNs (SQS, SNS) and topic ids (Pub/Sub) of the role's or service account's grants, where
//! an entry ending in `*` covers every name it starts (the split prefix on AWS).
//!
//! The check only warns: the CLI cannot see the grants themselves, and a destination may be
//! granted some other way (a topic `relay split start --grant-to` made, a grant by hand).

use relay_core::sink::{SinkSpecs, Target, region_of_host};

/// A destination as the grants name it.
#[derive(Debug, PartialEq, Eq)]
enum Destination {
    /// An SQS queue or SNS topic: `arn:<partition>:<service>:<region>:<account>:<name>`. A queue
    /// URL on a host that names no region (an emulator) has none, and matches any.
    Aws {
        service: &'static str,
        region: Option<String>,
        account: String,
        name: String,
    },
    /// A Pub/Sub topic: `projects/<project>/topics/<topic>`.
    PubSub(String),
}

/// The destination of `target`, when it is one the relay needs a grant for (not a file).
fn destination(target: &Target) -> Option<Destination> {
    match target {
        Target::Sqs(sqs) => {
            let uri = sqs.queue_url.as_str().parse::<http::Uri>().ok()?;
            let mut path = uri.path().trim_matches('/').split('/');
            let (account, name) = (path.next()?, path.next()?);
            Some(Destination::Aws {
                service: "sqs",
                region: uri.host().and_then(region_of_host),
                account: account.to_owned(),
                name: name.to_owned(),
            })
        }
        Target::Sns(sns) => match sns.topic_arn.as_str().split(':').collect::<Vec<_>>()[..] {
            ["arn", _, "sns", region, account, name] => Some(Destination::Aws {
                service: "sns",
                region: Some(region.to_owned()),
                account: account.to_owned(),
                name: name.to_owned(),
            }),
            _ => None,
        },
        Target::PubSub(pubsub) => Some(Destination::PubSub(pubsub.topic.as_str().to_owned())),
        Target::File(_) => None,
    }
}

/// The destination as the sink names it: `sqs <queue URL>`, `sns <topic ARN>`, `pubsub <topic>`.
fn named(target: &Target) -> String {
    let id = match target {
        Target::Sqs(sqs) => sqs.queue_url.as_str(),
        Target::Sns(sns) => sns.topic_arn.as_str(),
        Target::PubSub(pubsub) => pubsub.topic.as_str(),
        Target::File(file) => return format!("file {}", file.path),
    };
    format!("{} {id}", target.kind())
}

/// `name` is `pattern`, or starts what `pattern` (ending in `*`) starts.
fn covers(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

/// Whether the entry `allowed` (an ARN or a topic id, possibly ending in `*`) covers
/// `destination`.
fn allows(allowed: &str, destination: &Destination) -> bool {
    match destination {
        Destination::PubSub(topic) => covers(allowed, topic),
        Destination::Aws {
            service,
            region,
            account,
            name,
        } => match allowed.split(':').collect::<Vec<_>>()[..] {
            ["arn", _, s, r, a, n] => {
                s == *service
                    && region.as_deref().is_none_or(|region| r == region)
                    && a == account
                    && covers(n, name)
            }
            _ => false,
        },
    }
}

/// One warning for each sink of `sinks` whose destination no entry of `allowed` covers; none
/// when `allowed` is empty (nothing to tell by).
pub(crate) fn warnings(sinks: &SinkSpecs, allowed: &[String]) -> Vec<String> {
    if allowed.is_empty() {
        return Vec::new();
    }
    sinks
        .iter()
        .filter_map(|(name, spec)| {
            let destination = destination(&spec.target)?;
            let granted = allowed
                .iter()
                .any(|entry| allows(entry.trim(), &destination));
            (!granted).then(|| {
                format!(
                    "warning: sink {name:?} ({}) is outside what the relay may send to \
                     (--allowed); unless it is granted some other way, every notification routed \
                     to it gets 502: grant it with the module's stored_sink_queue_arns, \
                     stored_sink_topic_arns or stored_sink_topics (docs/live-routes.md)",
                    named(&spec.target)
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sinks(toml: &str) -> SinkSpecs {
        relay_core::live::StoredRoutes::parse(toml).unwrap().sinks
    }

    #[test]
    fn exact_names_and_prefixes_cover_what_they_name() {
        let stored = sinks(
            r#"
[sinks]
audit = { type = "sqs", queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/dss-audit" }
split = { type = "sns", topic_arn = "arn:aws:sns:us-east-1:123456789012:dss-relay-split-bob" }
gcp = { type = "pubsub", topic = "projects/p/topics/dss-audit" }
local = { type = "file", path = "/tmp/audit.jsonl" }
"#,
        );
        let allowed = |entries: &[&str]| -> Vec<String> {
            let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
            warnings(&stored, &entries)
        };
        assert!(allowed(&[]).is_empty(), "nothing to tell by");
        let all = allowed(&[
            "arn:aws:sqs:us-east-1:123456789012:dss-audit",
            "arn:aws:sns:us-east-1:123456789012:dss-relay-split-*",
            "projects/p/topics/dss-audit",
        ]);
        assert!(all.is_empty(), "{all:?}");
        // Another region, account or service, or a prefix that does not start the name.
        let none = allowed(&[
            "arn:aws:sqs:eu-west-1:123456789012:dss-audit",
            "arn:aws:sqs:us-east-1:210987654321:dss-audit",
            "arn:aws:sns:us-east-1:123456789012:dss-audit",
            "arn:aws:sqs:us-east-1:123456789012:dss-relay-split-*",
            "projects/p/topics/dss-audit-2",
        ]);
        assert_eq!(none.len(), 3, "{none:?}");
        for name in ["\"audit\"", "\"split\"", "\"gcp\""] {
            assert!(none.iter().any(|w| w.contains(name)), "{name}: {none:?}");
        }
    }

    #[test]
    fn a_queue_on_an_emulator_matches_any_region() {
        let stored = sinks(
            r#"sinks.audit = { type = "sqs", queue_url = "http://localhost:4566/000000000000/dss-audit" }"#,
        );
        let entry = ["arn:aws:sqs:us-east-1:000000000000:dss-audit".to_owned()];
        assert!(warnings(&stored, &entry).is_empty());
        let other = ["arn:aws:sqs:us-east-1:000000000000:dss-other".to_owned()];
        assert_eq!(warnings(&stored, &other).len(), 1);
    }
}
