//! `relay split start --backfill`: the archived notifications a new split's pattern matches
//! of the last while, replayed to it once the relays have taken the split.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::StartArgs;

use crate::error::CliError;

/// Waits for the relays to take the split (their routes refresh), then replays to it what it
/// matches of the last `window`, completing the live ledger entries: what reaches the split
/// live from now on is not sent twice.
pub(super) async fn backfill(
    args: &StartArgs,
    pattern: &Value,
    window: Duration,
) -> Result<(), CliError> {
    let routes = args.store.url().to_string();
    let env = crate::env_with_config(args.store.config());
    let config = relay_core::Config::for_replay(|name| match name {
        "RELAY_ROUTES_URL" => Some(routes.clone()),
        other => env(other),
    })
    .map_err(|e| CliError::Invalid(format!("--backfill needs the relay's configuration: {e}")))?;
    let now = SystemTime::now();
    let since = now.checked_sub(window).unwrap_or(UNIX_EPOCH);
    crate::replay::check_window(&config, since, now, now).map_err(|e| {
        CliError::Invalid(format!(
            "--backfill {}: {e}",
            humantime::format_duration(window)
        ))
    })?;
    let wait = config.routes_refresh + Duration::from_secs(1);
    println!(
        "backfill: waiting {} for the relays to take the split",
        humantime::format_duration(wait)
    );
    tokio::time::sleep(wait).await;
    let until = SystemTime::now();
    let job = crate::replay::Job {
        window: until.checked_sub(window).unwrap_or(UNIX_EPOCH)..=until,
        selection: relay_core::relay::ReplaySelection {
            pattern: Some(crate::replay::compile(&pattern.to_string())?),
            ..Default::default()
        },
        refused: false,
        plan: relay_core::relay::ReplayPlan {
            to: relay_core::relay::ReplayTo::Destination(format!("split:{}", args.name)),
            record: relay_core::relay::ReplayRecord::Undelivered,
            dry_run: false,
        },
        rate: None,
        concurrency: 32,
    };
    let summary = crate::replay::run_job(config, job)
        .await
        .map_err(|e| CliError::at("backfill", e))?;
    println!(
        "backfill: {} sent, {} delivered before, {} failed, {} refused (not sealed with RELAY_ARCHIVE_KEY), of {} archived since {}",
        summary.notifications_sent,
        summary.done,
        summary.failed,
        summary.refused,
        summary.listed,
        humantime::format_rfc3339_seconds(until.checked_sub(window).unwrap_or(UNIX_EPOCH))
    );
    match summary.failed {
        0 => Ok(()),
        n => Err(CliError::Incomplete(format!(
            "backfill: {n} notifications were not sent; run `relay replay --undelivered --to {} --match '{pattern}' --since ...` to try again",
            args.name
        ))),
    }
}
