//! The window a replay (or `relay events`) reads: its ends from the command line, bounded by
//! what the archive keeps, its objects listed hour by hour, and each read once within the
//! largest object a relay writes and split into its records.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use relay_core::Config;
use relay_core::archive::{Archive, ArchiveError, hours};

use crate::error::CliError;

/// A time, or a duration before `now`.
pub(crate) fn parse_time(text: &str, now: SystemTime) -> Result<SystemTime, CliError> {
    if let Ok(at) = humantime::parse_rfc3339_weak(text) {
        return Ok(at);
    }
    let ago = humantime::parse_duration(text).map_err(|_| {
        CliError::Invalid(format!(
            "expected a time like 2026-12-01T08:00:00Z or a duration ago like 24h, got {text:?}"
        ))
    })?;
    now.checked_sub(ago)
        .ok_or_else(|| CliError::Invalid(format!("{text:?} ago is before 1970")))
}

/// The window `--since` and `--until` give (`since` from `default_since` when not given, `until`
/// now), checked: in order, and within what the archive keeps.
pub(crate) fn window(
    config: &Config,
    since: Option<&str>,
    until: Option<&str>,
    default_since: impl FnOnce(SystemTime) -> Result<SystemTime, CliError>,
) -> Result<(SystemTime, SystemTime), CliError> {
    let now = SystemTime::now();
    let since = match since {
        Some(text) => {
            parse_time(text, now).map_err(|e| CliError::Invalid(format!("--since: {e}")))?
        }
        None => default_since(now)?,
    };
    let until = match until {
        Some(text) => {
            parse_time(text, now).map_err(|e| CliError::Invalid(format!("--until: {e}")))?
        }
        None => now,
    };
    if until < since {
        return Err(CliError::invalid("--until is before --since"));
    }
    check_window(config, since, until, now)?;
    Ok((since, until))
}

/// Refuses a window that reaches further back than the archive keeps records, or into the
/// future: its hours would be listed one by one, and hold nothing.
pub(crate) fn check_window(
    config: &Config,
    since: SystemTime,
    until: SystemTime,
    now: SystemTime,
) -> Result<(), CliError> {
    let Some(archive) = &config.archive else {
        return Ok(());
    };
    let days = archive.retention.as_secs() / 86_400;
    // An hour's grace either way: the hour a record was written in is listed whole.
    let hour = Duration::from_secs(3600);
    let oldest = now
        .checked_sub(archive.retention + hour)
        .unwrap_or(UNIX_EPOCH);
    if since < oldest {
        return Err(CliError::Invalid(format!(
            "--since reaches further back than the archive keeps records ({days} days, RELAY_ARCHIVE_RETENTION_DAYS): use --since {days}d or later"
        )));
    }
    if until > now + hour {
        return Err(CliError::invalid(
            "--until is in the future: nothing is archived there yet",
        ));
    }
    Ok(())
}

/// The oldest receipt time the ledger still knows the standing of (and the archive holds):
/// where a window starts when none is given; none without a ledger.
pub(crate) fn kept_since(config: &Config, now: SystemTime) -> Option<SystemTime> {
    let ledger = config.ledger.as_ref()?;
    let kept = config
        .archive
        .as_ref()
        .map_or(ledger.retention, |a| a.retention.min(ledger.retention));
    Some(now.checked_sub(kept).unwrap_or(UNIX_EPOCH))
}

/// The names of the objects archived in the hours from `since` to `until`, in order, with those
/// an engine (`RELAY_ARCHIVE_STREAM`) wrote in the hour before and the hour after: it names an
/// object by when it started it (Firehose, by its oldest record's arrival; a Cloud Storage
/// subscription, by the object's creation), and fills it for up to 15 minutes, so a record may
/// be filed under the hour before its own or, arriving late, the hour after. Readers take each
/// record by its own receipt time.
pub(crate) async fn list(
    archive: &dyn Archive,
    url: &str,
    since: SystemTime,
    until: SystemTime,
) -> Result<Vec<String>, CliError> {
    let hour = Duration::from_secs(3600);
    let before = since.checked_sub(hour).unwrap_or(UNIX_EPOCH);
    let (first, last) = (hours(since, since), hours(until, until));
    let mut keys = Vec::new();
    for prefix in hours(before, until + hour) {
        let listed = archive
            .list(&prefix)
            .await
            .map_err(|e| CliError::at(url, e))?;
        // The relay files its own objects under their records' hour: the hours around the
        // window hold none of the window's.
        let around = prefix < first[0] || prefix > last[0];
        let window = |key: &String| !around || !relay_core::archive::written_by_relay(key);
        keys.extend(listed.into_iter().filter(window));
    }
    keys.sort();
    Ok(keys)
}

