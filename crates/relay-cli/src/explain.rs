//! `relay explain`: what the routes decide for one notification, without sending it; and
//! `relay export`: a route as a cloud-side filter.

use std::process::ExitCode;

use bytes::Bytes;
use relay_core::route::{FilterLanguage, Input, request_document};
use relay_core::sink::SinkConfig;
use relay_core::transform::{Limits, Program};
use relay_core::{Config, Notification};

use crate::error::CliError;
use crate::terminal::column_width;

#[derive(Debug, clap::Args)]
pub(crate) struct ExplainArgs {
    /// The configuration file (instead of RELAY_CONFIG).
    #[arg(long)]
    config: Option<String>,
    /// The notification JSON file.
    notification: std::path::PathBuf,
    /// The request path the notification arrives on.
    #[arg(long, default_value = "/")]
    path: String,
    /// The request's query string, e.g. `replica=gcp`.
    #[arg(long)]
    query: Option<String>,
    /// A request header NAME:VALUE; repeatable.
    #[arg(long = "header", value_name = "NAME:VALUE", value_parser = crate::parse_header)]
    headers: Vec<(String, String)>,
    /// Also print what each destination would receive: its transform's body, or why it has
    /// none, or the payload unchanged.
    #[arg(long)]
    transform: bool,
}

/// The filter languages `relay export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Language {
    /// An SNS subscription filter policy over message attributes.
    SnsFilterPolicy,
    /// A Pub/Sub subscription filter.
    PubsubFilter,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// The configuration file (instead of RELAY_CONFIG).
    #[arg(long)]
    config: Option<String>,
    /// The route to export.
    #[arg(long)]
    route: String,
    /// The filter language.
    #[arg(long = "as", value_enum)]
    language: Language,
}

pub(crate) fn export(args: &ExportArgs) -> ExitCode {
    let config = match load(args.config.as_deref()) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("relay export: {message}");
            return ExitCode::from(2);
        }
    };
    let Some(route) = config.router.routes().iter().find(|r| r.name == args.route) else {
        let names: Vec<&str> = config
            .router
            .routes()
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        eprintln!(
            "relay export: no route {:?}; routes are {names:?}",
            args.route
        );
        return ExitCode::from(2);
    };
    if route.fallback {
        eprintln!(
            "relay export: {:?} is a fallback route: it matches what other routes did not, which no filter can say",
            route.name
        );
        return ExitCode::FAILURE;
    }
    let language = match args.language {
        Language::SnsFilterPolicy => FilterLanguage::SnsFilterPolicy,
        Language::PubsubFilter => FilterLanguage::PubSubFilter,
    };
    let sent = config.sent_by_route(route);
    let sent: Vec<&str> = sent.iter().map(String::as_str).collect();
    let exported = route.pattern.export(language, &sent);
    for line in &exported.left_out {
        eprintln!("left out: {line}");
    }
    match exported.filter {
        Some(filter) => {
            println!("{filter}");
            if !exported.left_out.is_empty() {
                eprintln!(
                    "The filter above is broader than route {:?}: the relay still applies the conditions left out.",
                    route.name
                );
            }
            ExitCode::SUCCESS
        }
        None => {
            eprintln!(
                "relay export: no condition of route {:?} can be expressed as this filter",
                route.name
            );
            ExitCode::FAILURE
        }
    }
}

/// The configuration, for commands that need routes but not keys: without any key configured,
/// it is read as unsigned rather than refused.
fn load(config: Option<&str>) -> Result<Config, CliError> {
    let env = crate::env_with_config(config);
    let no_keys = [
        "RELAY_HMAC_KEYS",
        "RELAY_HMAC_SECRET",
        "RELAY_HMAC_KEYS_SECRET_ARN",
    ]
    .iter()
    .all(|name| env(name).is_none());
    Config::from_vars(|name| match name {
        "RELAY_ALLOW_UNSIGNED" if no_keys => Some("true".into()),
        _ => env(name),
    })
    .map_err(CliError::from)
}

pub(crate) fn run(args: &ExplainArgs) -> ExitCode {
    crate::run::finish("explain", explain(args), 2, |text| {
        print!("{text}");
        ExitCode::SUCCESS
    })
}

