//! `relay replay`: sends archived notifications (`RELAY_ARCHIVE_URL`) again, with the relay's
//! own configuration (its variables and `RELAY_CONFIG` file): to the routes in effect now, to
//! one named destination, or to a split; through the ledger, so that the same command run
//! twice publishes nothing the second time, and an interrupted one run again goes on where it
//! stopped.

use std::io::IsTerminal as _;
use std::ops::RangeInclusive;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::StreamExt as _;
use relay_core::archive::{Archive, ArchiveError, ArchiveUrl, Record, RecordError};
use relay_core::relay::{
    ReplayError, ReplayPlan, ReplayRecord, ReplaySelection, ReplayTo, Replayed,
};
use relay_core::route::Pattern;
use relay_core::{Config, Relay};

use sha2::{Digest as _, Sha256};

use crate::error::CliError;
use crate::terminal::safe;

mod pace;
mod summary;
mod window;

use self::pace::{Limiter, Progress};
pub(crate) use self::summary::Summary;
use self::summary::{Result1, print_summary};
pub(crate) use self::window::{Read1, check_window, kept_since, list, parse_time, records, window};

#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// Start of the window, by receipt time: a time (2026-12-01T08:00:00Z) or a duration ago
    /// (90m, 24h, 7d). Required, except with --undelivered and --refused: then as far back as
    /// the ledger keeps entries (and the archive records).
    #[arg(long, value_name = "TIME_OR_AGO")]
    since: Option<String>,
    /// End of the window, the same way (default: now).
    #[arg(long, value_name = "TIME_OR_AGO")]
    until: Option<String>,
    /// Only this bundle's notifications.
    #[arg(long, value_name = "UUID")]
    bundle: Option<String>,
    /// Only this subscription's.
    #[arg(long, value_name = "ID")]
    subscription: Option<String>,
    /// Only this event type's (CREATE, TOMBSTONE, DELETE).
    #[arg(long)]
    event_type: Option<String>,
    /// Only those a route pattern matches (JSON, the vocabulary of `match` in routes).
    #[arg(long = "match", value_name = "PATTERN")]
    pattern: Option<String>,
    /// Only the (notification, destination) pairs the ledger has no acknowledgement for: what
    /// the DSS gave up on. Completes the live entries, so a live retry does not publish them
    /// again either.
    #[arg(long)]
    undelivered: bool,
    /// Only the requests that verified and were then refused (400 or 415) on arrival, opened
    /// again with the configuration in effect: each is sent once it takes them, completing its
    /// live entry, so a second run sends nothing.
    #[arg(long, conflicts_with_all = ["undelivered", "again", "bundle", "subscription", "event_type", "pattern"])]
    refused: bool,
    /// Send every selected notification to this destination (a sink name, or a split's name)
    /// instead of where the routes in effect send it.
    #[arg(long, value_name = "DESTINATION")]
    to: Option<String>,
    /// Print what would be sent, per notification and per destination, and send nothing.
    #[arg(long)]
    dry_run: bool,
    /// Publish even what an earlier run of the same replay published (a new run).
    #[arg(long, conflicts_with = "undelivered")]
    again: bool,
    /// At most this many notifications per second.
    #[arg(long, value_name = "PER_SECOND", value_parser = parse_rate)]
    rate: Option<f64>,
    /// Notifications in flight at once.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=1024))]
    concurrency: u16,
    /// Send without asking: on a terminal, a replay that would send more than
    /// 100 notifications first says how many, to where, and asks.
    #[arg(long, short = 'y')]
    yes: bool,
    /// The configuration file (instead of RELAY_CONFIG).
    #[arg(long)]
    config: Option<String>,
}

/// The most notifications a replay on a terminal sends without asking first.
const CONFIRM_ABOVE: usize = 100;

/// The slowest and the fastest `--rate`: one notification every 100 s, 100,000 a second.
const RATES: std::ops::RangeInclusive<f64> = 0.01..=100_000.0;

fn parse_rate(text: &str) -> Result<f64, CliError> {
    match text.parse::<f64>() {
        Ok(rate) if RATES.contains(&rate) => Ok(rate),
        Ok(rate) if rate.is_finite() && rate > 0.0 => Err(CliError::Invalid(format!(
            "{text}: expected between {} and {} notifications per second",
            RATES.start(),
            RATES.end()
        ))),
        _ => Err(CliError::Invalid(format!(
            "expected a positive number of notifications per second, got {text:?}"
        ))),
    }
}

/// What one replay does, however it was asked for.
#[derive(Clone)]
pub(crate) struct Job {
    /// The receipt times of the records it takes.
    pub(crate) window: RangeInclusive<SystemTime>,
    pub(crate) selection: ReplaySelection,
    /// Only the records of requests refused on arrival (and only those).
    pub(crate) refused: bool,
    pub(crate) plan: ReplayPlan,
    pub(crate) rate: Option<f64>,
    pub(crate) concurrency: usize,
}

