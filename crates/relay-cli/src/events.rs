//! `relay events`: the archived notifications of a window, each with where it stands now with
//! every destination the routes in effect send it to (delivered, in progress, undelivered, from
//! the ledger), or refused on arrival; narrowed by status, destination and source, and counted
//! per destination: what a bulk `relay replay` would find, before it sends.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::StreamExt as _;
use relay_core::archive::Record;
use relay_core::relay::{ReplayError, Standing};
use relay_core::{Config, Relay};
use serde::Serialize;
use serde_json::json;

use crate::error::CliError;
use crate::replay::{Read1, kept_since, list, records, window};
use crate::terminal::safe;

/// A notification's standing, as `--status` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    /// Every destination acknowledged it.
    Delivered,
    /// None is left undelivered, and an attempt holds one now.
    #[value(name = "in_progress", alias = "in-progress")]
    InProgress,
    /// A destination never acknowledged it: `relay replay --undelivered` sends it.
    Undelivered,
    /// It verified and was refused (400 or 415) on arrival, and is not delivered since:
    /// `relay replay --refused` sends it once the configuration takes it.
    Refused,
    /// No route in effect takes it.
    Filtered,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::InProgress => "in_progress",
            Self::Undelivered => "undelivered",
            Self::Refused => "refused",
            Self::Filtered => "filtered",
        }
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct EventsArgs {
    /// Start of the window, by receipt time: a time (2026-12-01T08:00:00Z) or a duration ago
    /// (90m, 24h, 7d); default: as far back as the ledger keeps entries (and the archive
    /// records), the window `relay replay --undelivered` takes.
    #[arg(long, value_name = "TIME_OR_AGO")]
    since: Option<String>,
    /// End of the window, the same way (default: now).
    #[arg(long, value_name = "TIME_OR_AGO")]
    until: Option<String>,
    /// Only notifications of this standing; repeatable.
    #[arg(long, value_enum)]
    status: Vec<Status>,
    /// Only notifications the routes in effect send to this destination (a sink's name, or
    /// `split:<name>`); the counts are this destination's.
    #[arg(long, value_name = "NAME")]
    destination: Option<String>,
    /// Only this source's (`dss`, or a `[sources.<name>]`).
    #[arg(long, value_name = "NAME")]
    source: Option<String>,
    /// Only this bundle's.
    #[arg(long, value_name = "UUID")]
    bundle: Option<String>,
    /// Print the counts only (and exit 0 when none matched).
    #[arg(long)]
    count: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// The configuration file (instead of RELAY_CONFIG).
    #[arg(long)]
    config: Option<String>,
}

/// One archived notification and where it stands.
#[derive(Debug, Serialize)]
struct Event {
    received_at: String,
    key: String,
    source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    event_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    subscription_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bundle_uuid: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bundle_version: Option<String>,
    status: Status,
    destinations: BTreeMap<String, Standing>,
    /// A refused request's code on arrival.
    #[serde(skip_serializing_if = "Option::is_none")]
    refused: Option<String>,
}

/// What reading the window found besides events.
#[derive(Debug, Default)]
struct Found {
    events: Vec<Event>,
    /// Objects that are not records sealed with the archive's key.
    not_records: usize,
    failed: usize,
}

/// Runs `relay events`: 0 when some notification matched (with `--count`, always), 1 when none
/// did, 2 on an error.
pub(crate) fn run(args: &EventsArgs) -> ExitCode {
    let answer = crate::run::on_two_workers(events(args));
    crate::run::finish("events", answer, 2, |found| {
        print(args, &found);
        // With --count the count is the answer, none included.
        match (found.failed, found.events.is_empty() && !args.count) {
            (0, false) => ExitCode::SUCCESS,
            (0, true) => ExitCode::FAILURE,
            _ => ExitCode::from(2),
        }
    })
}

async fn events(args: &EventsArgs) -> Result<Found, CliError> {
    let config = Config::for_replay(crate::env_with_config(args.config.as_deref()))
        .map_err(CliError::from)?;
    if config.ledger.is_none() {
        return Err(CliError::invalid(
            "RELAY_LEDGER_URL is not set: where a notification stands is read from the ledger",
        ));
    }
    let archive_url = config
        .archive
        .as_ref()
        .map(|a| a.url.clone())
        .ok_or(CliError::NoArchive)?;
    let (since, until) = window(
        &config,
        args.since.as_deref(),
        args.until.as_deref(),
        |now| Ok(kept_since(&config, now).unwrap_or(UNIX_EPOCH)),
    )?;
    let (archive, relay) = crate::replay::opened(&archive_url, config).await?;
    if let Some(name) = &args.destination {
        crate::replay::known_destination(&relay, "--destination", name, |_| false)?;
    }
    let keys = list(archive.as_ref(), &archive_url.to_string(), since, until).await?;
    let window = (since, until);
    let max_body_bytes = relay.config().max_body_bytes;
    let mut results = records(archive.as_ref(), keys, max_body_bytes)
        .map(|record| {
            let relay = &relay;
            async move { one(relay, window, record).await }
        })
        .buffered(32);
    let mut found = Found::default();
    while let Some(result) = results.next().await {
        match result {
            Ok(Some(event)) if takes(args, &event) => found.events.push(event),
            Ok(_) => {}
            Err(Unread::NotRecord(key, e)) => {
                eprintln!("relay events: {}: not a record: {}", safe(&key), safe(&e));
                found.not_records += 1;
            }
            Err(Unread::Failed(key, e)) => {
                eprintln!("relay events: {}: {}", safe(&key), safe(&e));
                found.failed += 1;
            }
        }
    }
    Ok(found)
}

/// Why an object gave no event.
enum Unread {
    NotRecord(String, String),
    Failed(String, String),
}

