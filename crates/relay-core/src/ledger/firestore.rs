//! The ledger in a Firestore collection (`firestore://PROJECT/DATABASE/COLLECTION`), for Cloud
//! Run, over the Firestore REST API v1 with tokens from Google's auth crate; against
//! `FIRESTORE_EMULATOR_HOST` in plain HTTP with the emulator's `Bearer owner` and no credentials.
//!
//! One document per entry: its id is the ledger key, its fields `bundle_uuid` (string; the
//! automatic single-field index answers `relay trace`'s query), `expires_at` (timestamp; the
//! collection's TTL policy deletes the document after it) and `state` (string: the [`Entry`] as
//! JSON). The entry's rules are applied here, between a read and a conditional write:
//!
//! - claim: a commit creating the document with the precondition `exists: false` (a new
//!   notification: one call). When the document exists: read it (`documents:batchGet`), apply
//!   [`Entry::claim`] and commit with the precondition `updateTime` = the read's. When another
//!   write came in between, read again, up to [`ROUNDS`] commits, then answer busy. A busy answer
//!   writes nothing.
//! - settle: [`Entry::settle`] on the entry the claim wrote, committed with the `updateTime` of
//!   that write (one call), remembered for the last [`REMEMBERED`] claims; else, or when another
//!   write came in between, read and commit. A document deleted since its claim is not recreated.
//! - find: `documents:batchGet` for a key, `documents:runQuery` with `bundle_uuid == X` for a
//!   bundle.
//!
//! Calls per claim: 1 for a new notification, 3 for a retry or a duplicate (the create that
//! fails, the read, the commit), 2 for a claim a live lease refuses; 1 per settlement.
//!
//! Reads use `batchGet` rather than `documents.get`, as Google's client libraries do: a missing
//! document is an answer there, and a 404 means the database or project is missing.
//! Every call has a [`TIMEOUT`]. Throttling, server errors, timeouts and connection failures are
//! [`LedgerError::Unavailable`]; refusals an operator must fix (permission, a missing database)
//! are [`LedgerError::Refused`]; a document or answer that cannot be read is
//! [`LedgerError::Corrupt`].

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use google_cloud_auth::credentials::{CacheableResource, Credentials};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Claim, Claimed, Entry, Ledger, LedgerError, Lookup, Settlement};

/// How long one call may take before the ledger counts as unavailable.
const TIMEOUT: Duration = Duration::from_secs(4);

/// How many commits a claim or settlement tries when other writes keep coming in between.
const ROUNDS: usize = 5;

/// How many granted claims' writes are remembered for their settlements.
const REMEMBERED: usize = 1024;

/// When the commits of a claim run out, the sender is asked to retry after this long.
const CONTENDED_RETRY_MS: i64 = 1_000;

/// The latest time a Firestore timestamp holds (9999-12-31T23:59:59Z).
const MAX_TIMESTAMP_SECS: i64 = 253_402_300_799;

const GOOGLE_ENDPOINT: &str = "https://firestore.googleapis.com";

/// The Firestore store.
#[derive(Debug, Clone)]
pub struct FirestoreLedger {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: reqwest::Client,
    /// `<endpoint>/v1/projects/P/databases/D/documents`.
    base: String,
    /// `projects/P/databases/D/documents/C`, the prefix of every document's name.
    prefix: String,
    collection: String,
    /// `None` against the emulator.
    credentials: Option<Credentials>,
    remembered: Mutex<Remembered>,
}

/// A document as read or written: its entry and its `updateTime`.
#[derive(Debug, Clone)]
struct Stored {
    entry: Entry,
    update_time: String,
}

/// The documents the latest granted claims wrote, by attempt id, oldest first out.
#[derive(Debug, Default)]
struct Remembered {
    by_holder: HashMap<String, Stored>,
    order: VecDeque<String>,
}

/// A commit's precondition.
#[derive(Debug)]
enum Precondition<'a> {
    Absent,
    UpdatedAt(&'a str),
}

/// A commit's outcome, other than an error.
#[derive(Debug)]
enum Committed {
    /// Written; the document's new `updateTime`.
    Written(String),
    /// The precondition failed: another write came first.
    Conflict,
}

