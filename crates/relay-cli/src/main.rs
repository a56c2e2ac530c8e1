//! `relay`: check a relay's configuration, sign and send notifications exactly as the DSS did,
//! trace and replay them.
//!
//! Run with `cargo run -p relay-cli -- --help`.

mod allowed;
mod document;
mod error;
mod events;
mod explain;
mod ledger;
mod naming;
mod replay;
mod routes;
mod run;
mod send;
mod split;
mod terminal;
mod trace;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand, ValueEnum};
use relay_core::Config;

use crate::error::CliError;
use crate::terminal::column_width;

#[derive(Debug, Parser)]
#[command(name = "relay", version, about = "DSS notification relay tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Load and validate the relay configuration (RELAY_* variables and the RELAY_CONFIG
    /// file), print it with secrets masked, and exit non-zero on any problem.
    Check {
        /// The configuration file (instead of RELAY_CONFIG).
        #[arg(long)]
        config: Option<String>,
    },
    /// Show, for each route, whether a notification matches and which condition decided it,
    /// and the sinks it would reach.
    Explain(explain::ExplainArgs),
    /// Print a route's pattern as a cloud-side filter over the relay's message attributes, and
    /// say which conditions it cannot express (the printed filter is then broader).
    Export(explain::ExportArgs),
    /// Sign a notification file as the DSS did (draft-cavage hmac-sha256 over `date digest`) and
    /// send it to a relay; print the status and body, and exit non-zero unless it was a 2xx.
    Send(Box<SendArgs>),
    /// Print a new random HMAC secret (32 bytes, hex).
    Keygen,
    /// Show or change the stored routes (RELAY_ROUTES_URL) that running relays add to their
    /// deployed ones, without a redeploy.
    Routes {
        #[command(subcommand)]
        command: routes::RoutesCommand,
    },
    /// Show what became of a bundle's notifications, from the delivery ledger
    /// (RELAY_LEDGER_URL): every attempt, the routes version and split that decided it, each
    /// destination's message id, and the duplicates answered without publishing.
    Trace(trace::TraceArgs),
    /// Look after the delivery ledger's store: copy an earlier release's DynamoDB table into
    /// this release's layout.
    Ledger {
        #[command(subcommand)]
        command: ledger::LedgerCommand,
    },
    /// List the archived notifications of a window with where each stands now (delivered, in
    /// progress, undelivered, refused on arrival, filtered), by destination and source, and
    /// count them: what `relay replay` would find, before it sends.
    Events(Box<events::EventsArgs>),
    /// Send archived notifications (RELAY_ARCHIVE_URL) again: to the routes in effect now, to
    /// one destination or a split; through the ledger, so running it twice sends nothing twice.
    Replay(Box<replay::ReplayArgs>),
    /// Send a slice of the live notification stream to your own queue for a while.
    Split {
        #[command(subcommand)]
        command: split::SplitCommand,
    },
}

/// How the notification is put in the body, as a DSS subscription's `encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Encoding {
    /// `application/json`: the file is the body.
    Json,
    /// `multipart/form-data`: the file is one form field, after the `--form-field`s.
    Multipart,
}

/// The subscription's `method`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum HttpMethod {
    Post,
    Put,
}

