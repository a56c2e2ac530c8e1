//! One notification's entry in the ledger, and the rules every store applies to it.
//!
//! The rules, once: a claim is refused while another attempt holds a live lease on a routed
//! destination that has not acknowledged; otherwise it leases every routed destination not yet
//! acknowledged and appends the attempt, keeping the last [`KEPT_ATTEMPTS`] (older ones are
//! counted in [`Entry::folded`], so an entry's size does not grow with its retries; DynamoDB
//! folds by the batch, at twice that). A settlement keeps the first acknowledgement of each
//! destination, frees the attempt's own leases and writes its outcome. An entry past its expiry
//! is treated as absent. The embedded and Firestore stores apply [`Entry::claim`] and
//! [`Entry::settle`] inside a transaction; the DynamoDB store says the same in condition and
//! update expressions, and the conformance tests hold every store to the same answers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Which notification an entry is about, as the DSS named it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The notification's dedup key (equal across every DSS retry).
    pub dedup_key: String,
    /// The subscription that sent it.
    pub subscription_id: String,
    /// The bundle.
    pub bundle_uuid: String,
    /// The bundle's version.
    pub bundle_version: String,
    /// `CREATE`, `TOMBSTONE`, `DELETE`; absent for v1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
}

/// A destination's acknowledgement: the first one wins and is never replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {
    /// The id the destination gave the message, where it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// When it was recorded, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The index of the attempt that published it.
    pub attempt: usize,
}

/// An attempt's hold on one destination: no other attempt publishes there until `until_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The attempt's id.
    pub holder: String,
    /// When the lease ends, in milliseconds since the Unix epoch.
    pub until_ms: i64,
}

/// What one destination did in one attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Delivery {
    /// The destination took the message.
    Acknowledged {
        /// Its message id, where it gives one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// Not published by this attempt: an earlier release's acknowledgement, recorded under
        /// the destination's old name (this one), now counted under its resource.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        carried_from: Option<String>,
    },
    /// It did not, or its answer was lost.
    Failed {
        /// Whether the sender was asked to retry (503) rather than told an operator must act.
        retryable: bool,
        /// What went wrong.
        error: String,
    },
}

/// One request for a notification that got past its claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// A random id, the holder of the attempt's leases.
    pub id: String,
    /// When it arrived, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The stored routes' version that routed it, if stored routes were in effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes_version: Option<String>,
    /// The split that took it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<String>,
    /// The destinations its routes chose; empty when no route took it.
    #[serde(default)]
    pub routed: Vec<String>,
    /// What each destination it published to did; absent until it settles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<BTreeMap<String, Delivery>>,
}

/// One notification's entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The ledger key: the dedup key, or the bundle-and-event key (`RELAY_LEDGER_KEY`).
    pub key: String,
    /// The notification, as its latest attempt named it.
    pub identity: Identity,
    /// Each destination's first acknowledgement.
    #[serde(default)]
    pub acks: BTreeMap<String, Ack>,
    /// Leases held on destinations still being published to.
    #[serde(default)]
    pub leases: BTreeMap<String, Lease>,
    /// The last attempts that got past their claim (at most [`KEPT_ATTEMPTS`] after a claim),
    /// in order: `attempts[i]` is the entry's attempt number `folded + i`.
    #[serde(default)]
    pub attempts: Vec<Attempt>,
    /// How many earlier attempts were folded away, so that an entry's size (and a claim's cost)
    /// does not grow with the number of retries.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub folded: usize,
    /// When the first attempt arrived (ms since the Unix epoch), kept once it is folded away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_at_ms: Option<i64>,
    /// When the entry may be forgotten, in seconds since the Unix epoch: the retention after
    /// its last write.
    pub expires_at: i64,
}

/// The most attempts an entry keeps after a claim; older ones are folded into
/// [`Entry::folded`]. Their acknowledgements stay: only their outcomes are forgotten.
pub const KEPT_ATTEMPTS: usize = 16;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A request to publish one notification: take the leases, append the attempt.
#[derive(Debug, Clone)]
pub struct Claim<'a> {
    /// The ledger key.
    pub key: &'a str,
    /// The notification.
    pub identity: &'a Identity,
    /// The attempt, without an outcome.
    pub attempt: &'a Attempt,
    /// When the leases end: the attempt's deadline for its sinks, plus a margin.
    pub lease_until_ms: i64,
    /// The entry's new expiry (seconds).
    pub expires_at: i64,
}