/// What Firestore answered to a call that failed.
#[derive(Debug, thiserror::Error)]
#[error("Firestore {op} answered HTTP {status} {code}: {message}")]
struct FirestoreError {
    op: &'static str,
    status: u16,
    code: String,
    message: String,
}

impl FirestoreError {
    fn new(op: &'static str, status: u16, body: &[u8]) -> Self {
        let value: Value = serde_json::from_slice(body).unwrap_or_default();
        // An object, or (from the streaming methods) an array of one.
        let error = value.get("error").or_else(|| value.get(0)?.get("error"));
        let text = |field: &str| Some(error?.get(field)?.as_str()?.to_owned());
        Self {
            op,
            status,
            code: text("status").unwrap_or_default(),
            message: text("message").unwrap_or_else(|| {
                String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned()
            }),
        }
    }

    /// A commit's precondition failed: `exists: false` (ALREADY_EXISTS), `updateTime`
    /// (FAILED_PRECONDITION), or a contended write (ABORTED).
    fn is_conflict(&self) -> bool {
        self.status == 409 || (self.status == 400 && self.code == "FAILED_PRECONDITION")
    }

    /// Throttling, server errors and contention are transient; anything else an operator must
    /// look at (a missing grant or database, a malformed name).
    fn into_ledger(self) -> LedgerError {
        match (self.status, self.code.as_str()) {
            (408 | 429 | 500..=599, _) | (409, "ABORTED") => LedgerError::Unavailable(self.into()),
            _ => LedgerError::Refused(self.into()),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    name: String,
    #[serde(default)]
    fields: BTreeMap<String, Value>,
    update_time: String,
}

/// An element of the answer of `batchGet` (`found`) or `runQuery` (`document`).
#[derive(Debug, Deserialize)]
struct Item {
    found: Option<Document>,
    document: Option<Document>,
}

impl FirestoreLedger {
    /// The collection `collection` of database `database` in project `project`: against the
    /// emulator at `FIRESTORE_EMULATOR_HOST` (`host:port`) when it is set, else against Google
    /// with the platform's default credentials.
    pub fn new(project: &str, database: &str, collection: &str) -> Result<Self, LedgerError> {
        if let Some(endpoint) = crate::google::emulator("FIRESTORE_EMULATOR_HOST") {
            return Self::emulator(&endpoint, project, database, collection);
        }
        let credentials = crate::google::credentials()
            .map_err(|e| LedgerError::Open(format!("Google credentials for Firestore: {e}")))?;
        let location = [project, database, collection];
        Self::with(GOOGLE_ENDPOINT, Some(credentials), location)
    }

    /// The same collection in the Firestore emulator at `host` (`host:port`, or a URL), in plain
    /// HTTP and without credentials, never through a proxy.
    pub fn emulator(
        host: &str,
        project: &str,
        database: &str,
        collection: &str,
    ) -> Result<Self, LedgerError> {
        let endpoint = match host.contains("://") {
            true => host.trim_end_matches('/').to_owned(),
            false => format!("http://{host}"),
        };
        Self::with(&endpoint, None, [project, database, collection])
    }

    fn with(
        endpoint: &str,
        credentials: Option<Credentials>,
        [project, database, collection]: [&str; 3],
    ) -> Result<Self, LedgerError> {
        let mut http = reqwest::Client::builder().timeout(TIMEOUT);
        if credentials.is_none() {
            http = http.no_proxy();
        }
        let http = http
            .build()
            .map_err(|e| LedgerError::Open(format!("an HTTP client for Firestore: {e}")))?;
        let documents = format!("projects/{project}/databases/{database}/documents");
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                base: format!("{endpoint}/v1/{documents}"),
                prefix: format!("{documents}/{collection}"),
                collection: collection.to_owned(),
                credentials,
                remembered: Mutex::default(),
            }),
        })
    }
}

