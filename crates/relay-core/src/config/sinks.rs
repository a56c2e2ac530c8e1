//! The destinations of a configuration: the file's `[sinks]` with its `[[routes]]`, or the
//! single-destination variables (`RELAY_SQS_QUEUE_URL`, …), which take every notification;
//! never both.

use super::Settings;

use crate::live::deployed_routes;
use crate::route::{RouteSpec, Router};
use crate::sink::{
    FileSinkConfig, MessageLimit, PubSubConfig, Selection, SinkConfig, SinkSpecs, SnsConfig,
    SqsConfig, Target, Template,
};

/// The sinks, the deployed routes and the router the file's `[sinks]` and `[[routes]]` and the
/// variables (`vars`, read through `var`) describe; every problem through `fail`, those of the
/// file through `in_file`.
pub(super) fn read(
    (file_sinks, file_routes): (&SinkSpecs, &[RouteSpec]),
    vars: &Settings,
    var: &dyn Fn(&str) -> Option<String>,
    fail: &mut impl FnMut(&'static str, String),
    in_file: &impl Fn(String) -> String,
) -> (Vec<SinkConfig>, Vec<RouteSpec>, Option<Router>) {
    let from_variables = sinks_from_variables(&vars.clone().or_defaults());
    let sinks_in_file = !file_sinks.is_empty();
    let mut sinks = Vec::new();
    if !sinks_in_file {
        if !file_routes.is_empty() {
            fail(
                "RELAY_CONFIG",
                in_file("it lists [[routes]] but no [sinks.<name>] for them to name".into()),
            );
        }
        if from_variables.is_empty() {
            fail(
                "RELAY_FILE_SINK",
                "no sink is configured: set RELAY_SQS_QUEUE_URL, RELAY_SNS_TOPIC_ARN, RELAY_PUBSUB_TOPIC or RELAY_FILE_SINK, or name sinks in RELAY_CONFIG".into(),
            );
        }
        sinks = from_variables;
    } else {
        if !from_variables.is_empty() {
            fail(
                "RELAY_CONFIG",
                in_file("it defines [sinks], and sink variables (RELAY_SQS_QUEUE_URL, RELAY_SNS_TOPIC_ARN, RELAY_PUBSUB_TOPIC, RELAY_FILE_SINK) are set too: name sinks in one place".into()),
            );
        }
        for (name, spec) in file_sinks {
            let sink = spec.named(name);
            match sink.target.shape(&sink.selection) {
                Ok(_) => sinks.push(sink),
                Err(e) => fail(
                    "RELAY_CONFIG",
                    in_file(format!("sink {:?}, {e}", sink.name)),
                ),
            }
        }
    }
    let emulator = var("PUBSUB_EMULATOR_HOST").filter(|h| !h.is_empty());
    for sink in &mut sinks {
        if let Target::PubSub(target) = &mut sink.target {
            target.emulator_host.clone_from(&emulator);
        }
    }
    if let Err(e) = crate::sink::check_resources(&sinks) {
        fail("RELAY_CONFIG", in_file(e.to_string()));
    }
    let routes = deployed_routes(file_routes, &sinks);
    let names: Vec<String> = sinks.iter().map(|s| s.name.clone()).collect();
    // Sinks from variables take every notification; sinks in the file take their routes.
    let router = if sinks_in_file {
        Router::compile(file_routes, names)
            .map_err(|e| fail("RELAY_CONFIG", in_file(e.to_string())))
            .ok()
    } else {
        Some(Router::to_all(names))
    };
    (sinks, routes, router)
}

/// The sinks the variables describe, named `file`, `sqs`, `sns` and `pubsub`.
fn sinks_from_variables(vars: &Settings) -> Vec<SinkConfig> {
    let mut targets = Vec::new();
    if let Some(path) = &vars.file_sink {
        targets.push(("file", Target::File(FileSinkConfig { path: path.clone() })));
    }
    if let Some(url) = &vars.sqs_queue_url {
        let mut sqs = SqsConfig::new(url.clone());
        if let Some(limit) = vars.sqs_max_message_bytes {
            sqs.max_message_bytes = MessageLimit(limit);
        }
        targets.push(("sqs", Target::Sqs(sqs)));
    }
    if let Some(arn) = &vars.sns_topic_arn {
        let mut sns = SnsConfig::new(arn.clone());
        if let Some(limit) = vars.sns_max_message_bytes {
            sns.max_message_bytes = MessageLimit(limit);
        }
        targets.push(("sns", Target::Sns(sns)));
    }
    if let Some(topic) = &vars.pubsub_topic {
        let mut pubsub = PubSubConfig::new(topic.clone());
        if let Some(limit) = vars.pubsub_max_message_bytes {
            pubsub.max_message_bytes = MessageLimit(limit);
        }
        if vars.pubsub_ordering.is_some_and(|f| f.0) {
            pubsub.ordering_key =
                Some(Template::parse("{match.bundle_uuid}").expect("a valid template"));
        }
        targets.push(("pubsub", Target::PubSub(pubsub)));
    }
    targets
        .into_iter()
        .map(|(name, target)| SinkConfig {
            name: name.into(),
            target,
            selection: Selection::default(),
        })
        .collect()
}
