//! The DynamoDB ledger (`dynamodb://TABLE`), for the Lambda. One item per entry:
//!
//! - `bundle_uuid` S: the hash key, the entry's bundle (another sender's event id; the ledger
//!   key itself for an event without one), which `relay trace BUNDLE_UUID` queries;
//!   `ledger_key` S: the range key. No index: a claim and a settlement under 1 KB are one
//!   write unit each;
//! - `bundle_version`, `subscription_id` S, `dedup_key` S (only where it is not the ledger
//!   key), `event_type` S (absent for v1);
//! - `expires_at` N: epoch seconds, the table's TTL attribute;
//! - `a:<destination>` M: the first acknowledgement {`message_id` S?, `at` N ms, `attempt` N};
//! - `l:<destination>` M: a lease {`holder` S, `until` N ms}, or a copy of the destination's
//!   acknowledgement, which a claim writes in its place and which leases nothing;
//! - `attempts` L of M: {`id` S, `at` N ms, `routes_version` S?, `split` S?, `routed` L of S,
//!   `outcome` M?}, each outcome a map of destination to {`result` S, `message_id` S?} or
//!   {`result` S, `retryable` BOOL, `error` S}; at most twice [`KEPT_ATTEMPTS`] of them;
//! - `folded` N, `first_at` N ms: how many of the oldest attempts were folded away, and when the
//!   first arrived. A claim that leaves the list twice [`KEPT_ATTEMPTS`] long folds it down to
//!   [`KEPT_ATTEMPTS`] with one more UpdateItem (`REMOVE attempts[0..k]`, conditioned on the
//!   list still starting as it did), so the item never nears DynamoDB's 400 KB.
//!
//! The rules of [`Entry::claim`] and [`Entry::settle`] are said as conditions, so that each is
//! one call in the common case:
//! - a claim is one UpdateItem that appends the attempt, sets the identity and the expiry, and
//!   leases each routed destination not yet acknowledged (`if_not_exists` on its
//!   acknowledgement), conditioned on the item being live (TTL deletes lag by up to days) and on
//!   each routed destination being acknowledged, unleased or past its lease. Its old image
//!   gives the attempt's index and the acknowledgements. When the condition fails, the image it was
//!   checked against says why: an expired item is replaced by one PutItem, conditioned on the
//!   expiry it had (the rare reset); a live lease answers [`Claimed::Busy`].
//! - a settlement is one UpdateItem that keeps the first acknowledgement of each destination
//!   (`if_not_exists`), writes the outcome and frees the leases, conditioned on the leases and
//!   the attempt still being this attempt's (another attempt takes a lease over after it
//!   expires, and an expired item may have been reset), and on the item existing: a settlement
//!   never recreates an item TTL deleted. When that fails, the image says which leases and
//!   attempt are still its own, and one more UpdateItem writes exactly what the rules keep.
//!
//! Both set `expires_at` plainly rather than to the larger of the old and new expiry (which an
//! update expression cannot say): each write's expiry is its own time plus the retention, and
//! time moves forward. A failed call is [`LedgerError::Unavailable`] when throttled, 5xx, timed
//! out or unreachable, [`LedgerError::Refused`] otherwise (a missing table or grant), as the
//! AWS sinks classify theirs.

mod claim;
mod fold;
mod item;
mod migrate;
mod wire;

pub use migrate::Copied;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use aws_config::SdkConfig;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;

use super::KEPT_ATTEMPTS;
use super::{Ack, Claim, Claimed, Delivery, Entry, Grant, Ledger, LedgerError, Lookup, Settlement};
use crate::cloud::aws_json::AwsJson;
use crate::sink::SinkError;
use claim::{acks_by_routing, claim_update};
use item::{
    ACK, ATTEMPTS, BUNDLE_UUID, EXPIRES_AT, Item, KEY, LEASE, ack_value, corrupt, entry_of,
    first_attempt_at, folded_of, item_of, lease_holder, n, outcome_value, position_of, primary_key,
    s,
};

/// How soon to retry when two attempts reset one expired item at once: the loser answers
/// [`Claimed::Busy`] for this long.
const RACE_RETRY_MS: i64 = 1_000;

/// Settlement calls at most: the first, and the ones its failed conditions call for.
const SETTLE_CALLS: usize = 3;

/// The ledger in one DynamoDB table.
#[derive(Debug, Clone)]
pub struct DynamoDbLedger {
    /// The claims, settlements and warming, written on the wire (`wire.rs`).
    api: Arc<AwsJson>,
    /// The rarer calls: an expired item's reset, a fold, the reads.
    client: Client,
    table: String,
}