impl Inner {
    /// One call: POSTs `body` to `<base>:<op>`; a 200's body, or what Firestore refused.
    async fn call(
        &self,
        op: &'static str,
        key: &str,
        body: &Value,
    ) -> Result<Result<bytes::Bytes, FirestoreError>, LedgerError> {
        let started = Instant::now();
        let request = self
            .http
            .post(format!("{}:{op}", self.base))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(body).expect("a JSON value serializes"));
        let request = match &self.credentials {
            None => request.bearer_auth("owner"),
            Some(credentials) => match credentials.headers(http::Extensions::new()).await {
                Ok(CacheableResource::New { data, .. }) => request.headers(data),
                Ok(CacheableResource::NotModified) => {
                    return Err(LedgerError::Unavailable("no Google auth headers".into()));
                }
                Err(e) if e.is_transient() => return Err(LedgerError::Unavailable(e.into())),
                Err(e) => return Err(LedgerError::Refused(e.into())),
            },
        };
        let answer = async {
            let response = request.send().await?;
            Ok::<_, reqwest::Error>((response.status().as_u16(), response.bytes().await?))
        }
        .await;
        let elapsed_ms = started.elapsed().as_millis();
        let (status, body) = answer.map_err(|e| {
            tracing::warn!(op, key, elapsed_ms, error = %e, "Firestore call failed.");
            LedgerError::Unavailable(e.into())
        })?;
        tracing::debug!(op, key, status, elapsed_ms, "Firestore call.");
        if status == 200 {
            return Ok(Ok(body));
        }
        let error = FirestoreError::new(op, status, &body);
        if !error.is_conflict() {
            tracing::warn!(op, key, status, code = %error.code, message = %error.message,
                "Firestore refused a call.");
        }
        Ok(Err(error))
    }

    fn name(&self, key: &str) -> String {
        format!("{}/{key}", self.prefix)
    }

    /// The document of `key`, if there is one.
    async fn read(&self, key: &str) -> Result<Option<Stored>, LedgerError> {
        let body = json!({ "documents": [self.name(key)] });
        let answer = self.call("batchGet", key, &body).await?;
        let items: Vec<Item> = parse(key, &answer.map_err(FirestoreError::into_ledger)?)?;
        match items.into_iter().find_map(|i| i.found) {
            Some(document) => Ok(Some(stored(key, document)?)),
            None => Ok(None),
        }
    }

    /// Writes `entry` as the whole document of `key`, if `precondition` holds.
    async fn commit(
        &self,
        key: &str,
        entry: &Entry,
        precondition: Precondition<'_>,
    ) -> Result<Committed, LedgerError> {
        let current = match precondition {
            Precondition::Absent => json!({ "exists": false }),
            Precondition::UpdatedAt(time) => json!({ "updateTime": time }),
        };
        let state = serde_json::to_string(entry).expect("an entry serializes");
        let body = json!({ "writes": [{
            "update": {
                "name": self.name(key),
                "fields": {
                    "bundle_uuid": { "stringValue": entry.identity.bundle_uuid },
                    "expires_at": { "timestampValue": timestamp(entry.expires_at) },
                    "state": { "stringValue": state },
                },
            },
            "currentDocument": current,
        }]});
        match self.call("commit", key, &body).await? {
            Ok(answer) => {
                let answer: Value = parse(key, &answer)?;
                match answer
                    .pointer("/writeResults/0/updateTime")
                    .and_then(Value::as_str)
                {
                    Some(time) => Ok(Committed::Written(time.to_owned())),
                    None => Err(LedgerError::Corrupt {
                        key: key.to_owned(),
                        reason: "the commit answered no update time".into(),
                    }),
                }
            }
            Err(e) if e.is_conflict() => Ok(Committed::Conflict),
            Err(e) => Err(e.into_ledger()),
        }
    }

    fn remember(&self, holder: &str, stored: Stored) {
        let mut remembered = self.remembered.lock().unwrap_or_else(|p| p.into_inner());
        if remembered
            .by_holder
            .insert(holder.to_owned(), stored)
            .is_none()
        {
            remembered.order.push_back(holder.to_owned());
        }
        while remembered.order.len() > REMEMBERED {
            if let Some(oldest) = remembered.order.pop_front() {
                remembered.by_holder.remove(&oldest);
            }
        }
    }

    fn recall(&self, holder: &str, key: &str) -> Option<Stored> {
        let mut remembered = self.remembered.lock().unwrap_or_else(|p| p.into_inner());
        let stored = remembered.by_holder.remove(holder)?;
        remembered.order.retain(|h| h != holder);
        Some(stored).filter(|s| s.entry.key == key)
    }
}