/// Runs `relay replay`: 0 when every selected notification was sent or had been, 1 when some
/// failed (the same command sends them later), 2 when nothing could start or the archive holds
/// objects that are not its records.
pub(crate) fn run(args: &ReplayArgs) -> ExitCode {
    let answer = crate::run::on_two_workers(replay(args));
    crate::run::finish("replay", answer, 2, |summary| {
        print_summary(&summary, args.dry_run);
        // Objects that are no records will not be sent by running again: an operator acts.
        match (summary.refused, summary.failed, summary.left) {
            (0, 0, 0) => ExitCode::SUCCESS,
            (0, _, _) => ExitCode::FAILURE,
            _ => ExitCode::from(2),
        }
    })
}

async fn replay(args: &ReplayArgs) -> Result<Summary, CliError> {
    let config = Config::for_replay(crate::env_with_config(args.config.as_deref()))
        .map_err(CliError::from)?;
    let defaults = args.undelivered || args.refused;
    let (since, until) = window(
        &config,
        args.since.as_deref(),
        args.until.as_deref(),
        |now| {
            kept_since(&config, now).filter(|_| defaults).ok_or_else(|| {
            CliError::invalid("--since is required (with --undelivered or --refused and a ledger, it defaults to the ledger's retention)")
        })
        },
    )?;
    let pattern = match &args.pattern {
        Some(text) => Some(compile(text)?),
        None => None,
    };
    let record = match (
        args.undelivered || args.refused,
        args.again,
        config.ledger.is_some(),
    ) {
        (true, _, _) => ReplayRecord::Undelivered,
        (false, true, false) => ReplayRecord::Unrecorded,
        (false, true, true) => ReplayRecord::Run(fresh_run_id()?),
        (false, false, _) => ReplayRecord::Run(run_id(args)),
    };
    if let ReplayRecord::Run(run) = &record {
        eprintln!("replay run {run} (the same command continues it; --again starts a new one)");
    }
    let job = Job {
        window: since..=until,
        selection: ReplaySelection {
            bundle_uuid: args.bundle.clone(),
            subscription_id: args.subscription.clone(),
            event_type: args.event_type.clone(),
            pattern,
        },
        refused: args.refused,
        plan: ReplayPlan {
            to: args
                .to
                .clone()
                .map_or(ReplayTo::Routes, ReplayTo::Destination),
            record,
            dry_run: args.dry_run,
        },
        rate: args.rate,
        concurrency: usize::from(args.concurrency),
    };
    let asks = !args.yes && !args.dry_run && std::io::stdin().is_terminal();
    if asks && !confirmed(&config, &job).await? {
        return Err(CliError::invalid("not confirmed: nothing sent"));
    }
    run_job(config, job).await
}

/// Whether to go on: a dry run of `job` counts what it would send, and above
/// [`CONFIRM_ABOVE`] notifications the operator is asked.
async fn confirmed(config: &Config, job: &Job) -> Result<bool, CliError> {
    let mut preview = job.clone();
    preview.plan.dry_run = true;
    preview.rate = None;
    let summary = run_job(config.clone(), preview).await?;
    if summary.notifications_sent <= CONFIRM_ABOVE {
        return Ok(true);
    }
    let to: Vec<String> = summary
        .sent
        .iter()
        .map(|(name, n)| format!("{n} to {}", safe(name)))
        .collect();
    eprint!(
        "relay replay: {} notifications would be sent ({}). Send them? [y/N] ",
        summary.notifications_sent,
        to.join(", ")
    );
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| CliError::at("cannot read the answer", e))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}

/// A route pattern from its JSON text.
pub(crate) fn compile(text: &str) -> Result<Pattern, CliError> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| CliError::Invalid(format!("--match: not JSON: {e}")))?;
    Pattern::compile(&value)
        .map_err(|e| CliError::Invalid(format!("--match: {}: {}", e.at, e.message)))
}

