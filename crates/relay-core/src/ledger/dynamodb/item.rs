//! The DynamoDB ledger's item layout (see the parent module): an [`Entry`] written as one
//! item, and read back from one, where anything unexpected is [`LedgerError::Corrupt`], never
//! a panic.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;

use super::super::{Ack, Attempt, Delivery, Entry, Identity, Lease, LedgerError};

/// An item, as the SDK holds it.
pub(super) type Item = HashMap<String, AttributeValue>;

/// The range key.
pub(super) const KEY: &str = "ledger_key";
/// The hash key: the entry's bundle ([`partition`]).
pub(super) const BUNDLE_UUID: &str = "bundle_uuid";
pub(super) const BUNDLE_VERSION: &str = "bundle_version";
pub(super) const SUBSCRIPTION_ID: &str = "subscription_id";
pub(super) const EVENT_TYPE: &str = "event_type";
pub(super) const DEDUP_KEY: &str = "dedup_key";
pub(super) const EXPIRES_AT: &str = "expires_at";
pub(super) const ATTEMPTS: &str = "attempts";
pub(super) const FOLDED: &str = "folded";
pub(super) const FIRST_AT: &str = "first_at";
pub(super) const ACK: &str = "a:";
pub(super) const LEASE: &str = "l:";

pub(super) fn corrupt(key: &str, reason: impl Into<String>) -> LedgerError {
    LedgerError::Corrupt {
        key: key.to_owned(),
        reason: reason.into(),
    }
}

/// The hash key of the entry `key` about `bundle`: the bundle, or the key itself for an event
/// without one (a key attribute cannot be empty).
pub(super) fn partition<'a>(bundle: &'a str, key: &'a str) -> &'a str {
    match bundle.is_empty() {
        true => key,
        false => bundle,
    }
}

/// The primary key of the entry `key` about `bundle`.
pub(super) fn primary_key(bundle: &str, key: &str) -> Item {
    Item::from([
        (BUNDLE_UUID.to_owned(), s(partition(bundle, key))),
        (KEY.to_owned(), s(key)),
    ])
}

pub(super) fn s(text: &str) -> AttributeValue {
    AttributeValue::S(text.to_owned())
}

pub(super) fn n(number: impl ToString) -> AttributeValue {
    AttributeValue::N(number.to_string())
}

fn map<const N: usize>(fields: [(&str, Option<AttributeValue>); N]) -> AttributeValue {
    AttributeValue::M(
        fields
            .into_iter()
            .filter_map(|(name, value)| Some((name.to_owned(), value?)))
            .collect(),
    )
}

pub(super) fn attempt_value(attempt: &Attempt) -> AttributeValue {
    let routed = attempt.routed.iter().map(|d| s(d)).collect();
    map([
        ("id", Some(s(&attempt.id))),
        ("at", Some(n(attempt.at_ms))),
        ("routes_version", attempt.routes_version.as_deref().map(s)),
        ("split", attempt.split.as_deref().map(s)),
        ("routed", Some(AttributeValue::L(routed))),
        ("outcome", attempt.outcome.as_ref().map(outcome_value)),
    ])
}

pub(super) fn outcome_value(outcome: &BTreeMap<String, Delivery>) -> AttributeValue {
    let deliveries = outcome.iter().map(|(destination, delivery)| {
        let value = match delivery {
            Delivery::Acknowledged {
                message_id,
                carried_from,
            } => map([
                ("result", Some(s("acknowledged"))),
                ("message_id", message_id.as_deref().map(s)),
                ("carried_from", carried_from.as_deref().map(s)),
            ]),
            Delivery::Failed { retryable, error } => map([
                ("result", Some(s("failed"))),
                ("retryable", Some(AttributeValue::Bool(*retryable))),
                ("error", Some(s(error))),
            ]),
        };
        (destination.clone(), value)
    });
    AttributeValue::M(deliveries.collect())
}

