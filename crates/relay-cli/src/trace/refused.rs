//! `relay trace --refused`: the requests that verified and were then refused (400 or 415), as
//! the archive keeps them: when, from which source and key, what they were answered, and the
//! record's key. `relay replay --refused` sends them once the configuration takes them.

use std::time::SystemTime;

use futures_util::StreamExt as _;
use relay_core::Config;
use relay_core::archive::{ArchiveKey, Record};
use serde_json::{Value, json};

use crate::error::CliError;
use crate::terminal::safe;

/// Lists the refused records received since `since` (a time or a duration ago): true when
/// there is at least one.
pub(crate) async fn trace(config: Option<&str>, since: &str, json: bool) -> Result<bool, CliError> {
    let config = Config::for_replay(crate::env_with_config(config)).map_err(CliError::from)?;
    let settings = config.archive.as_ref().ok_or(CliError::NoArchive)?;
    let now = SystemTime::now();
    let since = crate::replay::parse_time(since, now)
        .map_err(|e| CliError::Invalid(format!("--since: {e}")))?;
    crate::replay::check_window(&config, since, now, now)?;
    let (archive, key) =
        relay_core::relay::open_archive(settings, &relay_core::cloud::Cloud::default())
            .await
            .map_err(CliError::from)?;
    let url = settings.url.to_string();
    let keys = crate::replay::list(archive.as_ref(), &url, since, now).await?;
    let mut records = crate::replay::records(archive.as_ref(), keys, config.max_body_bytes);
    let mut found = Vec::new();
    while let Some(read) = records.next().await {
        if let Some(record) = refused(&key, read) {
            found.push(record);
        }
    }
    found.retain(|(_, record)| record.received_at >= since);
    found.sort_by_key(|(_, record)| record.received_at);
    if json {
        let all: Vec<Value> = found.iter().map(|(name, r)| to_json(name, r)).collect();
        let text = serde_json::to_string_pretty(&all).expect("JSON values serialize");
        println!("{text}");
    } else if found.is_empty() {
        eprintln!("relay trace: no request was refused after verifying since then");
    } else {
        for (name, record) in &found {
            println!("{}", safe(&line(name, record)));
        }
        println!(
            "{} refused after verifying: relay replay --refused --since … sends them once the configuration takes them",
            found.len()
        );
    }
    Ok(!found.is_empty())
}

/// The record read, when it is one sealed with `key` of a refused request; what else is
/// there is said and left.
fn refused(key: &ArchiveKey, read: crate::replay::Read1) -> Option<(String, Record)> {
    let name = read.name;
    let bytes = match read.read {
        Ok(bytes) => bytes?,
        Err(e) => {
            eprintln!("relay trace: {}: {}", safe(&name), safe(&e.to_string()));
            return None;
        }
    };
    match Record::open(key, &bytes) {
        Ok(record) if record.refused.is_some() => Some((name, record)),
        Ok(_) => None,
        Err(e) => {
            eprintln!("relay trace: {}: not shown: {e}", safe(&name));
            None
        }
    }
}

fn line(name: &str, record: &Record) -> String {
    let refused = record.refused.as_ref().expect("read keeps refused records");
    format!(
        "{}  {} {}  source {}  key {}  {} bytes  {}\n    {}",
        humantime::format_rfc3339_seconds(record.received_at),
        refused.status,
        refused.code,
        record.attribute("relay.source").unwrap_or("-"),
        record.attribute("relay.key_id").unwrap_or("-"),
        record.payload.len(),
        name,
        refused.message,
    )
}

fn to_json(name: &str, record: &Record) -> Value {
    let refused = record.refused.as_ref().expect("read keeps refused records");
    json!({
        "key": name,
        "received_at": humantime::format_rfc3339_millis(record.received_at).to_string(),
        "status": refused.status,
        "code": refused.code,
        "message": refused.message,
        "source": record.attribute("relay.source"),
        "key_id": record.attribute("relay.key_id"),
        "bytes": record.payload.len(),
        "content_type": record.request["headers"]["content-type"][0],
    })
}
