//! Copying a table of the earlier layout (hash key `ledger_key` alone, every item also written
//! to the index `by_bundle`: four write units a notification) into this one's (hash key
//! `bundle_uuid`, range key `ledger_key`, no index: two), for `relay ledger migrate`.

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use futures_util::{StreamExt as _, TryStreamExt as _};

use super::item::{BUNDLE_UUID, DEDUP_KEY, EXPIRES_AT, Item, KEY, partition, s};
use super::{DynamoDbLedger, failure};
use crate::ledger::LedgerError;

/// Items written at once.
const CONCURRENCY: usize = 16;

/// What a copy did, item by item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Copied {
    /// Written under their bundle.
    pub copied: u64,
    /// Already in this table (a relay recorded the notification since): this table's is kept.
    pub kept: u64,
    /// Past their expiry: not copied.
    pub expired: u64,
}

impl DynamoDbLedger {
    /// Copies each live item of `earlier`, a table of the earlier layout, into this ledger's
    /// table under its bundle, leaving `earlier` as it was. Items this table already holds
    /// are kept as they are; running it twice copies nothing twice.
    pub(crate) async fn copy_earlier(
        &self,
        earlier: &str,
        now_s: i64,
    ) -> Result<Copied, LedgerError> {
        let mut pages = self
            .client
            .scan()
            .table_name(earlier)
            .consistent_read(true)
            .into_paginator()
            .send();
        let mut copied = Copied::default();
        while let Some(page) = pages.next().await {
            let items = page.map_err(failure)?.items.unwrap_or_default();
            let outcomes: Vec<Outcome> = futures_util::stream::iter(items)
                .map(|item| self.copy_one(item, now_s))
                .buffer_unordered(CONCURRENCY)
                .try_collect()
                .await?;
            for outcome in outcomes {
                match outcome {
                    Outcome::Copied => copied.copied += 1,
                    Outcome::Kept => copied.kept += 1,
                    Outcome::Expired => copied.expired += 1,
                }
            }
        }
        Ok(copied)
    }

    async fn copy_one(&self, mut item: Item, now_s: i64) -> Result<Outcome, LedgerError> {
        let text = |item: &Item, name: &str| match item.get(name) {
            Some(AttributeValue::S(text)) => Some(text.clone()),
            _ => None,
        };
        let key = text(&item, KEY)
            .ok_or_else(|| super::item::corrupt("?", "an item without its ledger_key"))?;
        let expires_at = match item.get(EXPIRES_AT) {
            Some(AttributeValue::N(n)) => n.parse::<i64>().unwrap_or(i64::MAX),
            _ => i64::MAX,
        };
        if expires_at < now_s {
            return Ok(Outcome::Expired);
        }
        let bundle = text(&item, BUNDLE_UUID).unwrap_or_default();
        item.insert(BUNDLE_UUID.to_owned(), s(partition(&bundle, &key)));
        if text(&item, DEDUP_KEY).as_deref() == Some(key.as_str()) {
            item.remove(DEDUP_KEY);
        }
        let answer = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#key)")
            .expression_attribute_names("#key", KEY)
            .send()
            .await;
        match answer {
            Ok(_) => Ok(Outcome::Copied),
            Err(e) => match e.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(_)) => Ok(Outcome::Kept),
                _ => Err(failure(e)),
            },
        }
    }
}

/// One item's fate.
enum Outcome {
    Copied,
    Kept,
    Expired,
}
