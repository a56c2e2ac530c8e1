//! Keeping the table in effect up to date with the store: read conditionally, merge, build the
//! sinks that are new, swap; keep the last good table when a document is refused. A refused
//! document is logged once per version, a store that cannot be read once per error.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use futures_util::future::BoxFuture;

use super::store::{Fetched, Store, Version};
use super::{Routes, RoutesError, RoutingTable, StoredRoutes};
use crate::sink::{BuildError, Sink, SinkConfig};

/// Builds the client of a sink that appears in a stored document.
pub(crate) type SinkFactory =
    Arc<dyn Fn(SinkConfig) -> BoxFuture<'static, Result<Arc<dyn Sink>, BuildError>> + Send + Sync>;

/// What one refresh did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refreshed {
    /// The document had not changed (or was refused already).
    Unchanged,
    /// A new table is in effect, from this version (`None`: the document is gone).
    Swapped(Option<Version>),
    /// The document was refused or the store failed; the last good table stays in effect.
    Kept(String),
}

/// The store, and what the relay needs to turn its documents into tables.
pub(crate) struct LiveRoutes {
    store: Box<dyn Store>,
    factory: SinkFactory,
    deployed: Routes,
    every: Duration,
    /// Sinks built so far, by configuration, so that a refresh keeps their clients and batches.
    built: Mutex<Vec<(SinkConfig, Arc<dyn Sink>)>>,
    /// The version read last, good or refused.
    seen: Mutex<Option<Version>>,
    /// The read error logged last, until a read succeeds.
    read_error: Mutex<Option<String>>,
    /// When the store was last read.
    last_read: Mutex<Option<Instant>>,
    /// One refresh at a time.
    running: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for LiveRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveRoutes")
            .field("store", &self.store.url())
            .field("every", &self.every)
            .finish_non_exhaustive()
    }
}

impl LiveRoutes {
    /// Live routes from `store`, refreshed at most `every`; `built` are the deployed sinks'
    /// clients, reused.
    pub(crate) fn new(
        store: Box<dyn Store>,
        factory: SinkFactory,
        deployed: Routes,
        every: Duration,
        built: Vec<(SinkConfig, Arc<dyn Sink>)>,
    ) -> Self {
        Self {
            store,
            factory,
            deployed,
            every,
            built: Mutex::new(built),
            seen: Mutex::new(None),
            read_error: Mutex::new(None),
            last_read: Mutex::new(None),
            running: tokio::sync::Mutex::new(()),
        }
    }

    /// How often, at most, the store is read.
    pub(crate) fn every(&self) -> Duration {
        self.every
    }

    /// True when the store was not read within the refresh interval.
    pub(crate) fn is_due(&self) -> bool {
        self.last_read
            .lock()
            .expect("not poisoned")
            .is_none_or(|at| at.elapsed() >= self.every)
    }

    /// Reads the store and, when the document changed and is good, swaps its table into
    /// `table`. A refused document is logged once per version; a read error once, until it
    /// changes or a read succeeds.
    pub(crate) async fn refresh(&self, table: &ArcSwap<RoutingTable>) -> Refreshed {
        let _one = self.running.lock().await;
        *self.last_read.lock().expect("not poisoned") = Some(Instant::now());
        let known = self.seen.lock().expect("not poisoned").clone();
        let fetched = match self.store.read(known.as_ref()).await {
            Ok(fetched) => {
                if self
                    .read_error
                    .lock()
                    .expect("not poisoned")
                    .take()
                    .is_some()
                {
                    tracing::info!(store = %self.store.url(), "The stored routes can be read again.");
                }
                fetched
            }
            Err(e) => {
                let error = e.to_string();
                let mut last = self.read_error.lock().expect("not poisoned");
                if last.as_deref() != Some(error.as_str()) {
                    tracing::warn!(error = %error, "Cannot read the stored routes; the routes in effect stay.");
                    *last = Some(error.clone());
                }
                return Refreshed::Kept(error);
            }
        };
        let (stored, version) = match fetched {
            Fetched::Unchanged => return Refreshed::Unchanged,
            Fetched::Missing if known.is_none() && table.load().version.is_none() => {
                return Refreshed::Unchanged;
            }
            Fetched::Missing => (StoredRoutes::default(), None),
            Fetched::Document { text, version } => match StoredRoutes::parse(&text) {
                Ok(stored) => (stored, Some(version)),
                Err(e) => {
                    return self.refuse(version, format!("{}:{e}", self.store.url()));
                }
            },
        };
        match self.build(&stored, version.clone()).await {
            Ok(new) => {
                let splits = new.splits.len();
                table.store(Arc::new(new));
                self.seen.lock().expect("not poisoned").clone_from(&version);
                tracing::info!(
                    routes_version = version.as_ref().map(|v| v.0.as_str()),
                    splits,
                    "Stored routes in effect."
                );
                Refreshed::Swapped(version)
            }
            Err(problem) => match version {
                Some(version) => self.refuse(version, problem.to_string()),
                None => Refreshed::Kept(problem.to_string()),
            },
        }
    }

    fn refuse(&self, version: Version, problem: String) -> Refreshed {
        tracing::error!(
            routes_version = %version,
            problem = %problem,
            "Stored routes refused; the last good routes stay in effect."
        );
        *self.seen.lock().expect("not poisoned") = Some(version);
        Refreshed::Kept(problem)
    }

    /// The table of `stored` merged into the deployed configuration; builds the sinks it adds.
    pub(crate) async fn build(
        &self,
        stored: &StoredRoutes,
        version: Option<Version>,
    ) -> Result<RoutingTable, RoutesError> {
        let routes = self.deployed.merge(stored)?;
        let wanted: Vec<SinkConfig> = routes.sink_configs().cloned().collect();
        let mut sinks = Vec::with_capacity(wanted.len());
        for config in &wanted {
            let known = self
                .built
                .lock()
                .expect("not poisoned")
                .iter()
                .find(|(c, _)| c == config)
                .map(|(_, sink)| Arc::clone(sink));
            let sink = match known {
                Some(sink) => sink,
                None => {
                    let sink =
                        (self.factory)(config.clone())
                            .await
                            .map_err(|e| RoutesError::Build {
                                sink: config.name.clone(),
                                error: e.to_string(),
                            })?;
                    self.built
                        .lock()
                        .expect("not poisoned")
                        .push((config.clone(), Arc::clone(&sink)));
                    sink
                }
            };
            sinks.push(sink);
        }
        let mut sinks = sinks.into_iter();
        let table = RoutingTable::new(routes, version, |_| sinks.next().expect("one per sink"))?;
        // Forget the clients no table uses any more (a stopped split's queue), but never the
        // deployed ones.
        self.built
            .lock()
            .expect("not poisoned")
            .retain(|(config, _)| wanted.contains(config) || self.deployed.is_deployed(config));
        Ok(table)
    }
}