impl DynamoDbLedger {
    /// The ledger in `table`, through clients of `sdk` (region, credentials, endpoint).
    /// Refused when `sdk` names no region or no endpoint can be made of it.
    pub async fn new(sdk: &SdkConfig, table: &str) -> Result<Self, LedgerError> {
        let api = wire::client(sdk).await.map_err(|e| {
            LedgerError::Refused(format!("the DynamoDB ledger {table}: {e}").into())
        })?;
        Ok(Self {
            api: Arc::new(api),
            client: Client::new(sdk),
            table: table.to_owned(),
        })
    }

    /// One `UpdateItem` on the wire: the old image (empty unless `old_image`), or the image
    /// its condition failed on (`None` when the item did not exist).
    async fn update(
        &self,
        key: &Item,
        (update, condition): (&str, &str),
        x: &Expr,
        old_image: bool,
    ) -> Result<Result<Item, Option<Item>>, LedgerError> {
        let update = wire::Update {
            table: &self.table,
            key,
            update,
            condition,
            names: &x.names,
            values: &x.values,
            old_image,
        };
        (wire::update_item(&self.api, &update).await).map_err(|e| ledger_error(e.into()))
    }

    /// One claim UpdateItem: the answer, or the image its condition failed on.
    async fn try_claim(
        &self,
        claim: &Claim<'_>,
        routed: &BTreeSet<&str>,
        now_ms: i64,
    ) -> Result<Result<Claimed, Option<Item>>, LedgerError> {
        let (x, update, condition) = claim_update(claim, routed, now_ms);
        let key = primary_key(&claim.identity.bundle_uuid, claim.key);
        let old = match self.update(&key, (&update, &condition), &x, true).await? {
            Ok(old) => old,
            Err(failed) => return Ok(Err(failed)),
        };
        let attempt = match old.get(ATTEMPTS) {
            None => 0,
            Some(AttributeValue::L(list)) => list.len(),
            Some(_) => return Err(corrupt(claim.key, "attempts is not a list")),
        };
        let (acked, others) = acks_by_routing(claim.key, &old, routed)?;
        let since_ms = first_attempt_at(&old).unwrap_or(claim.attempt.at_ms);
        let mut folded = folded_of(&old);
        let index = folded + attempt;
        // Kept between KEPT_ATTEMPTS and twice that: one more write every KEPT_ATTEMPTS claims.
        if attempt + 1 >= 2 * KEPT_ATTEMPTS {
            let entry = (claim.identity.bundle_uuid.as_str(), claim.key);
            folded += self.fold(entry, &old, attempt + 1).await;
        }
        Ok(Ok(Claimed::Granted(Grant {
            attempt: index,
            acked,
            others,
            since_ms,
            folded,
        })))
    }

