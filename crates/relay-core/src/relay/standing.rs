//! Where an archived notification stands now (`relay events`): for each destination the routes
//! in effect send it to, whether the ledger's live entry holds its acknowledgement, another
//! attempt's lease, or neither. What `relay replay --undelivered` would send is exactly the
//! destinations that stand undelivered.

use serde::Serialize;

use super::Relay;
use super::ledger::Recorder;
use super::replay::{ReplayError, ReplayTo};
use crate::archive::Record;
use crate::ledger::{Entry, Lookup, epoch_ms};
use crate::notification::{Notification, Verified};

/// Where a notification stands with one destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// The destination acknowledged it.
    Delivered,
    /// An attempt (a live retry, a replay) holds the destination now.
    InProgress,
    /// No attempt got it to the destination, and none holds it: `relay replay --undelivered`
    /// sends it.
    Undelivered,
}

impl Standing {
    /// The name `relay events` prints and takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::InProgress => "in_progress",
            Self::Undelivered => "undelivered",
        }
    }
}

impl Relay {
    /// Where `record` stands with each destination the routes in effect send it to, by the
    /// ledger's live entries; empty when no route takes it now. A refused request's record that
    /// the configuration in effect still refuses is [`ReplayError::Refused`].
    pub async fn standing(&self, record: &Record) -> Result<Vec<(String, Standing)>, ReplayError> {
        let routed = self.route_record(record, &ReplayTo::Routes).await?;
        if routed.indexes.is_empty() {
            return Ok(Vec::new());
        }
        let recorder = self.ledger.as_ref().ok_or(ReplayError::NoLedger)?;
        let entries = self
            .live_entries(recorder, &routed.notification, None)
            .await?;
        let acks = entries.iter().flat_map(|e| e.acks.clone()).collect();
        let now_ms = epoch_ms(self.clock.now());
        let table = &routed.table;
        let standing = routed.indexes.iter().map(|&i| {
            let destination = &table.destinations[i];
            let held = || {
                entries.iter().any(|e| {
                    e.leases
                        .get(&destination.resource)
                        .is_some_and(|lease| lease.until_ms >= now_ms)
                })
            };
            let standing = if self.acknowledged(table, destination, &acks).is_some() {
                Standing::Delivered
            } else if held() {
                Standing::InProgress
            } else {
                Standing::Undelivered
            };
            (destination.name.clone(), standing)
        });
        Ok(standing.collect())
    }

    /// The unexpired ledger entries of `notification` (under the run's key, for a replay run).
    pub(super) async fn live_entries(
        &self,
        recorder: &Recorder,
        notification: &Notification<Verified>,
        run: Option<&str>,
    ) -> Result<Vec<Entry>, ReplayError> {
        let key = self.ledger_key(notification, run);
        let entries = recorder
            .store
            .find(&Lookup::Key {
                key,
                bundle: Some(super::ledger::bundle_of(notification).to_owned()),
            })
            .await
            .map_err(|e| ReplayError::Ledger(e.to_string()))?;
        let now_ms = epoch_ms(self.clock.now());
        Ok(entries
            .into_iter()
            .filter(|e| !e.is_expired(now_ms))
            .collect())
    }
}