#[derive(Debug, clap::Args)]
struct SendArgs {
    /// The notification JSON file; its bytes are sent unchanged.
    file: PathBuf,
    /// The relay's URL (the subscription's callback_url).
    #[arg(long)]
    url: String,
    /// HTTP method.
    #[arg(long, value_enum, default_value = "post")]
    method: HttpMethod,
    /// Body encoding.
    #[arg(long, value_enum, default_value = "json")]
    encoding: Encoding,
    /// Multipart form field that carries the notification (the subscription's payload_form_field).
    #[arg(long, default_value = relay_core::config::DEFAULT_PAYLOAD_FIELD)]
    payload_field: String,
    /// Extra static multipart field NAME=VALUE (the subscription's form_fields); repeatable.
    #[arg(long = "form-field", value_name = "NAME=VALUE", value_parser = parse_pair)]
    form_fields: Vec<(String, String)>,
    /// The keyId to sign with (the subscription's hmac_key_id); defaults to the DSS default,
    /// `hca-dss:<subscription_id>`.
    #[arg(long)]
    key_id: Option<String>,
    /// The HMAC secret (the subscription's hmac_secret_key).
    #[arg(
        long,
        env = "RELAY_SEND_SECRET",
        hide_env_values = true,
        conflicts_with = "secret_file"
    )]
    secret: Option<String>,
    /// Read the HMAC secret from this file (surrounding whitespace is ignored).
    #[arg(long)]
    secret_file: Option<PathBuf>,
    /// Send without Date, Digest and Authorization, as an unsigned subscription does.
    #[arg(long, conflicts_with_all = ["secret", "secret_file", "key_id"])]
    unsigned: bool,
    /// Sign as this sender does instead of as the DSS: rfc9421, standard-webhooks, github,
    /// stripe, slack, shopify or hmac (its defaults: the raw body, hex, in X-Signature). The
    /// file's bytes are the body, sent as they are.
    #[arg(long, value_parser = parse_scheme, conflicts_with = "source")]
    scheme: Option<relay_core::source::SchemeName>,
    /// Sign as the source of this name in the relay's configuration does (its scheme and
    /// options, and its secret_env variable when no secret is given).
    #[arg(long)]
    source: Option<String>,
    /// The relay's configuration file, for --source (default: RELAY_CONFIG).
    #[arg(long, requires = "source")]
    config: Option<String>,
    /// The delivery id, for the schemes that send one (GitHub, Shopify, Standard Webhooks, an
    /// hmac source's id_header); a random one by default.
    #[arg(long)]
    id: Option<String>,
    /// The body's Content-Type for --scheme and --source.
    #[arg(long, default_value = "application/json")]
    content_type: String,
    /// Extra request header NAME:VALUE, e.g. `X-dss-notify-attempt:0`; repeatable.
    #[arg(long = "header", value_name = "NAME:VALUE", value_parser = parse_header)]
    headers: Vec<(String, String)>,
    /// Seconds to wait for the answer.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
}

fn parse_scheme(s: &str) -> Result<relay_core::source::SchemeName, CliError> {
    s.parse().map_err(CliError::Invalid)
}

fn parse_pair(s: &str) -> Result<(String, String), CliError> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| CliError::Invalid(format!("expected NAME=VALUE, got {s:?}")))
}

fn parse_header(s: &str) -> Result<(String, String), CliError> {
    s.split_once(':')
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .ok_or_else(|| CliError::Invalid(format!("expected NAME:VALUE, got {s:?}")))
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    if let Err(error) = fetch_config_file(&matches) {
        eprintln!("relay: {error}");
        return ExitCode::from(2);
    }
    match cli.command {
        Command::Check { config } => check(config),
        Command::Explain(args) => explain::run(&args),
        Command::Export(args) => explain::export(&args),
        Command::Routes { command } => routes::routes(command),
        Command::Split { command } => split::split(command),
        Command::Trace(args) => trace::run(&args),
        Command::Ledger { command } => ledger::run(&command),
        Command::Events(args) => events::run(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Send(args) => run::finish("send", send::run(&args), 2, |code| code),
        Command::Keygen => {
            let mut key = [0u8; 32];
            if let Err(e) = getrandom::fill(&mut key) {
                eprintln!("relay keygen: no randomness available: {e}");
                return ExitCode::from(2);
            }
            println!(
                "{}",
                key.iter().map(|b| format!("{b:02x}")).collect::<String>()
            );
            ExitCode::SUCCESS
        }
    }
}

/// Reads the configuration document from Secrets Manager, once, when the command's `--config`
/// (or else `RELAY_CONFIG`) names a secret rather than a file, as the relays do at start.
fn fetch_config_file(matches: &clap::ArgMatches) -> Result<(), CliError> {
    let mut command = matches;
    let given = loop {
        if let Ok(Some(path)) = command.try_get_one::<String>("config") {
            break Some(path.clone());
        }
        match command.subcommand() {
            Some((_, inner)) => command = inner,
            None => break None,
        }
    };
    let value = given.or_else(|| std::env::var("RELAY_CONFIG").ok());
    if !value
        .as_deref()
        .is_some_and(relay_core::config::is_secret_arn)
    {
        return Ok(());
    }
    run::on_this_thread(async {
        relay_core::bootstrap::fetch_config_file(value.as_deref())
            .await
            .map_err(CliError::from)
    })
}

/// The environment, with `RELAY_CONFIG` replaced by `config` when given.
pub(crate) fn env_with_config(config: Option<&str>) -> impl Fn(&str) -> Option<String> + '_ {
    move |name| match (name, config) {
        ("RELAY_CONFIG", Some(path)) => Some(path.to_owned()),
        _ => std::env::var(name).ok(),
    }
}