/// The event one archived record holds, if it is in the window.
async fn one(
    relay: &Relay,
    (since, until): (SystemTime, SystemTime),
    record: Read1,
) -> Result<Option<Event>, Unread> {
    let key = record.name;
    let bytes = match record.read {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(e) => return Err(Unread::Failed(key, e.to_string())),
    };
    let sealed_with = relay
        .archive_key()
        .expect("a relay with an archive has its key");
    let record = Record::open(sealed_with, &bytes)
        .map_err(|e| Unread::NotRecord(key.clone(), e.to_string()))?;
    if record.received_at < since || record.received_at > until {
        return Ok(None);
    }
    let standing = match relay.standing(&record).await {
        Ok(standing) => Some(standing),
        Err(ReplayError::Refused(_) | ReplayError::Malformed(_)) if record.refused.is_some() => {
            None
        }
        Err(e) => return Err(Unread::Failed(key, e.to_string())),
    };
    Ok(Some(event_of(&record, standing)))
}

/// The event of `record`, standing as `standing` says (none: refused again by the
/// configuration in effect).
fn event_of(record: &Record, standing: Option<Vec<(String, Standing)>>) -> Event {
    let attribute = |name: &str| record.attribute(name).map(str::to_owned);
    let still_refused = standing.is_none();
    let destinations: BTreeMap<String, Standing> =
        standing.unwrap_or_default().into_iter().collect();
    // The worst standing of any destination.
    let worst = destinations.values().max().copied();
    let status = match (worst, record.refused.is_some() || still_refused) {
        (Some(Standing::Delivered), _) => Status::Delivered,
        (_, true) => Status::Refused,
        (None, false) => Status::Filtered,
        (Some(Standing::InProgress), false) => Status::InProgress,
        (Some(Standing::Undelivered), false) => Status::Undelivered,
    };
    Event {
        received_at: humantime::format_rfc3339_seconds(record.received_at).to_string(),
        key: record.dedup_key.clone(),
        source: attribute("relay.source").unwrap_or_else(|| "dss".into()),
        event_type: attribute("dss.event_type").or_else(|| attribute("relay.event_type")),
        subscription_id: attribute("dss.subscription_id"),
        bundle_uuid: attribute("dss.bundle_uuid"),
        bundle_version: attribute("dss.bundle_version"),
        status,
        destinations,
        refused: record.refused.as_ref().map(|r| r.code.clone()),
    }
}

/// Whether the command's filters take `event`.
fn takes(args: &EventsArgs, event: &Event) -> bool {
    (args.status.is_empty() || args.status.contains(&event.status))
        && args
            .destination
            .as_ref()
            .is_none_or(|d| event.destinations.contains_key(d))
        && args.source.as_ref().is_none_or(|s| *s == event.source)
        && args
            .bundle
            .as_ref()
            .is_none_or(|b| event.bundle_uuid.as_ref() == Some(b))
}

/// How many of each, by name.
type Counts = BTreeMap<&'static str, usize>;

/// The counts: notifications per status, and per destination per standing.
fn counts(args: &EventsArgs, events: &[Event]) -> (Counts, BTreeMap<String, Counts>) {
    let mut statuses = Counts::new();
    let mut destinations: BTreeMap<String, Counts> = BTreeMap::new();
    for event in events {
        *statuses.entry(event.status.name()).or_default() += 1;
        for (name, standing) in &event.destinations {
            if args.destination.as_ref().is_some_and(|d| d != name) {
                continue;
            }
            *destinations
                .entry(name.clone())
                .or_default()
                .entry(standing.name())
                .or_default() += 1;
        }
    }
    (statuses, destinations)
}

fn print(args: &EventsArgs, found: &Found) {
    let (statuses, destinations) = counts(args, &found.events);
    if args.json {
        let mut out = json!({
            "count": found.events.len(),
            "statuses": statuses,
            "destinations": destinations,
            "not_records": found.not_records,
        });
        if !args.count {
            out["events"] = json!(found.events);
        }
        println!("{out}");
        return;
    }
    if !args.count {
        for event in &found.events {
            println!("{}", safe(&line(event)));
        }
    }
    let by_status: Vec<String> = statuses.iter().map(|(s, n)| format!("{n} {s}")).collect();
    println!(
        "{} notification{}{}{}",
        found.events.len(),
        if found.events.len() == 1 { "" } else { "s" },
        if by_status.is_empty() { "" } else { ": " },
        by_status.join(", ")
    );
    for (name, standings) in &destinations {
        let counts: Vec<String> = standings.iter().map(|(s, n)| format!("{n} {s}")).collect();
        println!("  {}: {}", safe(name), counts.join(", "));
    }
    if found.not_records > 0 {
        println!(
            "{} objects in the window are not records of this archive's key (relay replay refuses them)",
            found.not_records
        );
    }
}

/// An event's line: when, what, its status, and each destination's standing.
fn line(event: &Event) -> String {
    let what = match (&event.bundle_uuid, &event.bundle_version) {
        (Some(uuid), Some(version)) => format!("{uuid}.{version}"),
        (Some(uuid), None) => uuid.clone(),
        _ => event.key.clone(),
    };
    let destinations: Vec<String> = event
        .destinations
        .iter()
        .map(|(name, standing)| format!("{name}={}", standing.name()))
        .collect();
    let mut line = format!(
        "{}  {:<11}  {}  {}  {}",
        event.received_at,
        event.status.name(),
        event.source,
        event.event_type.as_deref().unwrap_or("-"),
        what
    );
    if let Some(code) = &event.refused {
        line.push_str(&format!("  refused on arrival: {code}"));
    }
    if !destinations.is_empty() {
        line.push_str(&format!("  {}", destinations.join(" ")));
    }
    line
}