    /// Replaces the expired item `old` with a fresh entry holding `claim` alone, unless another
    /// attempt changed it first.
    async fn reset(
        &self,
        claim: &Claim<'_>,
        now_ms: i64,
        old: &Item,
    ) -> Result<Claimed, LedgerError> {
        let mut fresh = Entry::new(claim.key, claim.identity);
        let granted = fresh.claim(claim, now_ms);
        let old_expiry = old
            .get(EXPIRES_AT)
            .cloned()
            .ok_or_else(|| corrupt(claim.key, "no expires_at"))?;
        let answer = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item_of(&fresh)))
            .condition_expression("#exp = :old")
            .expression_attribute_names("#exp", EXPIRES_AT)
            .expression_attribute_values(":old", old_expiry)
            .send()
            .await;
        match answer {
            Ok(_) => {
                tracing::info!(table = %self.table, key = claim.key, "Expired ledger entry reset.");
                Ok(granted)
            }
            Err(e) => match e.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(_)) => {
                    tracing::debug!(table = %self.table, key = claim.key, "Lost a ledger reset race.");
                    Ok(Claimed::Busy {
                        until_ms: now_ms + RACE_RETRY_MS,
                    })
                }
                _ => Err(failure(e)),
            },
        }
    }

    /// One settlement UpdateItem, freeing the leases in `own` and writing the outcome when
    /// `own_attempt`: `None` when done, else the image its condition failed on (`None` inside
    /// when the item no longer exists).
    async fn try_settle(
        &self,
        settlement: &Settlement<'_>,
        own: &BTreeSet<&str>,
        own_attempt: Option<usize>,
    ) -> Result<Option<Option<Item>>, LedgerError> {
        let mut x = Expr::default();
        let key = x.name("#key", KEY);
        let expires = x.name("#exp", EXPIRES_AT);
        let new_expiry = x.value(":exp", n(settlement.expires_at));
        let mut set = vec![format!("{expires} = {new_expiry}")];
        let mut remove = Vec::new();
        let mut condition = vec![format!("attribute_exists({key})")];
        if let Some(index) = own_attempt {
            let attempts = x.name("#att", ATTEMPTS);
            let id = x.name("#id", "id");
            let outcome = x.name("#outcome", "outcome");
            let holder = x.value(":holder", s(&settlement.held.holder));
            let value = x.value(":outcome", outcome_value(settlement.results));
            set.push(format!("{attempts}[{index}].{outcome} = {value}"));
            condition.push(format!("{attempts}[{index}].{id} = {holder}"));
        }
        for (i, (destination, delivery)) in settlement.results.iter().enumerate() {
            if let Delivery::Acknowledged { message_id, .. } = delivery {
                let ack = x.name(&format!("#a{i}"), format!("{ACK}{destination}"));
                let value = x.value(
                    &format!(":ack{i}"),
                    ack_value(&Ack {
                        message_id: message_id.clone(),
                        at_ms: settlement.now_ms,
                        attempt: settlement.held.attempt,
                    }),
                );
                set.push(format!("{ack} = if_not_exists({ack}, {value})"));
            }
            if own.contains(destination.as_str()) {
                let held = x.name(&format!("#l{i}"), format!("{LEASE}{destination}"));
                let holder_name = x.name("#holder", "holder");
                let holder = x.value(":holder", s(&settlement.held.holder));
                condition.push(format!("{held}.{holder_name} = {holder}"));
                remove.push(held);
            }
        }
        let key = primary_key(&settlement.held.bundle, &settlement.held.key);
        let (update, condition) = (update_expression(&set, &remove), condition.join(" AND "));
        Ok(self
            .update(&key, (&update, &condition), &x, false)
            .await?
            .err())
    }
}

#[async_trait::async_trait]
impl Ledger for DynamoDbLedger {
    async fn warm(&self) -> Result<(), LedgerError> {
        // A role that may not describe the table is refused; the refusal is an answer, and the
        // connection is open.
        let keys = wire::keys(&self.api, &self.table)
            .await
            .map_err(|e| LedgerError::Unavailable(e.to_string().into()))?;
        let keys: Vec<(&str, &str)> = (keys.iter().flatten())
            .map(|(name, kind)| (name.as_str(), kind.as_str()))
            .collect();
        match keys[..] {
            [(BUNDLE_UUID, "HASH"), (KEY, "RANGE")] | [] => Ok(()),
            _ => Err(LedgerError::Refused(format!(
                "the table {} is keyed {keys:?}, not by {BUNDLE_UUID} and {KEY} (an earlier release's table: see docs/ledger.md, Upgrading)",
                self.table
            ).into())),
        }
    }

    async fn claim(&self, claim: &Claim<'_>, now_ms: i64) -> Result<Claimed, LedgerError> {
        let routed: BTreeSet<&str> = claim.attempt.routed.iter().map(String::as_str).collect();
        let old = match self.try_claim(claim, &routed, now_ms).await? {
            Ok(claimed) => {
                tracing::debug!(table = %self.table, key = claim.key, ?claimed, "Ledger claim.");
                return Ok(claimed);
            }
            Err(old) => old,
        };
        // The image the condition failed on: expired, or a live lease on a routed destination.
        let Some(old) = old else {
            tracing::warn!(table = %self.table, key = claim.key, "A failed claim returned no item.");
            return Ok(Claimed::Busy {
                until_ms: now_ms + RACE_RETRY_MS,
            });
        };
        let mut entry = entry_of(&old)?;
        if entry.is_expired(now_ms) {
            return self.reset(claim, now_ms, &old).await;
        }
        // Entry::claim on that image names the leases, by the same rule as the condition.
        let busy = match entry.claim(claim, now_ms) {
            busy @ Claimed::Busy { .. } => busy,
            Claimed::Granted(_) => {
                tracing::warn!(table = %self.table, key = claim.key, "A claim's condition failed on an item that grants it.");
                Claimed::Busy {
                    until_ms: now_ms + RACE_RETRY_MS,
                }
            }
        };
        tracing::debug!(table = %self.table, key = claim.key, claimed = ?busy, "Ledger claim.");
        Ok(busy)
    }

