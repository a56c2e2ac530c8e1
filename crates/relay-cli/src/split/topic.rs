//! The Pub/Sub topics `relay split start --create` makes for a split, with a pull subscription
//! of the same name, and that `stop` and `gc` delete: `<prefix><split>-<6 hex digits>` in the
//! project of the relay's own topic. The relay may publish to it once the split's creator grants
//! its service account `roles/pubsub.publisher` on it (`--grant-to`); Pub/Sub takes no grant on a
//! name prefix, so nothing else can.

use crate::error::CliError;
use google_cloud_iam_v1::client::IAMPolicy;
use google_cloud_iam_v1::model::{Binding, Policy};
use google_cloud_pubsub::client::{SubscriptionAdmin, TopicAdmin};

/// The role the relay needs on a split topic.
const PUBLISHER: &str = "roles/pubsub.publisher";

/// The longest topic and subscription id.
const MAX_ID: usize = 255;

/// `PUBSUB_EMULATOR_HOST`, when the clients talk to the emulator.
fn emulator() -> Option<String> {
    std::env::var("PUBSUB_EMULATOR_HOST")
        .ok()
        .filter(|h| !h.is_empty())
}

macro_rules! client {
    ($client:ty) => {{
        let mut builder = <$client>::builder();
        if let Some(host) = emulator() {
            builder = builder
                .with_endpoint(format!("http://{host}"))
                .with_credentials(
                    google_cloud_auth::credentials::anonymous::Builder::new().build(),
                );
        }
        builder
            .build()
            .await
            .map_err(|e| CliError::Cloud(format!("cannot build the Pub/Sub client: {e}")))
    }};
}

/// The split topic `topic`'s pull subscription: the same id, under `subscriptions/`.
pub(crate) fn subscription_of(topic: &str) -> String {
    topic.replacen("/topics/", "/subscriptions/", 1)
}

/// Creates the split's topic and subscription next to `like` (`projects/<p>/topics/<t>`) and
/// grants `grant_to` publishing on the topic; returns the topic's name.
pub(crate) async fn create(
    like: &str,
    prefix: &str,
    split: &str,
    grant_to: &str,
) -> Result<String, CliError> {
    let project = match like.split('/').collect::<Vec<_>>().as_slice() {
        ["projects", project, "topics", _] => (*project).to_owned(),
        _ => {
            return Err(CliError::Invalid(format!(
                "--like: expected projects/<project>/topics/<topic>, got {like:?}"
            )));
        }
    };
    let id = crate::naming::split_id(prefix, split)?;
    if id.len() > MAX_ID || !id.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(CliError::Invalid(format!(
            "{id:?} is not a Pub/Sub id (a letter first, at most {MAX_ID} characters)"
        )));
    }
    let topic = format!("projects/{project}/topics/{id}");
    let subscription = subscription_of(&topic);
    client!(TopicAdmin)?
        .create_topic()
        .set_name(&topic)
        .send()
        .await
        .map_err(|e| CliError::Cloud(format!("cannot create the topic {topic}: {e}")))?;
    let created = client!(SubscriptionAdmin)?
        .create_subscription()
        .set_name(&subscription)
        .set_topic(&topic)
        .send()
        .await;
    let granted = match created {
        Err(e) => Err(CliError::Cloud(format!(
            "cannot create the subscription {subscription}: {e}"
        ))),
        Ok(_) => grant(&topic, grant_to).await,
    };
    if let Err(problem) = granted {
        delete(&topic).await?;
        return Err(problem);
    }
    Ok(topic)
}

/// Adds `member` as a publisher to `topic`'s policy, with the policy's etag, so a concurrent
/// change is not overwritten. The emulator has no IAM: there it is skipped.
async fn grant(topic: &str, member: &str) -> Result<(), CliError> {
    if emulator().is_some() {
        println!("the Pub/Sub emulator has no IAM: {member} is not granted {PUBLISHER} on {topic}");
        return Ok(());
    }
    let iam = IAMPolicy::builder()
        .with_endpoint("https://pubsub.googleapis.com")
        .build()
        .await
        .map_err(|e| CliError::Cloud(format!("cannot build the IAM client: {e}")))?;
    let policy = iam
        .get_iam_policy()
        .set_resource(topic)
        .send()
        .await
        .map_err(|e| CliError::Cloud(format!("cannot read the policy of {topic}: {e}")))?;
    let mut bindings = policy.bindings.clone();
    bindings.push(Binding::new().set_role(PUBLISHER).set_members([member]));
    iam.set_iam_policy()
        .set_resource(topic)
        .set_policy(
            Policy::new()
                .set_bindings(bindings)
                .set_etag(policy.etag.clone()),
        )
        .send()
        .await
        .map_err(|e| {
            CliError::Cloud(format!("cannot grant {member} {PUBLISHER} on {topic}: {e}"))
        })?;
    println!("granted {member} {PUBLISHER} on {topic}");
    Ok(())
}

/// Deletes a split's subscription and topic; what is already gone is fine.
pub(crate) async fn delete(topic: &str) -> Result<(), CliError> {
    let subscription = subscription_of(topic);
    let gone = |e: &google_cloud_gax::error::Error| {
        e.status()
            .is_some_and(|s| s.code == google_cloud_gax::error::rpc::Code::NotFound)
    };
    match client!(SubscriptionAdmin)?
        .delete_subscription()
        .set_subscription(&subscription)
        .send()
        .await
    {
        Ok(()) => {}
        Err(e) if gone(&e) => {}
        Err(e) => {
            return Err(CliError::Cloud(format!(
                "cannot delete the subscription {subscription}: {e}"
            )));
        }
    }
    match client!(TopicAdmin)?
        .delete_topic()
        .set_topic(topic)
        .send()
        .await
    {
        Ok(()) => Ok(()),
        Err(e) if gone(&e) => Ok(()),
        Err(e) => Err(CliError::Cloud(format!(
            "cannot delete the topic {topic}: {e}"
        ))),
    }
}