fn explain(args: &ExplainArgs) -> Result<String, CliError> {
    let config = load(args.config.as_deref())?;
    let payload = std::fs::read(&args.notification).map_err(|e| CliError::Read {
        path: args.notification.display().to_string(),
        source: e,
    })?;
    let notification = Notification::parse(Bytes::from(payload)).map_err(CliError::from)?;

    let headers = header_map(&args.headers)?;
    let request = request_document(&args.path, args.query.as_deref(), &headers);
    let input = Input::new(notification.document(), &request);
    let (plan, version) = crate::document::routes_in_effect(&config)?;
    let now = std::time::SystemTime::now();
    let decision = plan.decide(&input, now);
    // Each route's verdict, which the relay never computes: only the destinations.
    let routing = plan.router.explain(&input);

    let mut out = format!(
        "notification: {} {}, subscription {}, bundle {} version {}\n",
        notification.kind().map_or("", |k| k.as_str()),
        notification.event_type().unwrap_or("(no event_type)"),
        notification.subscription_id().unwrap_or_default(),
        notification.bundle_uuid().unwrap_or_default(),
        notification.bundle_version().unwrap_or_default(),
    );
    if let Some(version) = version {
        out.push_str(&format!("stored routes: version {version}\n"));
    }
    for split in &plan.splits {
        let verdict = if now >= split.expires_at {
            "expired; takes nothing".to_owned()
        } else if decision.split.as_deref() == Some(split.name.as_str()) {
            let how = if split.copy {
                "as well as the routes"
            } else {
                "instead of the routes"
            };
            format!("TAKES it, {how}")
        } else {
            match split.pattern.first_failure(&input) {
                Some(failed) => format!("failed: {failed}"),
                None => "matched, but an earlier split took it".to_owned(),
            }
        };
        out.push_str(&format!("  split {}  {verdict}\n", split.name));
    }
    let width = column_width(routing.verdicts.iter().map(|d| d.route.as_str()));
    for decision in &routing.verdicts {
        let verdict = if decision.matched {
            "MATCH   "
        } else {
            "no match"
        };
        out.push_str(&format!(
            "  {verdict}  {:<width$}  {}\n",
            decision.route, decision.reason
        ));
    }
    let configs: Vec<&SinkConfig> = plan.sink_configs().collect();
    let sinks: Vec<&SinkConfig> = decision.destinations.iter().map(|&i| configs[i]).collect();
    out.push_str(&destinations(&sinks));
    if args.transform {
        for sink in sinks {
            let document = notification.document();
            out.push_str(&received(sink, document, config.transform_timeout));
        }
    }
    Ok(out)
}

/// The `--header` pairs as request headers.
fn header_map(pairs: &[(String, String)]) -> Result<http::HeaderMap, CliError> {
    let mut headers = http::HeaderMap::new();
    for (name, value) in pairs {
        let invalid =
            |e: &dyn std::fmt::Display| CliError::Invalid(format!("--header {name}: {e}"));
        let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|e| invalid(&e))?;
        let value = http::HeaderValue::from_str(value).map_err(|e| invalid(&e))?;
        headers.append(name, value);
    }
    Ok(headers)
}

/// The line naming the destinations a notification goes to, or saying it is filtered.
fn destinations(sinks: &[&SinkConfig]) -> String {
    if sinks.is_empty() {
        return "sinks: none: the relay answers 202 {\"status\":\"filtered\"}\n".to_owned();
    }
    let names: Vec<&str> = sinks.iter().map(|s| s.name.as_str()).collect();
    format!("sinks: {}\n", names.join(", "))
}

/// What `sink` would receive for a notification's `document`: its transform's body, or why it has none;
/// else the payload, unchanged.
fn received(
    sink: &SinkConfig,
    document: &serde_json::Value,
    timeout: std::time::Duration,
) -> String {
    let name = &sink.name;
    let Some(source) = &sink.selection.transform else {
        return format!("{name} receives the payload unchanged\n");
    };
    let program = match Program::compile(source) {
        Ok(program) => program,
        Err(e) => return format!("{name}: the transform does not compile: {e}\n"),
    };
    let limits = Limits {
        timeout,
        max_output: sink.target.max_message_bytes().unwrap_or(1 << 20),
    };
    match program.run(document, limits) {
        Ok(body) => format!("{name} receives {}\n", String::from_utf8_lossy(&body)),
        Err(e) => format!(
            "{name} receives nothing: 502 transform_failed ({}): {e}\n",
            e.code()
        ),
    }
}