    async fn settle(&self, settlement: &Settlement<'_>) -> Result<(), LedgerError> {
        let mut own: BTreeSet<&str> = settlement.results.keys().map(String::as_str).collect();
        // Where the attempt is among those the item keeps, as its claim left them.
        let held = settlement.held;
        let mut own_attempt = held.attempt.checked_sub(held.folded);
        for call in 1..=SETTLE_CALLS {
            let old = match self.try_settle(settlement, &own, own_attempt).await? {
                None => return Ok(()),
                Some(None) => {
                    tracing::info!(table = %self.table, key = held.key.as_str(), "The settled ledger entry no longer exists.");
                    return Ok(());
                }
                Some(Some(old)) => old,
            };
            // Keep freeing the leases and writing the outcome only where they are still ours.
            own.retain(|d| lease_holder(&old, d) == Some(held.holder.as_str()));
            own_attempt = position_of(&old, &held.holder);
            tracing::debug!(
                table = %self.table, key = held.key.as_str(), call, own_leases = own.len(), ?own_attempt,
                "A ledger settlement's condition failed; settling what is still its own."
            );
        }
        Err(LedgerError::Unavailable(
            format!("{}: the settlement kept losing to other writers", held.key).into(),
        ))
    }

    async fn find(&self, lookup: &Lookup) -> Result<Vec<Entry>, LedgerError> {
        match lookup {
            Lookup::Key { key, bundle } => {
                let bundle = bundle.as_deref().ok_or(LedgerError::KeyWithoutBundle)?;
                let output = self
                    .client
                    .get_item()
                    .table_name(&self.table)
                    .set_key(Some(primary_key(bundle, key)))
                    .consistent_read(true)
                    .send()
                    .await
                    .map_err(failure)?;
                output.item.as_ref().map(entry_of).into_iter().collect()
            }
            Lookup::Bundle(bundle) => {
                let mut pages = self
                    .client
                    .query()
                    .table_name(&self.table)
                    .consistent_read(true)
                    .key_condition_expression("#bu = :bu")
                    .expression_attribute_names("#bu", BUNDLE_UUID)
                    .expression_attribute_values(":bu", s(bundle))
                    .into_paginator()
                    .send();
                let mut entries = Vec::new();
                while let Some(page) = pages.next().await {
                    for item in page.map_err(failure)?.items.unwrap_or_default() {
                        entries.push(entry_of(&item)?);
                    }
                }
                Ok(entries)
            }
        }
    }
}

/// Throttling, 5xx, timeouts and connection failures: unavailable; a missing table, a missing
/// grant, a validation error: refused. The sinks' classification, shared.
fn failure<E>(error: SdkError<E, HttpResponse>) -> LedgerError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    ledger_error(crate::sink::classify(error))
}

/// A failed call, classified as the sinks classify theirs: unavailable or refused.
fn ledger_error(error: SinkError) -> LedgerError {
    match error {
        SinkError::Retryable(e) => LedgerError::Unavailable(e),
        SinkError::Permanent(e) => LedgerError::Refused(e),
    }
}

/// The names and values of one expression, each added where it is used (DynamoDB refuses
/// unused ones).
#[derive(Default)]
struct Expr {
    names: HashMap<String, String>,
    values: Item,
}

impl Expr {
    fn name(&mut self, placeholder: &str, attribute: impl Into<String>) -> String {
        self.names.insert(placeholder.to_owned(), attribute.into());
        placeholder.to_owned()
    }

    fn value(&mut self, placeholder: &str, value: AttributeValue) -> String {
        self.values.insert(placeholder.to_owned(), value);
        placeholder.to_owned()
    }
}

fn update_expression(set: &[String], remove: &[String]) -> String {
    let mut expression = format!("SET {}", set.join(", "));
    if !remove.is_empty() {
        expression.push_str(&format!(" REMOVE {}", remove.join(", ")));
    }
    expression
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_use_every_name_and_value_they_declare() {
        let mut x = Expr::default();
        let a = x.name("#a0", "a:q1");
        let v = x.value(":ack0", n(1));
        assert_eq!(
            update_expression(&[format!("{a} = if_not_exists({a}, {v})")], &[]),
            "SET #a0 = if_not_exists(#a0, :ack0)"
        );
        assert_eq!(
            update_expression(&["#e = :e".into()], &["#l0".into(), "#l1".into()]),
            "SET #e = :e REMOVE #l0, #l1"
        );
        assert_eq!(x.names["#a0"], "a:q1");
    }
}
