//! The delivery ledger (`RELAY_LEDGER_URL`): what became of each notification at each
//! destination, kept for the retention after its last attempt, so that a DSS retry publishes
//! only where the last attempt did not land, and `relay trace` can say what happened.
//!
//! One [`Entry`] per notification, under its [`LedgerKey`]. An attempt first *claims* (one
//! conditional write: the leases of the routed destinations not yet acknowledged, and the
//! attempt itself), publishes to those destinations only, then *settles* (one write: the
//! acknowledgements and message ids, the leases freed). A duplicate costs the claim alone. The
//! rules are [`Entry::claim`] and [`Entry::settle`]; each store applies them atomically.
//!
//! Stores, each behind its cargo feature: DynamoDB (`dynamodb://TABLE`), Firestore
//! (`firestore://PROJECT/DATABASE/COLLECTION`) and an embedded SQLite file (a path).

#[cfg(feature = "dynamodb")]
mod dynamodb;
mod entry;
#[cfg(feature = "firestore")]
mod firestore;
#[cfg(feature = "sqlite")]
mod sqlite;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::cloud::Cloud;
use crate::text::StoreUrl;

#[cfg(feature = "dynamodb")]
pub use dynamodb::{Copied, DynamoDbLedger};
pub use entry::{
    Ack, Attempt, Claim, Claimed, Delivery, Entry, Grant, HeldAttempt, Identity, KEPT_ATTEMPTS,
    Lease, Settlement, Verdict,
};
#[cfg(feature = "firestore")]
pub use firestore::FirestoreLedger;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteLedger;

/// The default retention: 8 days after the last attempt, beyond the DSS v1's 7 days of retries.
pub(crate) const DEFAULT_RETENTION_SECS: u64 = 8 * 24 * 3600;

/// Added to an attempt's deadline for its sinks to make its leases: the time a settlement
/// may take after the last sink answered.
pub(crate) const LEASE_MARGIN_MS: i64 = 2_000;

/// Where the ledger lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerUrl {
    /// A DynamoDB table.
    DynamoDb {
        /// The table's name.
        table: String,
    },
    /// A Firestore collection.
    Firestore {
        /// The project id.
        project: String,
        /// The database id (`(default)` for the default database).
        database: String,
        /// The collection id.
        collection: String,
    },
    /// An SQLite file on this machine.
    File(PathBuf),
}

const URL_FORMS: &str =
    "a path, dynamodb://<table> or firestore://<project>/<database>/<collection>";

impl std::str::FromStr for LedgerUrl {
    type Err = crate::text::InvalidValue;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let refuse = || format!("expected {URL_FORMS}, got {:?}", text.trim()).into();
        // DynamoDB table names: 3 to 255 of [A-Za-z0-9_.-].
        let table = |t: &str| {
            (3..=255).contains(&t.len())
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        };
        let id = |p: &&str| !p.is_empty() && !p.contains(['?', '#']);
        match StoreUrl::parse(text).ok_or_else(refuse)? {
            StoreUrl::Remote {
                scheme: "dynamodb",
                name,
                path: None,
            } if table(name) => Ok(Self::DynamoDb {
                table: name.to_owned(),
            }),
            StoreUrl::Remote {
                scheme: "firestore",
                name: project,
                path: Some(path),
            } => match path.split('/').collect::<Vec<_>>()[..] {
                [database, collection] if [project, database, collection].iter().all(id) => {
                    Ok(Self::Firestore {
                        project: project.to_owned(),
                        database: database.to_owned(),
                        collection: collection.to_owned(),
                    })
                }
                _ => Err(refuse()),
            },
            StoreUrl::Local(path) => Ok(Self::File(PathBuf::from(path))),
            StoreUrl::Remote { .. } => Err(refuse()),
        }
    }
}

crate::text::deserialize_from_text!(LedgerUrl, URL_FORMS);

impl fmt::Display for LedgerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DynamoDb { table } => write!(f, "dynamodb://{table}"),
            Self::Firestore {
                project,
                database,
                collection,
            } => write!(f, "firestore://{project}/{database}/{collection}"),
            Self::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// What the ledger is keyed on (`RELAY_LEDGER_KEY`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LedgerKey {
    /// The notification's dedup key: one entry per subscription, bundle version and event.
    #[default]
    DedupKey,
    /// The bundle, its version and the event alone, without the subscription id: a subscriber
    /// registered on both DSS replicas gets each bundle once.
    BundleEvent,
}

