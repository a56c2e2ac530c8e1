//! `relay trace`: what became of a bundle's notifications, read from the delivery ledger the
//! relays record in (`RELAY_LEDGER_URL`): every attempt, the routes version and split that
//! decided it, each destination's message id, and the duplicates answered without publishing.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use relay_core::Config;
use relay_core::config::LedgerConfig;
use relay_core::ledger::{Delivery, Entry, LedgerUrl, Lookup, Verdict, epoch_ms};
use serde_json::{Value, json};

mod archive;
mod refused;

use self::archive::archived;

use crate::error::CliError;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["bundle_uuid", "key", "refused"])))]
pub(crate) struct TraceArgs {
    /// The bundle whose notifications to show (every version, event and subscription unless
    /// narrowed below).
    bundle_uuid: Option<String>,
    /// Only this bundle version.
    #[arg(long, requires = "bundle_uuid")]
    version: Option<String>,
    /// Only this subscription.
    #[arg(long, requires = "bundle_uuid")]
    subscription: Option<String>,
    /// Only this event type (CREATE, TOMBSTONE, DELETE).
    #[arg(long, requires = "bundle_uuid")]
    event_type: Option<String>,
    /// One notification by its ledger key: the `dedup_key` of the relay's answers (or, with
    /// RELAY_LEDGER_KEY=bundle_event, the bundle-and-event key). A DynamoDB ledger finds a key
    /// within its bundle: give the bundle uuid too.
    #[arg(long)]
    key: Option<String>,
    /// The requests that verified and were then refused (400 or 415), from the archive
    /// (RELAY_ARCHIVE_URL) rather than the ledger: what `relay replay --refused` would send.
    #[arg(long, conflicts_with_all = ["bundle_uuid", "key", "ledger"])]
    refused: bool,
    /// With --refused: the start of the window, a time (2026-12-01T08:00:00Z) or a duration ago
    /// (default: 24h).
    #[arg(long, value_name = "TIME_OR_AGO")]
    since: Option<String>,
    /// The ledger, instead of the RELAY_LEDGER_URL the relay's configuration gives.
    #[arg(long, value_name = "URL")]
    ledger: Option<String>,
    /// The configuration file (instead of RELAY_CONFIG).
    #[arg(long)]
    config: Option<String>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

/// Runs `relay trace`: 0 when something was found, 1 when nothing was, 2 on an error.
pub(crate) fn run(args: &TraceArgs) -> ExitCode {
    let answer = crate::run::on_this_thread(trace(args));
    crate::run::finish("trace", answer, 2, |found| match found {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    })
}

/// `relay check`'s line about the ledger: whether it answers a lookup (the relay answers 503
/// to every notification while it does not).
pub(crate) fn check_ledger(config: &Config) -> ExitCode {
    let Some(ledger) = &config.ledger else {
        return ExitCode::SUCCESS;
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("ledger {}: cannot check: {e}", ledger.url);
            return ExitCode::FAILURE;
        }
    };
    let probe = Lookup::Key {
        key: "0".repeat(64),
        bundle: Some("0".repeat(36)),
    };
    let answer = runtime.block_on(async {
        let store = relay_core::ledger::open(&ledger.url, &relay_core::cloud::Cloud::default())
            .await
            .map_err(|e| (e, "the relay does not start until this is fixed"))?;
        store.find(&probe).await.map_err(|e| {
            (
                e,
                "a running relay answers 503 ledger_unavailable until this is fixed",
            )
        })
    });
    match answer {
        Ok(_) => {
            println!(
                "ledger {}: answers; key {}, kept {} s after the last attempt{}",
                ledger.url,
                ledger.key,
                ledger.retention.as_secs(),
                if ledger.record_filtered {
                    ", filtered notifications recorded"
                } else {
                    ""
                }
            );
            ExitCode::SUCCESS
        }
        Err((e, consequence)) => {
            eprintln!("ledger {}: {e}", ledger.url);
            eprintln!("{consequence}");
            ExitCode::FAILURE
        }
    }
}

/// The ledger named by `flag` (`--ledger`, `--to`), else by the relay's configuration.
pub(crate) fn ledger_url(
    (flag, url): (&str, Option<&str>),
    config: Option<&str>,
) -> Result<LedgerUrl, CliError> {
    if let Some(url) = url {
        return url
            .parse()
            .map_err(|e| CliError::Invalid(format!("{flag}: {e}")));
    }
    let ledger = LedgerConfig::from_vars(crate::env_with_config(config))
        .map_err(|e| CliError::Invalid(format!("{e}\n(or name the ledger with {flag} URL)")))?;
    ledger.map(|l| l.url).ok_or_else(|| {
        CliError::Invalid(format!(
            "no ledger is configured: set RELAY_LEDGER_URL (or [relay] ledger_url), or pass {flag} URL"
        ))
    })
}