fn check(config: Option<String>) -> ExitCode {
    let unknown = Config::unknown_vars(std::env::vars().map(|(name, _)| name));
    for name in &unknown {
        eprintln!("warning: {name} is not a variable the relay reads (a typo?)");
    }
    match Config::from_vars(env_with_config(config.as_deref())) {
        Ok(config) => {
            println!("configuration is valid; effective settings:");
            let lines = config.effective();
            let width = lines.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
            for (name, value) in lines {
                println!("  {name:<width$}  {value}");
            }
            print_sources(&config);
            let routes = stored_routes(&config);
            let ledger = trace::check_ledger(&config);
            if routes == ExitCode::SUCCESS {
                ledger
            } else {
                routes
            }
        }
        Err(errors) => {
            eprintln!("{errors}");
            ExitCode::FAILURE
        }
    }
}

/// Who may send, on which paths, signed how; and which sources sign no timestamp, so that a
/// captured request can be sent again.
fn print_sources(config: &Config) {
    use relay_core::source::{SchemeName, SourceKeys};
    if config.sources.is_empty() {
        println!("sources: the DSS on every path (no [sources])");
        return;
    }
    println!("sources:");
    let width = column_width(config.sources.iter().map(|s| s.name.as_str()));
    let scheme_width = column_width(config.sources.iter().map(|s| s.scheme.as_str()));
    for source in &config.sources {
        let paths = match source.paths.is_empty() {
            true => "every other path".to_owned(),
            false => source.paths.join(", "),
        };
        let named = match &source.keys {
            Some(SourceKeys::Dss(ring)) => format!(" ({} named keys)", ring.key_ids().count()),
            _ => String::new(),
        };
        let keys = match (
            &source.secret_env,
            &source.spec.secret_file,
            &source.secret_arn,
        ) {
            (Some(env), _, _) => format!("{env}{named}"),
            (None, Some(path), _) => format!("the file {path}{named}"),
            (None, None, Some(arn)) => format!("{arn}, read at start"),
            (None, None, None) => {
                "the relay's keys (RELAY_HMAC_KEYS, RELAY_HMAC_SECRET)".to_owned()
            }
        };
        let window = match (source.scheme, source.spec.window_secs) {
            (SchemeName::Dss, None) => config.max_clock_skew,
            _ => source.window,
        };
        let clock = match (source.has_timestamp(), window) {
            (true, Some(window)) => format!("signed within {} s", window.as_secs()),
            (true, None) => "Date check off".to_owned(),
            (false, _) => "no signed timestamp".to_owned(),
        };
        println!(
            "  {:<width$}  {:<scheme_width$}  on {paths}; keys from {keys}; {clock}; one event = {}",
            source.name,
            source.scheme.as_str(),
            source.dedup
        );
        let unsigned = source.scheme.unsigned_headers(&source.spec);
        if !unsigned.is_empty() {
            println!(
                "  {:<width$}  not signed: {} (attributes only: never the dedup key)",
                "",
                unsigned.join(", ")
            );
        }
        if !source.has_timestamp() {
            let guard = match config.ledger {
                Some(_) => "the ledger's dedup key keeps it from being published twice",
                None => "without a ledger (RELAY_LEDGER_URL) it is published again",
            };
            println!(
                "  {:<width$}  warning: the {} scheme signs no timestamp, so a captured request can be sent again; {guard}",
                "", source.scheme
            );
        }
    }
}

/// What the relay will do with the stored routes: take them, or keep its last good.
fn stored_routes(config: &Config) -> ExitCode {
    match (&config.routes_url, document::routes_in_effect(config)) {
        (None, _) => ExitCode::SUCCESS,
        (Some(url), Ok((plan, version))) => {
            let version = version.map_or_else(|| "none (no document)".into(), |v| v.0);
            let now = std::time::SystemTime::now();
            let active = plan.splits.iter().filter(|s| now < s.expires_at).count();
            println!(
                "stored routes {url}: version {version}: valid; {} routes, {} splits ({active} active)",
                plan.router.routes().len(),
                plan.splits.len()
            );
            ExitCode::SUCCESS
        }
        (Some(_), Err(problem)) => {
            eprintln!("{problem}");
            eprintln!("a running relay keeps its last good routes until this is fixed");
            ExitCode::FAILURE
        }
    }
}