pub(super) fn ack_value(ack: &Ack) -> AttributeValue {
    map([
        ("message_id", ack.message_id.as_deref().map(s)),
        ("at", Some(n(ack.at_ms))),
        ("attempt", Some(n(ack.attempt))),
    ])
}

pub(super) fn lease_value(lease: &Lease) -> AttributeValue {
    map([
        ("holder", Some(s(&lease.holder))),
        ("until", Some(n(lease.until_ms))),
    ])
}

/// The whole item of `entry`.
pub(super) fn item_of(entry: &Entry) -> Item {
    let id = &entry.identity;
    let mut item = primary_key(&id.bundle_uuid, &entry.key);
    item.extend([
        (BUNDLE_VERSION.to_owned(), s(&id.bundle_version)),
        (SUBSCRIPTION_ID.to_owned(), s(&id.subscription_id)),
        (EXPIRES_AT.to_owned(), n(entry.expires_at)),
        (
            ATTEMPTS.to_owned(),
            AttributeValue::L(entry.attempts.iter().map(attempt_value).collect()),
        ),
    ]);
    // The ledger key is the dedup key but under RELAY_LEDGER_KEY=bundle_event or a replay run.
    if id.dedup_key != entry.key {
        item.insert(DEDUP_KEY.to_owned(), s(&id.dedup_key));
    }
    if let Some(event) = &id.event_type {
        item.insert(EVENT_TYPE.to_owned(), s(event));
    }
    if entry.folded > 0 {
        item.insert(FOLDED.to_owned(), n(entry.folded));
    }
    if let Some(first) = entry.first_at_ms {
        item.insert(FIRST_AT.to_owned(), n(first));
    }
    for (destination, ack) in &entry.acks {
        item.insert(format!("{ACK}{destination}"), ack_value(ack));
    }
    for (destination, lease) in &entry.leases {
        item.insert(format!("{LEASE}{destination}"), lease_value(lease));
    }
    item
}

/// The fields of one map (an item, or a map inside one), read with the entry's key at hand
/// for the error.
struct Fields<'a> {
    key: &'a str,
    map: &'a Item,
}

impl<'a> Fields<'a> {
    fn of(key: &'a str, value: &'a AttributeValue, what: &str) -> Result<Self, LedgerError> {
        match value {
            AttributeValue::M(map) => Ok(Self { key, map }),
            _ => Err(corrupt(key, format!("{what} is not a map"))),
        }
    }

    fn text(&self, name: &str) -> Result<String, LedgerError> {
        self.optional_text(name)?
            .ok_or_else(|| corrupt(self.key, format!("no {name}")))
    }

    fn optional_text(&self, name: &str) -> Result<Option<String>, LedgerError> {
        match self.map.get(name) {
            None => Ok(None),
            Some(AttributeValue::S(text)) => Ok(Some(text.clone())),
            Some(_) => Err(corrupt(self.key, format!("{name} is not a string"))),
        }
    }

    fn number<T: std::str::FromStr>(&self, name: &str) -> Result<T, LedgerError> {
        match self.map.get(name) {
            Some(AttributeValue::N(number)) => number
                .parse()
                .map_err(|_| corrupt(self.key, format!("{name} is not an integer: {number}"))),
            _ => Err(corrupt(self.key, format!("no number {name}"))),
        }
    }

    fn list(&self, name: &str) -> Result<&'a [AttributeValue], LedgerError> {
        match self.map.get(name) {
            None => Ok(&[]),
            Some(AttributeValue::L(list)) => Ok(list),
            Some(_) => Err(corrupt(self.key, format!("{name} is not a list"))),
        }
    }
}