async fn trace(args: &TraceArgs) -> Result<bool, CliError> {
    if args.since.is_some() && !args.refused {
        return Err(CliError::invalid(
            "--since reads the archive's refused requests: pass it with --refused",
        ));
    }
    if args.refused {
        let since = args.since.as_deref().unwrap_or("24h");
        return refused::trace(args.config.as_deref(), since, args.json).await;
    }
    let url = ledger_url(("--ledger", args.ledger.as_deref()), args.config.as_deref())?;
    let ledger = relay_core::ledger::open_read_only(&url)
        .await
        .map_err(|e| CliError::at(&url, e))?;
    let lookup = match (&args.key, &args.bundle_uuid) {
        (Some(key), bundle) => Lookup::Key {
            key: key.clone(),
            bundle: bundle.clone(),
        },
        (None, Some(uuid)) => Lookup::Bundle(uuid.clone()),
        (None, None) => unreachable!("clap requires one"),
    };
    let mut entries = ledger
        .find(&lookup)
        .await
        .map_err(|e| CliError::at(&url, e))?;
    entries.retain(|e| {
        let id = &e.identity;
        (args.bundle_uuid.as_ref()).is_none_or(|b| *b == id.bundle_uuid)
            && args
                .version
                .as_ref()
                .is_none_or(|v| *v == id.bundle_version)
            && args
                .subscription
                .as_ref()
                .is_none_or(|s| *s == id.subscription_id)
            && args
                .event_type
                .as_ref()
                .is_none_or(|t| id.event_type.as_ref() == Some(t))
    });
    // Oldest notification first.
    entries.sort_by_key(|e| e.first_at_ms().unwrap_or(i64::MAX));
    let now = epoch_ms(SystemTime::now());
    let archived = archived(args, &entries).await;
    let names = Names::of(args);
    if args.json {
        let all: Vec<Value> = (entries.iter().zip(&archived))
            .map(|(e, a)| {
                let mut value = to_json(e, now, &names);
                value["archive"] = a.as_ref().map_or(Value::Null, |a| a.to_json());
                value
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&all).expect("JSON values serialize")
        );
    } else if entries.is_empty() {
        eprintln!(
            "relay trace: nothing in {url} for {}",
            crate::terminal::safe(&describe(&lookup))
        );
    } else {
        for (i, (entry, archive)) in entries.iter().zip(&archived).enumerate() {
            if i > 0 {
                println!();
            }
            print!("{}", crate::terminal::safe(&to_table(entry, now, &names)));
            if let Some(archive) = archive {
                println!("{}", crate::terminal::safe(&archive.line()));
            }
        }
    }
    Ok(!entries.is_empty())
}

/// The configured name of each resource the configuration delivers to, so that a destination
/// shows as `<name> <resource>`; none where the configuration cannot be read.
struct Names(std::collections::BTreeMap<String, String>);

impl Names {
    fn of(args: &TraceArgs) -> Self {
        let Ok(config) = Config::from_vars(crate::env_with_config(args.config.as_deref())) else {
            return Self(Default::default());
        };
        let sinks = config
            .sinks
            .iter()
            .map(|s| (s.target.resource(), s.name.clone()));
        let archive = config
            .archive
            .iter()
            .map(|a| (a.url.resource(), relay_core::archive::SINK_NAME.to_owned()));
        Self(sinks.chain(archive).collect())
    }

    /// `destination` as the ledger names it, with its configured name when it has one.
    fn show(&self, destination: &str) -> String {
        match self.0.get(destination) {
            Some(name) => format!("{name} {destination}"),
            None => destination.to_owned(),
        }
    }
}

fn describe(lookup: &Lookup) -> String {
    match lookup {
        Lookup::Key { key, .. } => format!("the key {key}"),
        Lookup::Bundle(uuid) => format!("the bundle {uuid}"),
    }
}

/// A time in milliseconds since the epoch, as RFC 3339 to the second.
fn time(ms: i64) -> String {
    match u64::try_from(ms) {
        Ok(ms) => {
            humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
        }
        Err(_) => format!("{ms} ms before 1970"),
    }
}

fn verdict_name(verdict: Option<Verdict>) -> &'static str {
    match verdict {
        Some(Verdict::Filtered) => "filtered",
        Some(Verdict::Duplicate) => "duplicate",
        Some(Verdict::Published) => "published",
        Some(Verdict::Failed) => "failed",
        Some(Verdict::InProgress) => "in progress",
        Some(Verdict::Interrupted) => "interrupted",
        None => "-",
    }
}

/// What one attempt did, in a few words: each destination it published to and its result.
fn outcome_text(entry: &Entry, index: usize, now: i64, names: &Names) -> String {
    let verdict = entry.verdict(index, now);
    let Some(outcome) = entry.attempt(index).and_then(|a| a.outcome.as_ref()) else {
        return verdict_name(verdict).to_owned();
    };
    let each: Vec<String> = outcome
        .iter()
        .map(|(sink, delivery)| match delivery {
            Delivery::Acknowledged {
                carried_from: Some(from),
                ..
            } => format!("{} ok (recorded as {from})", names.show(sink)),
            Delivery::Acknowledged { .. } => format!("{} ok", names.show(sink)),
            Delivery::Failed { retryable, error } => {
                let kind = if *retryable { "retryable" } else { "permanent" };
                format!("{} {kind}: {error}", names.show(sink))
            }
        })
        .collect();
    format!("{}: {}", verdict_name(verdict), each.join("; "))
}