/// The answer to a [`Claim`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// The attempt is recorded, and holds the leases of every routed destination not in
    /// [`Grant::acked`].
    Granted(Grant),
    /// Another attempt holds a live lease on a routed destination; nothing was written.
    Busy {
        /// When the last of those leases ends (milliseconds since the Unix epoch).
        until_ms: i64,
    },
}

/// A granted [`Claim`]: where the attempt stands in its entry, and what was acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The attempt's index in the entry.
    pub attempt: usize,
    /// The routed destinations that had acknowledged already, with their acknowledgements.
    pub acked: BTreeMap<String, Ack>,
    /// The entry's other acknowledgements (destinations this attempt was not routed to, or an
    /// earlier release's names for them), for the relay to carry over.
    pub others: BTreeMap<String, Ack>,
    /// When the entry's first attempt arrived (this attempt's, for a new entry), in
    /// milliseconds since the Unix epoch: how long the notification has waited.
    pub since_ms: i64,
    /// How many attempts the entry had folded away after this claim ([`Entry::folded`]): the
    /// attempt is at `attempt - folded` among those kept, for its settlement.
    pub folded: usize,
}

/// Where a granted attempt stands: its entry, and the attempt holding the leases. What its
/// settlement names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldAttempt {
    /// The ledger key.
    pub key: String,
    /// The entry's `bundle_uuid`, as its claim's identity gave it (where DynamoDB keeps it).
    pub bundle: String,
    /// The attempt's id (the holder of its leases).
    pub holder: String,
    /// The attempt's index, as its grant gave it.
    pub attempt: usize,
    /// The entry's folded attempts, as its grant gave them: where a store finds the attempt
    /// among those it keeps (`attempt - folded`, unless more were folded since).
    pub folded: usize,
}

/// What an attempt's publishes did.
#[derive(Debug, Clone)]
pub struct Settlement<'a> {
    /// The attempt, where its claim left it.
    pub held: &'a HeldAttempt,
    /// Each destination it published to, and what it did.
    pub results: &'a BTreeMap<String, Delivery>,
    /// Now, in milliseconds since the Unix epoch.
    pub now_ms: i64,
    /// The entry's new expiry (seconds).
    pub expires_at: i64,
}

/// What became of one attempt, as `relay trace` tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// No route took it.
    Filtered,
    /// Every destination it was routed to had acknowledged before it: answered 202
    /// `duplicate` without publishing.
    Duplicate,
    /// It published, and every destination it published to acknowledged.
    Published,
    /// It published, and at least one destination failed: the sender was asked to retry.
    Failed,
    /// It holds live leases: it is publishing now.
    InProgress,
    /// It claimed and never settled (its instance stopped, or the settlement was lost); its
    /// leases expired.
    Interrupted,
}

impl Entry {
    /// An entry with no attempt yet.
    pub fn new(key: &str, identity: &Identity) -> Self {
        Self {
            key: key.to_owned(),
            identity: identity.clone(),
            acks: BTreeMap::new(),
            leases: BTreeMap::new(),
            attempts: Vec::new(),
            folded: 0,
            first_at_ms: None,
            expires_at: 0,
        }
    }

    /// When the entry's first attempt arrived, if it has one.
    pub fn first_at_ms(&self) -> Option<i64> {
        self.first_at_ms
            .or_else(|| self.attempts.first().map(|a| a.at_ms))
    }

    /// The attempt numbered `index` (counting the folded ones), if it is still kept.
    pub fn attempt(&self, index: usize) -> Option<&Attempt> {
        self.attempts.get(index.checked_sub(self.folded)?)
    }

    /// The numbers of the attempts kept, oldest first.
    pub fn kept(&self) -> std::ops::Range<usize> {
        self.folded..self.folded + self.attempts.len()
    }