/// One object of at most `limit` bytes, with a few tries while the store is unavailable.
async fn read(
    archive: &dyn Archive,
    key: &str,
    limit: usize,
) -> Result<Option<bytes::Bytes>, ArchiveError> {
    let mut backoff = Duration::from_millis(200);
    for _ in 0..3 {
        match archive.read(key, limit).await {
            Err(ArchiveError::Unavailable(_)) => {
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
            answer => return answer,
        }
    }
    archive.read(key, limit).await
}

/// One record as a reader of the archive gets it.
pub(crate) struct Read1 {
    /// The object's key, or `<key>#<n>` for the n-th line of a batch.
    pub(crate) name: String,
    /// Its bytes; `None` when its object expired (the bucket's lifecycle) since it was listed, or
    /// holds no record (an empty object).
    pub(crate) read: Result<Option<bytes::Bytes>, ArchiveError>,
    /// Whether it is its object's last.
    pub(crate) last: bool,
}

/// How many objects are read ahead of the records being handled.
const READ_AHEAD: usize = 4;

/// The records of the objects `keys`, in order: each object read once, whole, within the
/// largest object a relay writes (`max_body_bytes`), and split into its records.
pub(crate) fn records(
    archive: &dyn Archive,
    keys: Vec<String>,
    max_body_bytes: usize,
) -> impl futures_util::Stream<Item = Read1> + '_ {
    use futures_util::StreamExt as _;
    let limit = relay_core::archive::object_limit(max_body_bytes);
    futures_util::stream::iter(keys)
        .map(move |key| async move {
            let read = read(archive, &key, limit).await;
            (key, read)
        })
        .buffered(READ_AHEAD)
        .flat_map(|(key, read)| {
            let lines = match &read {
                Ok(Some(object)) => relay_core::archive::records(&key, object),
                _ => Vec::new(),
            };
            let records: Vec<Read1> = match read {
                // An object with no line holds no record: nothing to send, nothing to refuse.
                Ok(Some(_)) if lines.is_empty() => vec![Read1 {
                    name: key,
                    read: Ok(None),
                    last: true,
                }],
                Ok(Some(_)) => {
                    let n = lines.len();
                    (lines.into_iter().enumerate())
                        .map(|(i, (name, line))| Read1 {
                            name,
                            read: Ok(Some(line)),
                            last: i + 1 == n,
                        })
                        .collect()
                }
                read => vec![Read1 {
                    name: key,
                    read,
                    last: true,
                }],
            };
            futures_util::stream::iter(records)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use relay_core::archive::DirArchive;

    #[tokio::test]
    async fn a_window_takes_an_engines_objects_of_the_hours_around_it_and_only_its_own_hours() {
        let dir = tempfile::tempdir().unwrap();
        let archive = DirArchive::open(dir.path()).unwrap();
        let own = "d649e099e93e44b9b1682b362695caccd4e7ad961063788cb05690dec2ac6f38";
        let names = [
            format!("2026/12/05/13/{own}"),
            "2026/12/05/13/batch-0123456789abcdef0123456789abcdef".to_owned(),
            "2026/12/05/13/58_01_3a9c0e4e-engine".to_owned(),
            format!("2026/12/05/14/{own}"),
            "2026/12/05/15/00_02_7b1d-engine".to_owned(),
            format!("2026/12/05/15/{own}"),
            "2026/12/05/12/59_00_0000-engine".to_owned(),
        ];
        for name in &names {
            let line = bytes::Bytes::from_static(b"{}\n");
            archive.put(name, line).await.unwrap();
        }
        let at = |h: u64, m: u64| {
            // 2026-12-05T00:00:00Z
            UNIX_EPOCH + Duration::from_secs(1_796_428_800 + h * 3600 + m * 60)
        };
        let listed = list(&archive, "dir", at(14, 0), at(14, 30)).await.unwrap();
        assert_eq!(
            listed,
            [
                "2026/12/05/13/58_01_3a9c0e4e-engine".to_owned(),
                format!("2026/12/05/14/{own}"),
                "2026/12/05/15/00_02_7b1d-engine".to_owned(),
            ]
        );
    }
}