impl LedgerKey {
    /// The key of the notification named by `identity`.
    pub fn of(self, identity: &Identity) -> String {
        match self {
            Self::DedupKey => identity.dedup_key.clone(),
            Self::BundleEvent => crate::notification::dedup_key(
                "",
                &identity.bundle_uuid,
                &identity.bundle_version,
                identity.event_type.as_deref(),
            ),
        }
    }
}

impl std::str::FromStr for LedgerKey {
    type Err = crate::text::InvalidValue;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "dedup_key" => Ok(Self::DedupKey),
            "bundle_event" => Ok(Self::BundleEvent),
            other => Err(format!("expected dedup_key or bundle_event, got {other:?}").into()),
        }
    }
}

crate::text::deserialize_from_text!(LedgerKey, "dedup_key or bundle_event");

impl fmt::Display for LedgerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::DedupKey => "dedup_key",
            Self::BundleEvent => "bundle_event",
        })
    }
}

/// Why the ledger could not answer. Every one of them is a 503 to the sender, with nothing
/// published: the DSS retries.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The store could not be reached, throttled the call or timed out.
    #[error("the ledger is unavailable: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The store answered with a refusal an operator must fix: a missing table, a missing grant.
    #[error("the ledger refused the call: {0}")]
    Refused(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// An entry could not be read back.
    #[error("the ledger entry {key} cannot be read: {reason}")]
    Corrupt {
        /// The entry's key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A lookup by key without the bundle, in a store that keeps each entry under its bundle.
    #[error(
        "this ledger finds a key within its bundle: name the bundle (the message's dss.bundle_uuid attribute, or another sender's event id) with the key"
    )]
    KeyWithoutBundle,
    /// The store cannot be opened (a path that is not a database, a build without its feature).
    #[error("{0}")]
    Open(String),
}

/// What `relay trace` looks up: a lookup, never a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// One entry, by its ledger key, with the bundle (or other sender's event id) it is about
    /// where that is known: a DynamoDB ledger keeps each entry under its bundle, and finds a
    /// key only within it ([`LedgerError::KeyWithoutBundle`]); the others need the key alone.
    Key {
        /// The ledger key.
        key: String,
        /// The entry's `bundle_uuid`.
        bundle: Option<String>,
    },
    /// Every entry of one bundle (each version, event and subscription).
    Bundle(String),
}

