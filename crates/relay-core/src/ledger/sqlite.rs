//! The embedded ledger: one SQLite file, for a relay on one machine (the default of `make
//! run`). Several processes may hold it open at once (relays, `relay trace`): it runs in WAL
//! mode, and a writer waits for another's lock up to [`BUSY_TIMEOUT`]. One thread owns the
//! connection: concurrent claims and settlements each apply the entry's rules in turn inside
//! one `BEGIN IMMEDIATE` transaction, which commits once for all of them ([`GroupCommit`]), and
//! each caller is answered only after that commit.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use super::{Claim, Claimed, Entry, Ledger, LedgerError, Lookup, Settlement};
use crate::group_commit::{Batched, Failed, GroupCommit};

/// How long a write waits for another process's lock before the ledger counts as unavailable.
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// Expired entries are deleted at open and after every this many writes.
const SWEEP_EVERY: u64 = 10_000;

/// The most entries held between their claim and their settlement ([`Held`]): more than the
/// attempts in flight at once.
const MOST_HELD: usize = 1024;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS deliveries (
    ledger_key  TEXT PRIMARY KEY NOT NULL,
    bundle_uuid TEXT NOT NULL,
    expires_at  INTEGER NOT NULL,
    state       TEXT NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS deliveries_by_bundle ON deliveries (bundle_uuid);
CREATE INDEX IF NOT EXISTS deliveries_by_expiry ON deliveries (expires_at);
";

/// The embedded store.
#[derive(Debug, Clone)]
pub struct SqliteLedger {
    store: GroupCommit<Store>,
}

/// The connection, on its own thread.
struct Store {
    connection: Connection,
    /// How a batch begins: `BEGIN IMMEDIATE`, or a plain `BEGIN` to read only.
    begin: &'static str,
    writes: u64,
    /// The entries this connection wrote at their claim, by ledger key, until their settlement
    /// takes them: what the file holds for them while no other connection wrote to it.
    held: HashMap<String, Held>,
    /// The file's `data_version` at the last batch: it changes when another connection commits.
    data_version: i64,
}

/// An entry as this connection last wrote it, and where.
struct Held {
    rowid: i64,
    expires_at: i64,
    entry: Entry,
}

impl Batched for Store {
    /// Begins the batch; what is held is dropped when another connection wrote since.
    fn begin(&mut self) -> Result<(), String> {
        (self.connection.prepare_cached(self.begin))
            .and_then(|mut begin| begin.execute([]))
            .map_err(|e| e.to_string())?;
        let version = (self.connection.prepare_cached("PRAGMA data_version"))
            .and_then(|mut version| version.query_row([], |row| row.get(0)))
            .map_err(|e| e.to_string())?;
        if version != self.data_version {
            self.held.clear();
            self.data_version = version;
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<(), String> {
        (self.connection.prepare_cached("COMMIT"))
            .and_then(|mut commit| commit.execute([]))
            .map(drop)
            .map_err(|e| e.to_string())
    }

    fn abort(&mut self) {
        self.held.clear();
        if let Err(e) = self.connection.execute_batch("ROLLBACK") {
            tracing::warn!(error = %e, "A failed ledger batch could not be rolled back.");
        }
    }
}

impl From<Failed> for LedgerError {
    fn from(failed: Failed) -> Self {
        Self::Unavailable(failed.0.into())
    }
}

impl SqliteLedger {
    /// Opens (creating it if need be) the ledger file at `path`.
    pub fn open(path: &Path) -> Result<Self, LedgerError> {
        let open = |e: rusqlite::Error| LedgerError::Open(format!("{}: {e}", path.display()));
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| LedgerError::Open(format!("{}: {e}", parent.display())))?;
        }
        let connection = Connection::open(path).map_err(open)?;
        connection.busy_timeout(BUSY_TIMEOUT).map_err(open)?;
        connection
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(open)?;
        connection
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(open)?;

        connection.execute_batch(SCHEMA).map_err(open)?;
        sweep(&connection, super::epoch_ms(std::time::SystemTime::now())).map_err(open)?;
        Self::start(connection, "BEGIN IMMEDIATE", path)
    }

    /// Opens the ledger file at `path` only to read it (`relay trace`): nothing is created,
    /// swept or written, so entries past their expiry that are still in the file are shown; a
    /// missing file is an error.
    pub fn open_read_only(path: &Path) -> Result<Self, LedgerError> {
        let open = |e: rusqlite::Error| LedgerError::Open(format!("{}: {e}", path.display()));
        if !path.is_file() {
            return Err(LedgerError::Open(format!(
                "{}: no ledger file there",
                path.display()
            )));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let connection = Connection::open_with_flags(path, flags).map_err(open)?;
        connection.busy_timeout(BUSY_TIMEOUT).map_err(open)?;
        Self::start(connection, "BEGIN", path)
    }

    fn start(
        connection: Connection,
        begin: &'static str,
        path: &Path,
    ) -> Result<Self, LedgerError> {
        let store = Store {
            connection,
            begin,
            writes: 0,
            held: HashMap::new(),
            data_version: 0,
        };
        let store = GroupCommit::start("relay-ledger", store)
            .map_err(|e| LedgerError::Open(format!("{}: {e}", path.display())))?;
        Ok(Self { store })
    }
}

impl Store {
    /// Reads, changes and writes one entry inside the batch; `change` returns whether to write.
    /// An entry written whose answer `hold` holds is kept in memory for its settlement, which
    /// then neither reads nor parses it.
    fn update<T>(
        &mut self,
        key: &str,
        hold: impl FnOnce(&T) -> bool,
        fresh: impl FnOnce() -> Entry,
        change: impl FnOnce(&mut Entry) -> (bool, T),
    ) -> Result<T, LedgerError> {
        // An error that made SQLite roll the batch back (a full disk, an I/O error) leaves the
        // later calls outside any transaction: they fail rather than write on their own.
        if self.connection.is_autocommit() {
            return Err(LedgerError::Unavailable(
                "the batch's transaction was rolled back".into(),
            ));
        }
        let (found, mut entry) = match self.held.remove(key) {
            Some(held) => (Some((held.rowid, held.expires_at)), held.entry),
            None => self.read(key, fresh)?,
        };
        let (write, answer) = change(&mut entry);
        if write {
            let state = serde_json::to_string(&entry).expect("an entry serializes");
            let id = &entry.identity.bundle_uuid;
            let written = match found {
                None => self
                    .connection
                    .prepare_cached(
                        "INSERT INTO deliveries (ledger_key, bundle_uuid, expires_at, state)
                         VALUES (?1, ?2, ?3, ?4)",
                    )
                    .and_then(|mut insert| {
                        insert.execute(params![key, id, entry.expires_at, state])
                    }),
                // The expiry's index is left alone when the expiry is the same second.
                Some((rowid, expires_at)) if expires_at == entry.expires_at => self
                    .connection
                    .prepare_cached("UPDATE deliveries SET state = ?2 WHERE rowid = ?1")
                    .and_then(|mut update| update.execute(params![rowid, state])),
                Some((rowid, _)) => self
                    .connection
                    .prepare_cached(
                        "UPDATE deliveries SET expires_at = ?2, state = ?3 WHERE rowid = ?1",
                    )
                    .and_then(|mut update| update.execute(params![rowid, entry.expires_at, state])),
            };
            written.map_err(unavailable)?;
            if self.held.len() < MOST_HELD && hold(&answer) {
                let rowid = found.map_or_else(|| self.connection.last_insert_rowid(), |f| f.0);
                let expires_at = entry.expires_at;
                let held = Held {
                    rowid,
                    expires_at,
                    entry,
                };
                self.held.insert(key.to_owned(), held);
            }
            self.writes += 1;
            if self.writes.is_multiple_of(SWEEP_EVERY) {
                // What the sweep deletes is read from the file again.
                self.held.clear();
                let now_ms = super::epoch_ms(std::time::SystemTime::now());
                if let Err(e) = sweep(&self.connection, now_ms) {
                    tracing::warn!(error = %e, "Expired ledger entries could not be deleted.");
                }
            }
        }
        Ok(answer)
    }

    /// The entry under `key` as the file holds it, with its row id and expiry; or `fresh()`.
    fn read(
        &mut self,
        key: &str,
        fresh: impl FnOnce() -> Entry,
    ) -> Result<(Option<(i64, i64)>, Entry), LedgerError> {
        let found: Option<(i64, i64, String)> = self
            .connection
            .prepare_cached("SELECT rowid, expires_at, state FROM deliveries WHERE ledger_key = ?1")
            .and_then(|mut select| {
                select
                    .query_row([key], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
                    .optional()
            })
            .map_err(unavailable)?;
        match found {
            Some((rowid, expires_at, text)) => Ok((Some((rowid, expires_at)), parse(key, &text)?)),
            None => Ok((None, fresh())),
        }
    }
}

/// Deletes the entries expired at `now_ms`.
fn sweep(connection: &Connection, now_ms: i64) -> Result<usize, rusqlite::Error> {
    connection.execute(
        "DELETE FROM deliveries WHERE expires_at < ?1",
        [now_ms.div_euclid(1000)],
    )
}

fn unavailable(e: rusqlite::Error) -> LedgerError {
    LedgerError::Unavailable(e.into())
}

fn parse(key: &str, text: &str) -> Result<Entry, LedgerError> {
    serde_json::from_str(text).map_err(|e| LedgerError::Corrupt {
        key: key.to_owned(),
        reason: e.to_string(),
    })
}

#[async_trait::async_trait]
impl Ledger for SqliteLedger {
    async fn claim(&self, claim: &Claim<'_>, now_ms: i64) -> Result<Claimed, LedgerError> {
        let (key, identity, attempt) = (
            claim.key.to_owned(),
            claim.identity.clone(),
            claim.attempt.clone(),
        );
        let (lease_until_ms, expires_at) = (claim.lease_until_ms, claim.expires_at);
        self.store
            .call(move |store: &mut Store| {
                let fresh = || Entry::new(&key, &identity);
                // A claim that leaves something to publish is settled; one that found every
                // destination acknowledged (a duplicate) is not.
                let routed = attempt.routed.len();
                let settled =
                    move |claimed: &Claimed| matches!(claimed, Claimed::Granted(grant) if grant.acked.len() < routed);
                store.update(&key, settled, fresh, |entry| {
                    let claim = Claim {
                        key: &key,
                        identity: &identity,
                        attempt: &attempt,
                        lease_until_ms,
                        expires_at,
                    };
                    let claimed = entry.claim(&claim, now_ms);
                    (matches!(claimed, Claimed::Granted(_)), claimed)
                })
            })
            .await
    }

    async fn settle(&self, settlement: &Settlement<'_>) -> Result<(), LedgerError> {
        let held = settlement.held.clone();
        let results = settlement.results.clone();
        let (now_ms, expires_at) = (settlement.now_ms, settlement.expires_at);
        self.store
            .call(move |store: &mut Store| {
                // An entry deleted since its claim (expired, or removed by hand) is not recreated.
                let missing = std::cell::Cell::new(false);
                let fresh = || {
                    missing.set(true);
                    Entry::new(&held.key, &Default::default())
                };
                store.update(
                    &held.key,
                    |_| false,
                    fresh,
                    |entry| {
                        if missing.get() {
                            return (false, ());
                        }
                        entry.settle(&Settlement {
                            held: &held,
                            results: &results,
                            now_ms,
                            expires_at,
                        });
                        (true, ())
                    },
                )
            })
            .await
    }

    async fn find(&self, lookup: &Lookup) -> Result<Vec<Entry>, LedgerError> {
        let lookup = lookup.clone();
        self.store.call(move |store: &mut Store| {
            let (sql, value) = match &lookup {
                Lookup::Key { key, .. } => (
                    "SELECT ledger_key, state FROM deliveries WHERE ledger_key = ?1",
                    key,
                ),
                Lookup::Bundle(uuid) => (
                    "SELECT ledger_key, state FROM deliveries WHERE bundle_uuid = ?1 ORDER BY ledger_key",
                    uuid,
                ),
            };
            let mut statement = store.connection.prepare_cached(sql).map_err(unavailable)?;
            let rows = statement
                .query_map([value], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
                })
                .map_err(unavailable)?;
            let mut entries = Vec::new();
            for row in rows {
                let (key, state) = row.map_err(unavailable)?;
                entries.push(parse(&key, &state)?);
            }
            Ok(entries)
        })
        .await
    }
}