/// The entry an item holds.
pub(super) fn entry_of(item: &Item) -> Result<Entry, LedgerError> {
    let key = match item.get(KEY) {
        Some(AttributeValue::S(key)) => key.as_str(),
        _ => return Err(corrupt("?", "an item without its ledger_key")),
    };
    let fields = Fields { key, map: item };
    let partition = fields.text(BUNDLE_UUID)?;
    let mut entry = Entry::new(
        key,
        &Identity {
            dedup_key: fields
                .optional_text(DEDUP_KEY)?
                .unwrap_or_else(|| key.to_owned()),
            subscription_id: fields.text(SUBSCRIPTION_ID)?,
            bundle_uuid: match partition == key {
                true => String::new(),
                false => partition,
            },
            bundle_version: fields.text(BUNDLE_VERSION)?,
            event_type: fields.optional_text(EVENT_TYPE)?,
        },
    );
    entry.expires_at = fields.number(EXPIRES_AT)?;
    if item.contains_key(FOLDED) {
        entry.folded = fields.number(FOLDED)?;
    }
    if item.contains_key(FIRST_AT) {
        entry.first_at_ms = Some(fields.number(FIRST_AT)?);
    }
    entry.attempts = (fields.list(ATTEMPTS)?.iter())
        .map(|value| attempt_of(key, value))
        .collect::<Result<_, _>>()?;
    for (name, value) in item {
        if let Some(destination) = name.strip_prefix(ACK) {
            entry
                .acks
                .insert(destination.to_owned(), ack_of(key, value)?);
        }
    }
    for (name, value) in item {
        if let Some(destination) = name.strip_prefix(LEASE) {
            // A copy of the acknowledgement, which a claim leaves in place of a lease.
            if item.get(&format!("{ACK}{destination}")) == Some(value) {
                continue;
            }
            let lease = Fields::of(key, value, name)?;
            let lease = Lease {
                holder: lease.text("holder")?,
                until_ms: lease.number("until")?,
            };
            entry.leases.insert(destination.to_owned(), lease);
        }
    }
    Ok(entry)
}

pub(super) fn ack_of(key: &str, value: &AttributeValue) -> Result<Ack, LedgerError> {
    let ack = Fields::of(key, value, "an acknowledgement")?;
    Ok(Ack {
        message_id: ack.optional_text("message_id")?,
        at_ms: ack.number("at")?,
        attempt: ack.number("attempt")?,
    })
}

fn attempt_of(key: &str, value: &AttributeValue) -> Result<Attempt, LedgerError> {
    let attempt = Fields::of(key, value, "an attempt")?;
    let routed = (attempt.list("routed")?.iter())
        .map(|d| match d {
            AttributeValue::S(d) => Ok(d.clone()),
            _ => Err(corrupt(key, "a routed destination is not a string")),
        })
        .collect::<Result<_, _>>()?;
    let outcome = match attempt.map.get("outcome") {
        None => None,
        Some(AttributeValue::M(outcome)) => Some(
            (outcome.iter())
                .map(|(d, delivery)| Ok((d.clone(), delivery_of(key, delivery)?)))
                .collect::<Result<_, LedgerError>>()?,
        ),
        Some(_) => return Err(corrupt(key, "an outcome is not a map")),
    };
    Ok(Attempt {
        id: attempt.text("id")?,
        at_ms: attempt.number("at")?,
        routes_version: attempt.optional_text("routes_version")?,
        split: attempt.optional_text("split")?,
        routed,
        outcome,
    })
}

fn delivery_of(key: &str, value: &AttributeValue) -> Result<Delivery, LedgerError> {
    let delivery = Fields::of(key, value, "a delivery")?;
    match delivery.text("result")?.as_str() {
        "acknowledged" => Ok(Delivery::Acknowledged {
            message_id: delivery.optional_text("message_id")?,
            carried_from: delivery.optional_text("carried_from")?,
        }),
        "failed" => Ok(Delivery::Failed {
            retryable: matches!(
                delivery.map.get("retryable"),
                Some(AttributeValue::Bool(true))
            ),
            error: delivery.text("error")?,
        }),
        other => Err(corrupt(key, format!("a delivery's result is {other:?}"))),
    }
}