/// A store of entries. Every call is one round trip in the common case.
#[async_trait::async_trait]
pub trait Ledger: Send + Sync + fmt::Debug {
    /// Applies [`Entry::claim`] atomically, at `now_ms`.
    async fn claim(&self, claim: &Claim<'_>, now_ms: i64) -> Result<Claimed, LedgerError>;
    /// Applies [`Entry::settle`] atomically.
    async fn settle(&self, settlement: &Settlement<'_>) -> Result<(), LedgerError>;
    /// The entries `lookup` names, expired ones included (their expiry says so).
    async fn find(&self, lookup: &Lookup) -> Result<Vec<Entry>, LedgerError>;
    /// Opens the store's connection before the first claim (one call that writes nothing; any
    /// answer will do); nothing to open by default.
    async fn warm(&self) -> Result<(), LedgerError> {
        Ok(())
    }
}

/// Opens the ledger at `url` to read it only (`relay trace`): an SQLite file read-only and never
/// created or swept; the cloud stores as [`open`] opens them, which writes nothing.
pub async fn open_read_only(url: &LedgerUrl) -> Result<Arc<dyn Ledger>, LedgerError> {
    match url {
        #[cfg(feature = "sqlite")]
        LedgerUrl::File(path) => Ok(Arc::new(SqliteLedger::open_read_only(path)?)),
        _ => open(url, &Cloud::default()).await,
    }
}

/// Opens the ledger at `url`, creating an SQLite file (and its folders) when it is missing.
/// `cloud`: the clouds' configuration, shared with the relay's other clients.
#[cfg_attr(not(feature = "dynamodb"), allow(unused_variables))]
pub async fn open(url: &LedgerUrl, cloud: &Cloud) -> Result<Arc<dyn Ledger>, LedgerError> {
    match url {
        #[cfg(feature = "sqlite")]
        LedgerUrl::File(path) => Ok(Arc::new(SqliteLedger::open(path)?)),
        #[cfg(feature = "dynamodb")]
        LedgerUrl::DynamoDb { table } => Ok(Arc::new(
            DynamoDbLedger::new(cloud.aws().await, table).await?,
        )),
        #[cfg(feature = "firestore")]
        LedgerUrl::Firestore {
            project,
            database,
            collection,
        } => Ok(Arc::new(FirestoreLedger::new(
            project, database, collection,
        )?)),
        #[allow(unreachable_patterns)]
        other => Err(LedgerError::Open(format!(
            "{other}: this build leaves out the cargo feature for this store"
        ))),
    }
}

/// Copies the live entries of `earlier`, a DynamoDB table of the layout before tables were keyed
/// by bundle, into the DynamoDB ledger `into` (`relay ledger migrate`); entries expired at `now`
/// are left out.
#[cfg(feature = "dynamodb")]
pub async fn copy_earlier_table(
    earlier: &str,
    into: &str,
    now: std::time::SystemTime,
) -> Result<Copied, LedgerError> {
    let cloud = Cloud::default();
    let now_s = epoch_ms(now).div_euclid(1000);
    DynamoDbLedger::new(cloud.aws().await, into)
        .await?
        .copy_earlier(earlier, now_s)
        .await
}

/// Milliseconds since the Unix epoch.
pub fn epoch_ms(time: std::time::SystemTime) -> i64 {
    match time.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// A new attempt id: 16 hex characters that look random in every digit, never the same twice
/// in a process, and the same as another process's only by chance: a counter that starts at a
/// random value read once, passed through SplitMix64's finalizer (a bijection of `u64`), so no
/// attempt reads the system's random source.
pub fn attempt_id() -> String {
    static NEXT: std::sync::OnceLock<std::sync::atomic::AtomicU64> = std::sync::OnceLock::new();
    let next = NEXT.get_or_init(|| {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).expect("the system's random source");
        u64::from_le_bytes(bytes).into()
    });
    let mut z = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    format!("{:016x}", z ^ (z >> 31))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempt_ids_are_sixteen_hex_digits_and_never_repeat_even_in_their_first_digits() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| attempt_id()).collect();
        assert_eq!(ids.len(), 1000);
        // Tests and tools take a prefix as a random name: consecutive ids differ there too.
        let prefixes: std::collections::HashSet<&str> = ids.iter().map(|id| &id[..8]).collect();
        assert_eq!(prefixes.len(), 1000);
        assert!(
            ids.iter()
                .all(|id| id.len() == 16 && id.chars().all(|c| c.is_ascii_hexdigit()))
        );
    }

    #[test]
    fn urls_parse_and_print_back() {
        for text in [
            "dynamodb://relay-ledger",
            "firestore://my-project/(default)/deliveries",
            "target/ledger.db",
        ] {
            let url: LedgerUrl = text.parse().unwrap();
            assert_eq!(url.to_string(), text);
        }
        for bad in [
            "",
            "dynamodb://",
            "dynamodb://a",
            "dynamodb://has space",
            "firestore://p/d",
            "firestore://p//c",
            "firestore://p/d/c/extra",
            "s3://bucket/key",
        ] {
            assert!(bad.parse::<LedgerUrl>().is_err(), "{bad:?} is refused");
        }
    }

    #[test]
    fn the_bundle_event_key_leaves_the_subscription_out() {
        let a = Identity {
            dedup_key: "one".into(),
            subscription_id: "replica-aws".into(),
            bundle_uuid: "b".into(),
            bundle_version: "v".into(),
            event_type: Some("CREATE".into()),
        };
        let b = Identity {
            dedup_key: "two".into(),
            subscription_id: "replica-gcp".into(),
            ..a.clone()
        };
        assert_ne!(LedgerKey::DedupKey.of(&a), LedgerKey::DedupKey.of(&b));
        assert_eq!(LedgerKey::BundleEvent.of(&a), LedgerKey::BundleEvent.of(&b));
        let tombstone = Identity {
            event_type: Some("TOMBSTONE".into()),
            ..a.clone()
        };
        assert_ne!(
            LedgerKey::BundleEvent.of(&a),
            LedgerKey::BundleEvent.of(&tombstone)
        );
    }
}
