//! A claim's one UpdateItem, said as [`Entry::claim`](super::super::Entry::claim)'s rules: the
//! attempt appended, the identity and expiry set, each routed destination leased unless
//! acknowledged, conditioned on the item being live and each routed destination free; and the
//! acknowledgements its old image holds.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::AttributeValue;

use super::item::{
    ACK, ATTEMPTS, BUNDLE_VERSION, DEDUP_KEY, EVENT_TYPE, EXPIRES_AT, Item, LEASE, SUBSCRIPTION_ID,
    ack_of, attempt_value, lease_value, n, s,
};
use super::{Expr, update_expression};
use crate::ledger::{Ack, Claim, Lease, LedgerError};

/// A claim's UpdateItem: its placeholders, its update expression and its condition (the rules
/// of [`Entry::claim`](crate::ledger::Entry::claim), said as one call).
pub(super) fn claim_update(
    claim: &Claim<'_>,
    routed: &BTreeSet<&str>,
    now_ms: i64,
) -> (Expr, String, String) {
    let mut x = Expr::default();
    let attempts = x.name("#att", ATTEMPTS);
    let empty = x.value(":empty", AttributeValue::L(Vec::new()));
    let new = x.value(
        ":attempt",
        AttributeValue::L(vec![attempt_value(claim.attempt)]),
    );
    let mut set = vec![format!(
        "{attempts} = list_append(if_not_exists({attempts}, {empty}), {new})"
    )];
    let mut remove = Vec::new();
    let id = claim.identity;
    // The bundle is the item's hash key, set by the call's key.
    for (placeholder, attribute, value) in [
        ("bv", BUNDLE_VERSION, Some(&id.bundle_version)),
        ("sub", SUBSCRIPTION_ID, Some(&id.subscription_id)),
        // Written only where it is not the ledger key (item_of).
        (
            "dk",
            DEDUP_KEY,
            Some(&id.dedup_key).filter(|k| *k != claim.key),
        ),
        ("ev", EVENT_TYPE, id.event_type.as_ref()),
    ] {
        let name = x.name(&format!("#{placeholder}"), attribute);
        match value {
            Some(v) => {
                let v = x.value(&format!(":{placeholder}"), s(v));
                set.push(format!("{name} = {v}"));
            }
            // The entry takes the identity of its latest attempt, as Entry::claim does.
            None => remove.push(name),
        }
    }
    // A plain SET, not the max of the old and new expiry: each attempt's expiry is its arrival
    // plus the retention, and arrivals only move forward (but for clock skew between
    // instances, which can only shorten the retention by that skew).
    let expires = x.name("#exp", EXPIRES_AT);
    let new_expiry = x.value(":exp", n(claim.expires_at));
    set.push(format!("{expires} = {new_expiry}"));
    // Live iff expires_at * 1000 >= now_ms (Entry::is_expired), i.e. expires_at >= ⌈now_s⌉.
    let now_s = now_ms.div_euclid(1000) + i64::from(now_ms.rem_euclid(1000) != 0);
    let now_s = x.value(":now_s", n(now_s));
    let mut condition = vec![format!(
        "(attribute_not_exists({expires}) OR {expires} >= {now_s})"
    )];
    if !routed.is_empty() {
        lease_routed(&mut x, claim, routed, now_ms, (&mut set, &mut condition));
    }
    let update = update_expression(&set, &remove);
    (x, update, condition.join(" AND "))
}

/// The claim's leases on `routed`, each conditioned on the destination being acknowledged,
/// unleased or past its lease.
fn lease_routed(
    x: &mut Expr,
    claim: &Claim<'_>,
    routed: &BTreeSet<&str>,
    now_ms: i64,
    (set, condition): (&mut Vec<String>, &mut Vec<String>),
) {
    let until = x.name("#until", "until");
    let now = x.value(":now_ms", n(now_ms));
    let lease = x.value(
        ":lease",
        lease_value(&Lease {
            holder: claim.attempt.id.clone(),
            until_ms: claim.lease_until_ms,
        }),
    );
    for (i, destination) in routed.iter().enumerate() {
        let ack = x.name(&format!("#a{i}"), format!("{ACK}{destination}"));
        let held = x.name(&format!("#l{i}"), format!("{LEASE}{destination}"));
        // Entry::claim leases only the destinations not yet acknowledged, which one call
        // cannot know before it writes: where the acknowledgement exists, the "lease" written
        // is a copy of it (`if_not_exists`), which leases nothing and is not read back as a
        // lease. Harmless: an acknowledgement always wins (see the condition below). It may
        // replace the live lease of an attempt that was still publishing when an earlier one's
        // late settlement acknowledged the same destination; that attempt's own settlement
        // then takes its second call.
        set.push(format!("{held} = if_not_exists({ack}, {lease})"));
        condition.push(format!(
            "(attribute_exists({ack}) OR attribute_not_exists({held}) OR {held}.{until} < {now})"
        ));
    }
}

/// Acknowledgements by destination.
type Acks = BTreeMap<String, Ack>;

/// The acknowledgements in the image `old`: of the routed destinations, and of the others.
pub(super) fn acks_by_routing(
    key: &str,
    old: &Item,
    routed: &BTreeSet<&str>,
) -> Result<(Acks, Acks), LedgerError> {
    let (mut acked, mut others) = (BTreeMap::new(), BTreeMap::new());
    for (name, value) in old {
        let Some(destination) = name.strip_prefix(ACK) else {
            continue;
        };
        let ack = ack_of(key, value)?;
        match routed.contains(destination) {
            true => acked.insert(destination.to_owned(), ack),
            false => others.insert(destination.to_owned(), ack),
        };
    }
    Ok((acked, others))
}
