//! What tells destinations apart: the resource each delivers to ([`Target::resource`]), one
//! ledger record each, so two configured destinations never share one.

use std::collections::BTreeMap;

use super::SinkConfig;
#[cfg(doc)]
use super::Target;

/// Two configured destinations that deliver to one resource: refused, since one ledger record
/// would stand for both.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sinks {first:?} and {second:?} both deliver to {resource}: name it once")]
pub struct SharedResource {
    /// The destination configured first.
    pub first: String,
    /// The one configured after it.
    pub second: String,
    /// What both deliver to.
    pub resource: String,
}

/// Refuses two of `sinks` (a configuration's, with its splits') that deliver to one resource.
pub(crate) fn check_resources<'a>(
    sinks: impl IntoIterator<Item = &'a SinkConfig>,
) -> Result<(), SharedResource> {
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for sink in sinks {
        let resource = sink.target.resource();
        if let Some(first) = seen.get(&resource) {
            return Err(SharedResource {
                first: (*first).to_owned(),
                second: sink.name.clone(),
                resource,
            });
        }
        seen.insert(resource, &sink.name);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::{Selection, Target, region_of_host};

    fn sink(name: &str, toml: &str) -> SinkConfig {
        let spec: crate::sink::SinkSpec = toml::from_str(toml).unwrap();
        spec.named(name)
    }

    #[test]
    fn each_destination_is_known_by_what_it_delivers_to() {
        let sqs = |url: &str| sink("q", &format!("type = \"sqs\"\nqueue_url = \"{url}\"")).target;
        for (url, resource) in [
            (
                "https://sqs.eu-west-1.amazonaws.com/222222222222/orders",
                "arn:aws:sqs:eu-west-1:222222222222:orders",
            ),
            (
                "https://SQS.us-east-1.amazonaws.com/111111111111/orders/",
                "arn:aws:sqs:us-east-1:111111111111:orders",
            ),
            (
                "https://us-west-2.queue.amazonaws.com/111111111111/orders",
                "arn:aws:sqs:us-west-2:111111111111:orders",
            ),
            (
                "https://vpce-0a1b2c3d-4e5f.sqs.us-east-1.vpce.amazonaws.com/111111111111/orders",
                "arn:aws:sqs:us-east-1:111111111111:orders",
            ),
            (
                "https://sqs.cn-north-1.amazonaws.com.cn/111111111111/orders",
                "arn:aws-cn:sqs:cn-north-1:111111111111:orders",
            ),
            (
                "https://sqs.us-gov-west-1.amazonaws.com/111111111111/orders",
                "arn:aws-us-gov:sqs:us-gov-west-1:111111111111:orders",
            ),
            (
                "http://LOCALHOST:5000/123456789012/orders",
                "http://localhost:5000/123456789012/orders",
            ),
        ] {
            assert_eq!(sqs(url).resource(), resource, "{url}");
        }
        let sns = sink(
            "t",
            "type = \"sns\"\ntopic_arn = \"arn:aws:sns:us-east-1:1:t\"",
        );
        assert_eq!(sns.target.resource(), "arn:aws:sns:us-east-1:1:t");
        let pubsub = sink(
            "p",
            "type = \"pubsub\"\ntopic = \"projects/a/topics/orders\"",
        );
        assert_eq!(
            pubsub.target.resource(),
            "//pubsub.googleapis.com/projects/a/topics/orders"
        );
        let stdout = sink("f", "type = \"file\"\npath = \"-\"");
        assert_eq!(stdout.target.resource(), "file:-");
        let relative = sink("f", "type = \"file\"\npath = \"out.jsonl\"");
        let cwd = std::fs::canonicalize(".").unwrap();
        assert_eq!(
            relative.target.resource(),
            format!("file:{}", cwd.join("out.jsonl").display())
        );
        assert!(matches!(relative.target, Target::File(_)));
        assert_eq!(relative.selection, Selection::default());
    }

    #[test]
    fn regions_come_from_aws_hosts_only() {
        assert_eq!(
            region_of_host("sqs.eu-west-1.amazonaws.com").as_deref(),
            Some("eu-west-1")
        );
        assert_eq!(region_of_host("127.0.0.1"), None);
        assert_eq!(region_of_host("sqs.example.org"), None);
        assert_eq!(region_of_host("sqs.eu-west-1.example.org"), None);
        assert_eq!(region_of_host("queue.amazonaws.com"), None);
    }

    #[test]
    fn two_names_for_one_resource_are_refused_naming_both() {
        let a = sink(
            "a",
            "type = \"sns\"\ntopic_arn = \"arn:aws:sns:us-east-1:1:t\"",
        );
        let b = sink(
            "b",
            "type = \"sns\"\ntopic_arn = \"arn:aws:sns:us-east-1:2:t\"",
        );
        let c = sink(
            "c",
            "type = \"sns\"\ntopic_arn = \"arn:aws:sns:us-east-1:1:t\"",
        );
        assert_eq!(check_resources([&a, &b]), Ok(()));
        assert_eq!(
            check_resources([&a, &b, &c]),
            Err(SharedResource {
                first: "a".into(),
                second: "c".into(),
                resource: "arn:aws:sns:us-east-1:1:t".into(),
            })
        );
    }
}
