//! Where `relay trace` finds a notification in the archive: the object the archive's
//! acknowledgement names, and whether it is still there; or, for a record written through an
//! engine (`RELAY_ARCHIVE_STREAM`), the engine's id and the hour it delivered under.

use relay_core::ledger::Entry;
use serde_json::{Value, json};

use super::TraceArgs;

/// Where an entry's notification is in the archive, and whether it is there still.
pub(super) struct Archived {
    /// `<archive URL><key>`.
    url: String,
    /// `Some(true)`: read back; `Some(false)`: gone (the bucket's lifecycle); `None`: not
    /// checked (no RELAY_ARCHIVE_URL here, or it could not be read).
    present: Option<bool>,
}

impl Archived {
    pub(super) fn line(&self) -> String {
        match self.present {
            Some(true) => format!("in the archive: {}", self.url),
            Some(false) => format!("archived, since expired: {}", self.url),
            None => format!("archived (not checked): {}", self.url),
        }
    }

    pub(super) fn to_json(&self) -> Value {
        json!({"url": self.url, "present": self.present})
    }
}

/// For each entry the archive acknowledged: where its object is, and whether it is still
/// there, read with the archive RELAY_ARCHIVE_URL names (as `relay replay` reads it).
pub(super) async fn archived(args: &TraceArgs, entries: &[Entry]) -> Vec<Option<Archived>> {
    let url = relay_core::config::archive_from_vars(crate::env_with_config(args.config.as_deref()))
        .ok()
        .flatten();
    let archive = match &url {
        Some(url) => relay_core::archive::open(url, &relay_core::cloud::Cloud::default())
            .await
            .ok(),
        None => None,
    };
    let mut found = Vec::with_capacity(entries.len());
    let prefix = url.as_ref().map_or_else(String::new, |u| {
        let text = u.to_string();
        match text.ends_with('/') {
            true => text,
            false => format!("{text}/"),
        }
    });
    for entry in entries {
        let Some((key, at_ms)) = entry
            .acks
            .iter()
            .find(|(destination, _)| relay_core::archive::is_archive(destination))
            .and_then(|(_, ack)| Some((ack.message_id.clone()?, ack.at_ms)))
        else {
            found.push(None);
            continue;
        };
        // An engine's id for the record (`firehose://…`): it delivers under the hour it took
        // the record in, to an object it names.
        if key.contains("://") {
            let at = std::time::UNIX_EPOCH
                + std::time::Duration::from_millis(u64::try_from(at_ms).unwrap_or(0));
            let hour = relay_core::archive::hour_prefix(at);
            found.push(Some(Archived {
                url: format!("{key}, delivered under {prefix}{hour}"),
                present: None,
            }));
            continue;
        }
        let present = match &archive {
            // Present or not is all this reads: a record of any size will do.
            Some(archive) => match archive.read(&key, 0).await {
                Ok(found) => Some(found.is_some()),
                Err(relay_core::archive::ArchiveError::TooLarge { .. }) => Some(true),
                Err(_) => None,
            },
            None => None,
        };
        found.push(Some(Archived {
            url: format!("{prefix}{key}"),
            present,
        }));
    }
    found
}