    /// True when the entry is past its retention and counts as absent.
    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.expires_at.saturating_mul(1000) < now_ms
    }

    /// Applies `claim` at `now_ms`: refuses it while another attempt holds a live lease on an
    /// unacknowledged routed destination, else leases those destinations and appends the
    /// attempt. An expired entry is started afresh first.
    pub fn claim(&mut self, claim: &Claim<'_>, now_ms: i64) -> Claimed {
        if self.is_expired(now_ms) {
            *self = Self::new(claim.key, claim.identity);
        }
        let routed = &claim.attempt.routed;
        let busy = routed
            .iter()
            .filter(|d| !self.acks.contains_key(*d))
            .filter_map(|d| self.leases.get(d))
            .filter(|lease| lease.until_ms >= now_ms)
            .map(|lease| lease.until_ms)
            .max();
        if let Some(until_ms) = busy {
            return Claimed::Busy { until_ms };
        }
        let mut acked = BTreeMap::new();
        for destination in routed {
            match self.acks.get(destination) {
                Some(ack) => {
                    acked.insert(destination.clone(), ack.clone());
                }
                None => {
                    self.leases.insert(
                        destination.clone(),
                        Lease {
                            holder: claim.attempt.id.clone(),
                            until_ms: claim.lease_until_ms,
                        },
                    );
                }
            }
        }
        self.identity = claim.identity.clone();
        let first_at_ms = self.first_at_ms().unwrap_or(claim.attempt.at_ms);
        self.attempts.push(claim.attempt.clone());
        let excess = self.attempts.len().saturating_sub(KEPT_ATTEMPTS);
        if excess > 0 {
            self.attempts.drain(..excess);
            self.folded += excess;
            self.first_at_ms = Some(first_at_ms);
        }
        self.expires_at = self.expires_at.max(claim.expires_at);
        let others = self
            .acks
            .iter()
            .filter(|(d, _)| !acked.contains_key(*d))
            .map(|(d, ack)| (d.clone(), ack.clone()))
            .collect();
        Claimed::Granted(Grant {
            attempt: self.folded + self.attempts.len() - 1,
            acked,
            others,
            since_ms: first_at_ms,
            folded: self.folded,
        })
    }

    /// Applies `settlement`: the first acknowledgement of each destination stays, the attempt's
    /// own leases are freed (a lease another attempt took over after expiry stays), and the
    /// attempt's outcome is written.
    pub fn settle(&mut self, settlement: &Settlement<'_>) {
        let held = settlement.held;
        for (destination, delivery) in settlement.results {
            if let Delivery::Acknowledged { message_id, .. } = delivery {
                self.acks.entry(destination.clone()).or_insert_with(|| Ack {
                    message_id: message_id.clone(),
                    at_ms: settlement.now_ms,
                    attempt: held.attempt,
                });
            }
            if self
                .leases
                .get(destination)
                .is_some_and(|lease| lease.holder == held.holder)
            {
                self.leases.remove(destination);
            }
        }
        let kept = held.attempt.checked_sub(self.folded);
        if let Some(attempt) = kept
            .and_then(|i| self.attempts.get_mut(i))
            .filter(|a| a.id == held.holder)
        {
            attempt.outcome = Some(settlement.results.clone());
        }
        self.expires_at = self.expires_at.max(settlement.expires_at);
    }

    /// What became of the attempt at `index`, as of `now_ms`.
    ///
    /// An attempt that never settled and holds no live lease is a duplicate when every
    /// destination it was routed to had been acknowledged by an earlier attempt before it
    /// arrived: its claim found nothing to publish. (Its claim cannot have found one of them
    /// unacknowledged with that earlier attempt's lease live: it would have been refused.)
    pub fn verdict(&self, index: usize, now_ms: i64) -> Option<Verdict> {
        let attempt = self.attempt(index)?;
        if attempt.routed.is_empty() {
            return Some(Verdict::Filtered);
        }
        if let Some(outcome) = &attempt.outcome {
            let failed = outcome
                .values()
                .any(|d| matches!(d, Delivery::Failed { .. }));
            let carried = |d: &Delivery| {
                matches!(
                    d,
                    Delivery::Acknowledged {
                        carried_from: Some(_),
                        ..
                    }
                )
            };
            return Some(match failed {
                true => Verdict::Failed,
                // It only carried an earlier release's acknowledgements over: published nothing.
                false if outcome.values().all(carried) => Verdict::Duplicate,
                false => Verdict::Published,
            });
        }
        let holds_live_lease = self
            .leases
            .values()
            .any(|l| l.holder == attempt.id && l.until_ms >= now_ms);
        if holds_live_lease {
            return Some(Verdict::InProgress);
        }
        let all_acked_before = attempt.routed.iter().all(|d| {
            self.acks
                .get(d)
                .is_some_and(|ack| ack.attempt < index && ack.at_ms <= attempt.at_ms)
        });
        Some(match all_acked_before {
            true => Verdict::Duplicate,
            false => Verdict::Interrupted,
        })
    }

    /// How many attempts were answered as duplicates, without publishing.
    pub fn duplicates(&self, now_ms: i64) -> usize {
        self.kept()
            .filter(|&i| self.verdict(i, now_ms) == Some(Verdict::Duplicate))
            .count()
    }
}
