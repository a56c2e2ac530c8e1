//! What `relay split start --create` makes for a split (a queue or a topic named after the
//! split prefix, next to the relay's own), and what `stop` and `gc` delete again.

use crate::error::CliError;
use relay_core::live::SplitSpec;
use relay_core::sink::{PubSubConfig, SqsConfig, Target};

use super::StartArgs;
use super::{queue, topic};

/// The destination `--create` makes (`--like` the relay's queue URL or Pub/Sub topic), or none
/// without `--create`.
pub(super) async fn create(args: &StartArgs) -> Result<Option<Created>, CliError> {
    Ok(match (args.create, &args.like) {
        (true, Some(like)) if like.starts_with("projects/") => {
            let Some(member) = &args.grant_to else {
                return Err(CliError::invalid(
                    "--create on Pub/Sub needs --grant-to serviceAccount:<the relay's service account>: without the grant the relay cannot publish to the topic",
                ));
            };
            let topic = topic::create(like, &args.split_prefix, &args.name, member).await?;
            println!(
                "created the topic {topic} and its pull subscription {}",
                topic::subscription_of(&topic)
            );
            Some(Created::Topic(topic))
        }
        (true, Some(like)) => {
            let url = queue::create(like, &args.split_prefix, &args.name).await?;
            println!("created the queue {url}");
            Some(Created::Queue(url))
        }
        (true, None) => {
            return Err(CliError::invalid(
                "--create needs --like <the relay's queue URL or Pub/Sub topic>",
            ));
        }
        (false, _) => None,
    })
}

/// Deletes the queues and topics that `--create` made for `removed` splits, once they are out
/// of the document (so no relay is left routing to a deleted destination).
pub(super) async fn delete_created(removed: &[SplitSpec]) -> Result<(), CliError> {
    for split in removed.iter().filter(|s| s.created) {
        match &split.to.target {
            Target::Sqs(queue) => {
                let url = queue.queue_url.as_str();
                queue::delete(url).await?;
                println!("deleted the queue {url}");
            }
            Target::PubSub(topic) => {
                let topic = topic.topic.as_str();
                topic::delete(topic).await?;
                println!("deleted the topic {topic} and its subscription");
            }
            Target::File(_) | Target::Sns(_) => {}
        }
    }
    Ok(())
}

/// What `--create` made for a split.
pub(super) enum Created {
    /// An SQS queue, by URL.
    Queue(String),
    /// A Pub/Sub topic, by name, with a pull subscription of the same id.
    Topic(String),
}

impl Created {
    /// Deletes it again.
    pub(super) async fn delete(&self) -> Result<(), CliError> {
        match self {
            Self::Queue(url) => queue::delete(url).await,
            Self::Topic(topic) => topic::delete(topic).await,
        }
    }

    /// The split's destination.
    pub(super) fn target(&self) -> Result<Target, CliError> {
        match self {
            Self::Queue(url) => url
                .parse()
                .map(|url| Target::Sqs(SqsConfig::new(url)))
                .map_err(|e| CliError::Invalid(format!("the created queue {url}: {e}"))),
            Self::Topic(topic) => topic
                .parse()
                .map(|topic| Target::PubSub(PubSubConfig::new(topic)))
                .map_err(|e| CliError::Invalid(format!("the created topic {topic}: {e}"))),
        }
    }
}