/// The holder of the lease on `destination` in `item`, if any.
pub(super) fn lease_holder<'a>(item: &'a Item, destination: &str) -> Option<&'a str> {
    match item.get(&format!("{LEASE}{destination}"))? {
        AttributeValue::M(lease) => match lease.get("holder")? {
            AttributeValue::S(holder) => Some(holder),
            _ => None,
        },
        _ => None,
    }
}

/// How many attempts `item` has folded away.
pub(super) fn folded_of(item: &Item) -> usize {
    match item.get(FOLDED) {
        Some(AttributeValue::N(n)) => n.parse().unwrap_or(0),
        _ => 0,
    }
}

/// Where the attempt `holder` is among the attempts `item` keeps, if it is kept.
pub(super) fn position_of(item: &Item, holder: &str) -> Option<usize> {
    match item.get(ATTEMPTS)? {
        AttributeValue::L(attempts) => attempts.iter().position(|a| match a {
            AttributeValue::M(attempt) => {
                matches!(attempt.get("id"), Some(AttributeValue::S(id)) if id == holder)
            }
            _ => false,
        }),
        _ => None,
    }
}

/// When the first attempt in `item` arrived, if it has one: kept apart once it is folded away.
pub(super) fn first_attempt_at(item: &Item) -> Option<i64> {
    if let Some(AttributeValue::N(first)) = item.get(FIRST_AT) {
        return first.parse().ok();
    }
    match item.get(ATTEMPTS)? {
        AttributeValue::L(attempts) => match attempts.first()? {
            AttributeValue::M(attempt) => match attempt.get("at")? {
                AttributeValue::N(at) => at.parse().ok(),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        let identity = Identity {
            dedup_key: "d".repeat(64),
            subscription_id: "sub".into(),
            bundle_uuid: "bundle".into(),
            bundle_version: "v".into(),
            event_type: Some("CREATE".into()),
        };
        let mut entry = Entry::new("k", &identity);
        entry.expires_at = 1_800_000_100;
        entry.acks.insert(
            "q1".into(),
            Ack {
                message_id: Some("m-1".into()),
                at_ms: 1_800_000_000_050,
                attempt: 0,
            },
        );
        entry.acks.insert(
            "sns:topic/a".into(),
            Ack {
                message_id: None,
                at_ms: 1_800_000_000_060,
                attempt: 0,
            },
        );
        entry.leases.insert(
            "q2".into(),
            Lease {
                holder: "a2".into(),
                until_ms: 1_800_000_067_000,
            },
        );
        let outcome = BTreeMap::from([
            (
                "q1".to_owned(),
                Delivery::Acknowledged {
                    carried_from: None,
                    message_id: Some("m-1".into()),
                },
            ),
            (
                "q2".to_owned(),
                Delivery::Failed {
                    retryable: true,
                    error: "throttled".into(),
                },
            ),
            (
                "sns:topic/a".to_owned(),
                Delivery::Acknowledged {
                    message_id: None,
                    carried_from: None,
                },
            ),
        ]);
        entry.attempts = vec![
            Attempt {
                id: "a1".into(),
                at_ms: 1_800_000_000_000,
                routes_version: Some("v7".into()),
                split: Some("canary".into()),
                routed: vec!["q1".into(), "q2".into(), "sns:topic/a".into()],
                outcome: Some(outcome),
            },
            Attempt {
                id: "a2".into(),
                at_ms: 1_800_000_060_000,
                routes_version: None,
                split: None,
                routed: vec!["q2".into()],
                outcome: None,
            },
            Attempt {
                id: "a3".into(),
                at_ms: 1_800_000_061_000,
                routes_version: None,
                split: None,
                routed: Vec::new(),
                outcome: Some(BTreeMap::new()),
            },
        ];
        entry
    }

    #[test]
    fn an_entry_reads_back_from_its_item() {
        let entry = entry();
        let item = item_of(&entry);
        assert_eq!(entry_of(&item).unwrap(), entry);
        assert!(item.contains_key("a:sns:topic/a") && item.contains_key("l:q2"));
        let v1 = Entry {
            identity: Identity {
                event_type: None,
                ..entry.identity.clone()
            },
            ..entry
        };
        let item = item_of(&v1);
        assert!(!item.contains_key(EVENT_TYPE));
        assert_eq!(entry_of(&item).unwrap(), v1);
    }

    #[test]
    fn an_acknowledgement_copied_in_place_of_a_lease_is_no_lease() {
        let entry = entry();
        let mut item = item_of(&entry);
        // What a claim routed to the acknowledged q1 leaves.
        let ack = item["a:q1"].clone();
        item.insert("l:q1".into(), ack);
        assert_eq!(entry_of(&item).unwrap(), entry);
        assert_eq!(lease_holder(&item, "q1"), None);
        // A lease taken before q1's acknowledgement arrived (a late settlement) stays.
        let live = Lease {
            holder: "a3".into(),
            until_ms: i64::MAX,
        };
        item.insert("l:q1".into(), lease_value(&live));
        assert_eq!(entry_of(&item).unwrap().leases["q1"], live);
        assert_eq!(lease_holder(&item, "q1"), Some("a3"));
        assert_eq!(lease_holder(&item, "q2"), Some("a2"));
        assert_eq!(lease_holder(&item, "q3"), None);
        assert_eq!(position_of(&item, "a2"), Some(1));
        assert_eq!(position_of(&item, "a9"), None);
    }

    #[test]
    fn a_malformed_item_is_corrupt_not_a_panic() {
        let good = item_of(&entry());
        let cases: [(&str, Option<AttributeValue>); 7] = [
            (KEY, None),
            (EXPIRES_AT, None),
            (EXPIRES_AT, Some(s("soon"))),
            (BUNDLE_UUID, Some(n(7))),
            (ATTEMPTS, Some(s("none"))),
            ("a:q1", Some(map([("at", Some(n(1)))]))),
            (
                "l:q2",
                Some(map([("holder", Some(s("a2"))), ("until", Some(n("1.5")))])),
            ),
        ];
        for (attribute, value) in cases {
            let mut item = good.clone();
            match value {
                Some(value) => item.insert(attribute.to_owned(), value),
                None => item.remove(attribute),
            };
            assert!(
                matches!(entry_of(&item), Err(LedgerError::Corrupt { .. })),
                "{attribute}: {value:?}",
                value = item.get(attribute)
            );
        }
        let mut item = good;
        let AttributeValue::L(attempts) = item.get_mut(ATTEMPTS).unwrap() else {
            unreachable!()
        };
        let AttributeValue::M(first) = &mut attempts[0] else {
            unreachable!()
        };
        let AttributeValue::M(outcome) = first.get_mut("outcome").unwrap() else {
            unreachable!()
        };
        outcome.insert("q1".into(), map([("result", Some(s("lost")))]));
        let Err(LedgerError::Corrupt { key, reason }) = entry_of(&item) else {
            panic!("an unknown result is corrupt")
        };
        assert_eq!(
            (key.as_str(), reason.as_str()),
            ("k", "a delivery's result is \"lost\"")
        );
    }

    /// An item's size as DynamoDB bills it: each attribute's name and value in UTF-8 bytes, a
    /// number one byte per two significant digits plus one, a list or map 3 bytes plus one per
    /// element (and each map element's name).
    fn billed_size(item: &Item) -> usize {
        fn size(value: &AttributeValue) -> usize {
            match value {
                AttributeValue::S(text) => text.len(),
                AttributeValue::N(number) => {
                    let digits = number.trim_start_matches('-').trim_matches('0');
                    digits.replace('.', "").len().div_ceil(2) + 1
                }
                AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
                AttributeValue::L(list) => 3 + list.iter().map(|e| size(e) + 1).sum::<usize>(),
                AttributeValue::M(map) => {
                    3 + map
                        .iter()
                        .map(|(k, e)| k.len() + size(e) + 1)
                        .sum::<usize>()
                }
                other => panic!("the ledger writes no {other:?}"),
            }
        }
        item.iter()
            .map(|(name, value)| name.len() + size(value))
            .sum()
    }

    /// A DSS notification's entry as its claim leaves it: routed to `destinations`, each leased.
    fn claimed(destinations: &[&str]) -> Entry {
        let key = "d649e099e93e44b9b1682b362695caccd4e7ad961063788cb05690dec2ac6f38";
        let mut entry = Entry::new(
            key,
            &Identity {
                dedup_key: key.into(),
                subscription_id: "0a3a5b4c-7a39-4f7a-9c1e-5d1c7f0e8b21".into(),
                bundle_uuid: "c86309f6-e5b7-4698-abb6-b81644573bff".into(),
                bundle_version: "2019-02-26T033907.789762Z".into(),
                event_type: Some("TOMBSTONE".into()),
            },
        );
        entry.expires_at = 1_800_691_200;
        entry.attempts = vec![Attempt {
            id: "9f86d081884c7d65".into(),
            at_ms: 1_800_000_000_000,
            routes_version: Some("\"9b2cf535f27731c974343645a3985328\"".into()),
            split: None,
            routed: destinations.iter().map(|d| (*d).to_owned()).collect(),
            outcome: None,
        }];
        for destination in destinations {
            let lease = Lease {
                holder: "9f86d081884c7d65".into(),
                until_ms: 1_800_000_032_000,
            };
            entry.leases.insert((*destination).to_owned(), lease);
        }
        entry
    }

    /// `entry` after its attempt's settlement: every destination acknowledged.
    fn settled(mut entry: Entry) -> Entry {
        let leased = std::mem::take(&mut entry.leases);
        let mut outcome = BTreeMap::new();
        for destination in leased.into_keys() {
            let message_id = Some("5fea7756-0ea4-451a-a703-a558b933e274".to_owned());
            let ack = Ack {
                message_id: message_id.clone(),
                at_ms: 1_800_000_000_180,
                attempt: 0,
            };
            entry.acks.insert(destination.clone(), ack);
            let delivery = Delivery::Acknowledged {
                message_id,
                carried_from: None,
            };
            outcome.insert(destination, delivery);
        }
        entry.attempts[0].outcome = Some(outcome);
        entry
    }

    #[test]
    fn a_new_notification_costs_two_write_units() {
        // A write costs one unit per KB of the larger of the item before and after it; with no
        // index, a claim and a settlement under 1 KB are one unit each.
        let queue = "arn:aws:sqs:us-east-1:123456789012:hca-relay-notifications";
        let topic = "arn:aws:sns:us-east-1:123456789012:hca-relay-notifications";
        for destinations in [&[queue][..], &[queue, topic]] {
            let claim = claimed(destinations);
            let settlement = settled(claim.clone());
            let (claimed, settled) = (item_of(&claim), item_of(&settlement));
            for (when, item) in [("claimed", &claimed), ("settled", &settled)] {
                let size = billed_size(item);
                assert!(size <= 1024, "{destinations:?} {when}: {size} bytes");
            }
            assert_eq!(entry_of(&settled).unwrap(), settlement);
        }
        // The dedup key is the ledger key: written once.
        assert!(!item_of(&claimed(&[queue])).contains_key(DEDUP_KEY));
    }

    #[test]
    fn an_entry_is_kept_under_its_bundle_or_else_its_key() {
        let entry = claimed(&["q"]);
        let item = item_of(&entry);
        assert_eq!(item[BUNDLE_UUID], s("c86309f6-e5b7-4698-abb6-b81644573bff"));
        assert_eq!(item[KEY], s(&entry.key));
        // Another sender's event without an id: its key stands in, and reads back as no bundle.
        let mut event = entry.clone();
        event.identity.bundle_uuid = String::new();
        event.identity.dedup_key = "another key".into();
        let item = item_of(&event);
        assert_eq!(item[BUNDLE_UUID], s(&event.key));
        assert_eq!(item[DEDUP_KEY], s("another key"));
        assert_eq!(entry_of(&item).unwrap(), event);
    }
}