fn parse<T: serde::de::DeserializeOwned>(key: &str, body: &[u8]) -> Result<T, LedgerError> {
    serde_json::from_slice(body).map_err(|e| LedgerError::Corrupt {
        key: key.to_owned(),
        reason: format!("a Firestore answer: {e}"),
    })
}

/// The entry a document holds.
fn stored(key: &str, document: Document) -> Result<Stored, LedgerError> {
    let id = document.name.rsplit('/').next().unwrap_or(key);
    let corrupt = |reason: String| LedgerError::Corrupt {
        key: id.to_owned(),
        reason,
    };
    let state = document
        .fields
        .get("state")
        .and_then(|v| v.get("stringValue")?.as_str())
        .ok_or_else(|| corrupt("the document has no string field `state`".into()))?;
    Ok(Stored {
        entry: serde_json::from_str(state).map_err(|e| corrupt(e.to_string()))?,
        update_time: document.update_time,
    })
}

/// Seconds since the Unix epoch as an RFC 3339 timestamp, within Firestore's range.
fn timestamp(secs: i64) -> String {
    let secs = u64::try_from(secs.clamp(0, MAX_TIMESTAMP_SECS)).unwrap_or(0);
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

#[async_trait::async_trait]
impl Ledger for FirestoreLedger {
    async fn claim(&self, claim: &Claim<'_>, now_ms: i64) -> Result<Claimed, LedgerError> {
        let (inner, key) = (&self.inner, claim.key);
        // A new notification is the common case: try to create its document first.
        let mut current: Option<Stored> = None;
        for round in 0..ROUNDS {
            let (mut entry, precondition) = match &current {
                None => (Entry::new(key, claim.identity), Precondition::Absent),
                Some(s) => (s.entry.clone(), Precondition::UpdatedAt(&s.update_time)),
            };
            let claimed = entry.claim(claim, now_ms);
            if let Claimed::Busy { until_ms } = claimed {
                tracing::debug!(key, until_ms, round, "A live lease refuses the claim.");
                return Ok(claimed);
            }
            match inner.commit(key, &entry, precondition).await? {
                Committed::Written(update_time) => {
                    tracing::debug!(key, attempt = %claim.attempt.id, round, "Claim granted.");
                    inner.remember(&claim.attempt.id, Stored { entry, update_time });
                    return Ok(claimed);
                }
                Committed::Conflict => current = inner.read(key).await?,
            }
        }
        let until_ms = current
            .iter()
            .flat_map(|s| s.entry.leases.values())
            .map(|lease| lease.until_ms)
            .filter(|&until| until >= now_ms)
            .max()
            .unwrap_or(now_ms + CONTENDED_RETRY_MS);
        tracing::warn!(
            key,
            rounds = ROUNDS,
            until_ms,
            "Other writes kept winning: busy."
        );
        Ok(Claimed::Busy { until_ms })
    }

    /// One `batchGet` of a document no notification has: the token fetched and the connection
    /// open before the first claim; a refusal is an answer too.
    async fn warm(&self) -> Result<(), LedgerError> {
        match self.inner.read("relay-warm").await {
            Ok(_) | Err(LedgerError::Refused(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn settle(&self, settlement: &Settlement<'_>) -> Result<(), LedgerError> {
        let (inner, key) = (&self.inner, settlement.held.key.as_str());
        let mut current = inner.recall(&settlement.held.holder, key);
        for round in 0..ROUNDS {
            let stored = match current.take() {
                Some(stored) => stored,
                None => match inner.read(key).await? {
                    Some(stored) => stored,
                    None => {
                        tracing::info!(key, "The entry is gone; the settlement is not recorded.");
                        return Ok(());
                    }
                },
            };
            let mut entry = stored.entry;
            entry.settle(settlement);
            let precondition = Precondition::UpdatedAt(&stored.update_time);
            if let Committed::Written(_) = inner.commit(key, &entry, precondition).await? {
                tracing::debug!(key, attempt = settlement.held.attempt, round, "Settled.");
                return Ok(());
            }
        }
        tracing::warn!(
            key,
            rounds = ROUNDS,
            "Other writes kept winning: not settled."
        );
        Err(LedgerError::Unavailable(
            format!("{ROUNDS} commits of the settlement of {key} lost to other writes").into(),
        ))
    }

    async fn find(&self, lookup: &Lookup) -> Result<Vec<Entry>, LedgerError> {
        let inner = &self.inner;
        let uuid = match lookup {
            Lookup::Key { key, .. } => {
                return Ok(inner
                    .read(key)
                    .await?
                    .into_iter()
                    .map(|s| s.entry)
                    .collect());
            }
            Lookup::Bundle(uuid) => uuid,
        };
        // On the automatic single-field index of `bundle_uuid`: a lookup, not a scan.
        let body = json!({ "structuredQuery": {
            "from": [{ "collectionId": inner.collection }],
            "where": { "fieldFilter": {
                "field": { "fieldPath": "bundle_uuid" },
                "op": "EQUAL",
                "value": { "stringValue": uuid },
            }},
        }});
        let answer = inner.call("runQuery", uuid, &body).await?;
        let items: Vec<Item> = parse(uuid, &answer.map_err(FirestoreError::into_ledger)?)?;
        let mut entries = items
            .into_iter()
            .filter_map(|i| i.document)
            .map(|d| stored(uuid, d).map(|s| s.entry))
            .collect::<Result<Vec<_>, _>>()?;
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_within_firestores_range() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(timestamp(1_800_000_100), "2027-01-15T08:01:40Z");
        assert_eq!(timestamp(-5), "1970-01-01T00:00:00Z");
        assert_eq!(timestamp(i64::MAX), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn failures_are_conflicts_transient_or_refusals() {
        let error = |status: u16, code: &str| {
            let body =
                format!(r#"{{"error":{{"code":{status},"message":"m","status":"{code}"}}}}"#);
            FirestoreError::new("commit", status, body.as_bytes())
        };
        for (status, code) in [
            (409, "ALREADY_EXISTS"),
            (400, "FAILED_PRECONDITION"),
            (409, "ABORTED"),
        ] {
            assert!(error(status, code).is_conflict(), "{code}");
        }
        for (status, code) in [
            (429, "RESOURCE_EXHAUSTED"),
            (503, "UNAVAILABLE"),
            (409, "ABORTED"),
        ] {
            let e = error(status, code).into_ledger();
            assert!(matches!(e, LedgerError::Unavailable(_)), "{code}: {e:?}");
        }
        for (status, code) in [
            (403, "PERMISSION_DENIED"),
            (404, "NOT_FOUND"),
            (400, "INVALID_ARGUMENT"),
        ] {
            assert!(!error(status, code).is_conflict(), "{code}");
            let e = error(status, code).into_ledger();
            assert!(matches!(e, LedgerError::Refused(_)), "{code}: {e:?}");
        }
        // The streaming methods answer an array of one error; a proxy may answer anything.
        let streamed = FirestoreError::new(
            "runQuery",
            403,
            br#"[{"error":{"status":"PERMISSION_DENIED","message":"no"}}]"#,
        );
        assert_eq!(
            (streamed.code.as_str(), streamed.message.as_str()),
            ("PERMISSION_DENIED", "no")
        );
        let html = FirestoreError::new("commit", 502, b"<html>Bad Gateway</html>");
        assert_eq!(
            (html.code.as_str(), html.message.as_str()),
            ("", "<html>Bad Gateway</html>")
        );
    }

    #[test]
    fn a_document_without_an_entry_is_corrupt() {
        let document = |fields: Value| Document {
            name: "projects/p/databases/d/documents/c/k1".into(),
            fields: serde_json::from_value(fields).unwrap(),
            update_time: "2026-12-01T00:00:00Z".into(),
        };
        for fields in [
            json!({}),
            json!({ "state": { "integerValue": "1" } }),
            json!({ "state": { "stringValue": "{" } }),
        ] {
            let e = stored("k0", document(fields)).unwrap_err();
            assert!(
                matches!(&e, LedgerError::Corrupt { key, .. } if key == "k1"),
                "{e:?}"
            );
        }
    }
}