/// The run's id: the same for the same command, so that running it again continues it.
fn run_id(args: &ReplayArgs) -> String {
    let parts = [
        args.since.as_deref(),
        args.until.as_deref(),
        args.bundle.as_deref(),
        args.subscription.as_deref(),
        args.event_type.as_deref(),
        args.pattern.as_deref(),
        args.to.as_deref(),
    ];
    let mut hash = Sha256::new();
    for part in parts {
        // Each part with its length: no two commands give the same text.
        let part = part.unwrap_or("\u{0}");
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    hex::encode(&hash.finalize()[..8])
}

fn fresh_run_id() -> Result<String, CliError> {
    let mut id = [0u8; 8];
    getrandom::fill(&mut id).map_err(CliError::Randomness)?;
    Ok(hex::encode(id))
}

/// The archive at `url` and a relay with `config`'s destinations, to send or read archived
/// notifications through.
pub(crate) async fn opened(
    url: &ArchiveUrl,
    config: Config,
) -> Result<(Arc<dyn Archive>, Relay), CliError> {
    let archive = (relay_core::archive::open(url, &relay_core::cloud::Cloud::default()).await)
        .map_err(|e| CliError::at(url, e))?;
    let relay = Relay::from_config(config)
        .await
        .map_err(CliError::Destinations)?;
    Ok((archive, relay))
}

/// `name`, given with `flag`, names one of the relay's destinations (or one `also` takes).
pub(crate) fn known_destination(
    relay: &Relay,
    flag: &str,
    name: &str,
    also: impl Fn(&str) -> bool,
) -> Result<(), CliError> {
    let names = relay.destination_names();
    match names.iter().any(|n| n == name || also(n)) {
        true => Ok(()),
        false => Err(CliError::Invalid(format!(
            "{flag} {name}: no such destination; the routes in effect have {}",
            names.join(", ")
        ))),
    }
}

/// Lists the window's hours, then replays what the selection takes, `job.concurrency` at a
/// time and at most `job.rate` per second.
pub(crate) async fn run_job(config: Config, job: Job) -> Result<Summary, CliError> {
    let archive_url = config
        .archive
        .as_ref()
        .map(|a| a.url.clone())
        .ok_or(CliError::NoArchive)?;
    if config.ledger.is_none() && job.plan.record != ReplayRecord::Unrecorded {
        return Err(ReplayError::NoLedger.into());
    }
    let (archive, relay) = opened(&archive_url, config).await?;
    if let ReplayTo::Destination(name) = &job.plan.to {
        known_destination(&relay, "--to", name, |n| n == format!("split:{name}"))?;
    }
    let keys = list(
        archive.as_ref(),
        &archive_url.to_string(),
        *job.window.start(),
        *job.window.end(),
    )
    .await?;
    let objects = keys.len();
    let mut summary = Summary::default();
    let progress = Progress::new(objects as u64, job.plan.dry_run);
    let limiter = Limiter::new(job.rate);
    let (relay, job) = (Arc::new(relay), Arc::new(job));
    let max_body_bytes = relay.config().max_body_bytes;
    // SIGINT or SIGTERM: no new notification is started; those in flight finish and settle, so
    // the same command run again continues without sending any of them twice.
    let stopping = Arc::new(AtomicBool::new(false));
    tokio::spawn(stop_on_signal(Arc::clone(&stopping)));
    let mut results = records(archive.as_ref(), keys, max_body_bytes)
        .take_while(|_| std::future::ready(!stopping.load(Ordering::SeqCst)))
        .map(|record| {
            let (relay, job, limiter) = (&relay, &job, &limiter);
            async move { (record.last, one(relay, job, limiter, record).await) }
        })
        .buffer_unordered(job.concurrency);
    let mut objects_started = 0;
    while let Some((last, result)) = results.next().await {
        summary.listed += 1;
        summary.add(result);
        if last {
            objects_started += 1;
            progress.tick(summary.notifications_sent);
        }
    }
    progress.finish(summary.notifications_sent);
    if stopping.load(Ordering::SeqCst) {
        summary.left = objects - objects_started;
    }
    summary.lines.sort();
    Ok(summary)
}

/// Sets `stopping` at the first SIGINT or SIGTERM.
async fn stop_on_signal(stopping: Arc<AtomicBool>) {
    let Ok(mut terminate) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    eprintln!(
        "relay replay: stopping; the notifications in flight finish, and the same command continues"
    );
    stopping.store(true, Ordering::SeqCst);
}

/// Selects and replays one archived record, retrying what another attempt holds and what a
/// destination refused for now.
async fn one(relay: &Relay, job: &Job, limiter: &Limiter, record: Read1) -> Result1 {
    let key = record.name;
    let bytes = match record.read {
        Ok(Some(bytes)) => bytes,
        // Expired by the bucket's lifecycle since it was listed, or an object of no record.
        Ok(None) => return Result1::Gone,
        Err(e @ ArchiveError::TooLarge { .. }) => return Result1::Refused(key, e.to_string()),
        Err(e) => return Result1::Failed(key, e.to_string()),
    };
    let sealed_with = relay
        .archive_key()
        .expect("a relay with an archive has its key");
    let record = match Record::open(sealed_with, &bytes) {
        Ok(record) => record,
        Err(e @ (RecordError::Unsealed | RecordError::Forged)) => {
            return Result1::Refused(key, e.to_string());
        }
        Err(e) => return Result1::Failed(key, e.to_string()),
    };
    if !job.window.contains(&record.received_at) {
        return Result1::Outside;
    }
    match (record.refused.is_some(), job.refused) {
        (true, false) => return Result1::RefusedOnArrival,
        (false, true) => return Result1::Outside,
        (true, true) => {}
        (false, false) if !job.selection.takes(&record) => return Result1::Outside,
        (false, false) => {}
    }
    limiter.wait().await;
    let mut backoff = Duration::from_millis(500);
    for _ in 0..6 {
        match relay.replay(&record, &job.plan).await {
            Ok(Replayed::Busy { retry_after }) => tokio::time::sleep(retry_after).await,
            Ok(Replayed::Failed {
                retryable: true, ..
            })
            | Err(ReplayError::Ledger(_)) => {
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
            Ok(replayed) => return Result1::Replayed(key, replayed),
            Err(e) => return Result1::Failed(key, e.to_string()),
        }
    }
    match relay.replay(&record, &job.plan).await {
        Ok(replayed) => Result1::Replayed(key, replayed),
        Err(e) => Result1::Failed(key, e.to_string()),
    }
}