fn to_table(entry: &Entry, now: i64, names: &Names) -> String {
    let id = &entry.identity;
    let mut out = format!(
        "bundle {} version {} event {} subscription {}\n",
        id.bundle_uuid,
        id.bundle_version,
        id.event_type.as_deref().unwrap_or("(v1)"),
        id.subscription_id
    );
    let expired = match entry.is_expired(now) {
        true => " (expired: a new attempt starts afresh)",
        false => "",
    };
    out += &format!(
        "dedup key {}; ledger key {}; kept until {}{expired}\n",
        id.dedup_key,
        entry.key,
        time(entry.expires_at.saturating_mul(1000))
    );
    let mut destinations = vec![[
        "DESTINATION".to_owned(),
        "MESSAGE ID".to_owned(),
        "ACKNOWLEDGED".to_owned(),
        "BY ATTEMPT".to_owned(),
    ]];
    let mut routed: Vec<&String> = entry.attempts.iter().flat_map(|a| &a.routed).collect();
    routed.sort_unstable();
    routed.dedup();
    for name in routed {
        let row = match entry.acks.get(name) {
            Some(ack) => [
                names.show(name),
                ack.message_id.clone().unwrap_or_else(|| "-".into()),
                time(ack.at_ms),
                (ack.attempt + 1).to_string(),
            ],
            None => [names.show(name), "-".into(), "not yet".into(), "-".into()],
        };
        destinations.push(row);
    }
    out += &columns(&destinations);
    let mut attempts = vec![[
        "#".to_owned(),
        "TIME".to_owned(),
        "ROUTES VERSION".to_owned(),
        "SPLIT".to_owned(),
        "OUTCOME".to_owned(),
    ]];
    for (i, attempt) in entry.kept().zip(&entry.attempts) {
        attempts.push([
            (i + 1).to_string(),
            time(attempt.at_ms),
            attempt.routes_version.clone().unwrap_or_else(|| "-".into()),
            attempt.split.clone().unwrap_or_else(|| "-".into()),
            outcome_text(entry, i, now, names),
        ]);
    }
    out += &columns(&attempts);
    let (attempts, duplicates) = (entry.kept().end, entry.duplicates(now));
    let folded = match entry.folded {
        0 => String::new(),
        n => format!(
            " ({n} earliest folded: only the last {} are kept)",
            entry.attempts.len()
        ),
    };
    out += &format!(
        "{attempts} {}{folded}; {duplicates} {} answered without publishing\n",
        if attempts == 1 { "attempt" } else { "attempts" },
        if duplicates == 1 {
            "duplicate"
        } else {
            "duplicates"
        },
    );
    out
}

/// Rows as left-aligned columns, two spaces apart, indented by two.
fn columns<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::from(" ");
        for (i, (w, cell)) in widths.iter().zip(row).enumerate() {
            line.push(' ');
            line.push_str(cell);
            if i + 1 < N {
                line.push_str(&" ".repeat(w - cell.chars().count() + 1));
            }
        }
        out += line.trim_end();
        out.push('\n');
    }
    out
}

fn to_json(entry: &Entry, now: i64, names: &Names) -> Value {
    let destinations: serde_json::Map<String, Value> = entry
        .acks
        .iter()
        .map(|(name, ack)| {
            let value = json!({
                "sink": names.0.get(name),
                "message_id": ack.message_id,
                "acknowledged_at": time(ack.at_ms),
                "attempt": ack.attempt + 1,
            });
            (name.clone(), value)
        })
        .collect();
    let attempts: Vec<Value> = entry
        .kept()
        .zip(&entry.attempts)
        .map(|(i, a)| {
            json!({
                "attempt": i + 1,
                "at": time(a.at_ms),
                "routes_version": a.routes_version,
                "split": a.split,
                "routed": a.routed,
                "verdict": entry.verdict(i, now),
                "outcome": a.outcome,
            })
        })
        .collect();
    json!({
        "ledger_key": entry.key,
        "dedup_key": entry.identity.dedup_key,
        "subscription_id": entry.identity.subscription_id,
        "bundle_uuid": entry.identity.bundle_uuid,
        "bundle_version": entry.identity.bundle_version,
        "event_type": entry.identity.event_type,
        "kept_until": time(entry.expires_at.saturating_mul(1000)),
        "expired": entry.is_expired(now),
        "acknowledged": destinations,
        "attempts": attempts,
        "folded_attempts": entry.folded,
        "duplicates": entry.duplicates(now),
    })
}
