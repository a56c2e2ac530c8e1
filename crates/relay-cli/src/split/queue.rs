//! The queues `relay split start --create` makes for a split, and that `stop` and `gc` delete:
//! `<prefix><split>-<6 hex digits>`, in the region and account of the relay's own queue (FIFO
//! when it is). The random suffix matters: SQS refuses a deleted queue's name for 60 seconds.

use crate::error::CliError;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::QueueAttributeName;

/// The longest SQS queue name.
const MAX_QUEUE_NAME: usize = 80;

/// An SQS client for the region of the queue at `url` (the standard configuration otherwise).
async fn client(url: &str) -> Client {
    let sdk = relay_core::cloud::load_aws_config(std::time::Duration::from_secs(10)).await;
    relay_core::sink::sqs::client_for_queue(&sdk, url)
}

/// Creates the split's queue next to `like` (the relay's queue URL); returns its URL.
pub(crate) async fn create(like: &str, prefix: &str, split: &str) -> Result<String, CliError> {
    let fifo = like.ends_with(".fifo");
    let name = format!(
        "{}{}",
        crate::naming::split_id(prefix, split)?,
        if fifo { ".fifo" } else { "" }
    );
    if name.len() > MAX_QUEUE_NAME {
        return Err(CliError::Invalid(format!(
            "the queue name {name:?} is longer than SQS's {MAX_QUEUE_NAME} characters: use a shorter split name"
        )));
    }
    let mut create = client(like).await.create_queue().queue_name(&name);
    if fifo {
        // The relay sets MessageGroupId and MessageDeduplicationId itself.
        create = create
            .attributes(QueueAttributeName::FifoQueue, "true")
            .attributes(QueueAttributeName::ContentBasedDeduplication, "false");
    }
    let created = create.send().await.map_err(|e| {
        CliError::Cloud(format!(
            "cannot create the queue {name}: {}",
            aws_smithy_types::error::display::DisplayErrorContext(&e)
        ))
    })?;
    created
        .queue_url()
        .map(str::to_owned)
        .ok_or_else(|| CliError::Cloud(format!("SQS created {name} but gave no URL")))
}

/// Deletes a split's queue; one already gone is fine.
pub(crate) async fn delete(url: &str) -> Result<(), CliError> {
    match client(url).await.delete_queue().queue_url(url).send().await {
        Ok(_) => Ok(()),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_queue_does_not_exist()) =>
        {
            Ok(())
        }
        Err(e) => Err(CliError::Cloud(format!(
            "cannot delete the queue {url}: {}",
            aws_smithy_types::error::display::DisplayErrorContext(&e)
        ))),
    }
}
