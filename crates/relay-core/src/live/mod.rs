//! Routes that change while the relay runs. The stored routes document (`RELAY_ROUTES_URL`) has
//! the `[sinks.<name>]` and `[[routes]]` tables of `RELAY_CONFIG`, read by the same types, plus
//! `[[splits]]`. Merged with the deployed routes it gives the [`Routes`] in effect (checked,
//! compiled), and with their clients the `RoutingTable`, which the relay swaps in whole
//! between requests.
//!
//! The document may add sinks, routes and splits. One that would redefine a deployed sink or
//! route, that does not parse, or whose routes do not compile, is not taken: the relay keeps its
//! last good table (see [`Relay::refresh`](crate::Relay::refresh)).
//!
//! Splits come before routes: a notification that matches an active split goes to that split's
//! destination instead of its routes (with `copy`, as well as to them). Where splits overlap,
//! the earliest registered wins. An expired split takes nothing, whether or not it has been
//! removed from the document.

mod probe;
pub mod refresh;
mod split;
pub mod store;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Deserialize;

pub use split::{DEFAULT_SPLIT_MAX_TTL, SplitSpec, Timestamp};
pub use store::{Fetched, RoutesUrl, Store, StoreError, Version, WriteError};

use crate::route::{Input, Pattern, RouteError, RouteSpec, Router};
use crate::sink::{Destination, ShapeError, Sink, SinkConfig, SinkSpecs, Target};
use crate::text::DocumentError;

/// The stored document as written.
#[derive(Debug, Default, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct StoredRoutes {
    /// Named sinks, in addition to the deployed ones.
    #[serde(default)]
    pub sinks: SinkSpecs,
    /// Routes, after the deployed ones.
    #[serde(default)]
    pub routes: Vec<RouteSpec>,
    /// Splits, checked before every route.
    #[serde(default)]
    pub splits: Vec<SplitSpec>,
}

impl StoredRoutes {
    /// Parses a document.
    pub fn parse(text: &str) -> Result<Self, DocumentError> {
        crate::text::parse_document(text)
    }
}

/// Why a stored document, or the routes it would put in effect, is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoutesError {
    /// The document does not parse.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// It would redefine a deployed sink.
    #[error(
        "sink {0:?} is deployed (RELAY_CONFIG or the variables): the stored document cannot redefine it"
    )]
    SinkRedefined(String),
    /// It would redefine a deployed route.
    #[error("route {0:?} is deployed: the stored document cannot redefine it")]
    RouteRedefined(String),
    /// A sink's attributes or templates do not check.
    #[error("sink {sink:?}, {error}")]
    Shape {
        /// The sink.
        sink: String,
        /// What is wrong.
        error: ShapeError,
    },
    /// The routes do not compile.
    #[error(transparent)]
    Route(#[from] RouteError),
    /// A split does not check.
    #[error("split {split:?}: {message}")]
    Split {
        /// The split.
        split: String,
        /// What is wrong.
        message: String,
    },
    /// The client of a sink the document adds cannot be built.
    #[error("sink {sink:?}: {error}")]
    Build {
        /// The sink.
        sink: String,
        /// Why.
        error: String,
    },
    /// Two destinations (sinks or splits) deliver to one resource.
    #[error(transparent)]
    SharedResource(#[from] crate::sink::SharedResource),
    /// The document has more sinks, routes or splits than a stored document may hold.
    #[error("the document has {count} {what}; a stored document holds at most {limit}")]
    TooMany {
        /// What there are too many of: "sinks", "routes" or "splits".
        what: &'static str,
        /// How many the document has.
        count: usize,
        /// The most it may have.
        limit: usize,
    },
}

/// The most sinks a stored document may add (each one is a client the relay builds).
pub const MAX_STORED_SINKS: usize = 1_000;
/// The most routes a stored document may hold.
pub const MAX_STORED_ROUTES: usize = 10_000;
/// The most splits a stored document may hold.
pub const MAX_STORED_SPLITS: usize = 1_000;

/// Refuses a document with more sinks, routes or splits than the limits above.
fn check_counts(stored: &StoredRoutes) -> Result<(), RoutesError> {
    for (what, count, limit) in [
        ("sinks", stored.sinks.len(), MAX_STORED_SINKS),
        ("routes", stored.routes.len(), MAX_STORED_ROUTES),
        ("splits", stored.splits.len(), MAX_STORED_SPLITS),
    ] {
        if count > limit {
            return Err(RoutesError::TooMany { what, count, limit });
        }
    }
    Ok(())
}

/// Checks a stored document before it is written: against the deployed routes when they are
/// known (everything the relay will check), else on its own (its splits, and its routes over
/// its own sinks when they name no other).
pub fn check_document(text: &str, deployed: Option<&Routes>) -> Result<StoredRoutes, RoutesError> {
    let stored = StoredRoutes::parse(text)?;
    check_counts(&stored)?;
    match deployed {
        Some(deployed) => {
            deployed.merge(&stored)?;
        }
        None => {
            let splits = check_splits(&stored.splits, DEFAULT_SPLIT_MAX_TTL)?;
            let own: Vec<SinkConfig> = stored.sinks.iter().map(|(n, s)| s.named(n)).collect();
            crate::sink::check_resources(own.iter().chain(splits.iter().map(|s| &s.sink)))?;
            let named_here = stored
                .routes
                .iter()
                .flat_map(|r| &r.to)
                .all(|sink| stored.sinks.contains_key(sink));
            if !stored.routes.is_empty() && named_here {
                let names = stored.sinks.keys().cloned().collect();
                Router::compile(&stored.routes, names)?;
            }
        }
    }
    Ok(stored)
}

/// Checks every split (none may last longer than `max_ttl`) and the uniqueness of their names;
/// returns them earliest registered first (splits registered at the same second keep the
/// document's order).
fn check_splits(specs: &[SplitSpec], max_ttl: Duration) -> Result<Vec<ActiveSplit>, RoutesError> {
    let mut seen = BTreeSet::new();
    let mut checked = Vec::with_capacity(specs.len());
    for spec in specs {
        if !seen.insert(spec.name.as_str()) {
            return Err(RoutesError::Split {
                split: spec.name.clone(),
                message: "another split has this name".into(),
            });
        }
        checked.push((spec.registered_at, spec.check(max_ttl)?));
    }
    checked.sort_by_key(|(registered_at, _)| *registered_at);
    Ok(checked.into_iter().map(|(_, split)| split).collect())
}

/// A split, checked and ready to match.
#[derive(Debug, Clone)]
pub struct ActiveSplit {
    /// Its name.
    pub name: String,
    /// What it takes.
    pub pattern: Pattern,
    /// Where it sends what it takes.
    pub sink: SinkConfig,
    /// Deliver to the routes too.
    pub copy: bool,
    /// When it stops taking notifications.
    pub expires_at: SystemTime,
}

/// The routes in effect, checked and compiled, with no client built: the deployed sinks and
/// routes, then what a stored document adds, and its splits.
#[derive(Debug, Clone)]
pub struct Routes {
    /// Every named sink: the deployed ones, then the stored ones.
    pub sinks: Vec<SinkConfig>,
    /// The routes over [`sinks`](Self::sinks).
    pub router: Router,
    /// The splits, earliest registered first.
    pub splits: Vec<ActiveSplit>,
    /// What the deployment fixed, which a stored document may add to but not change.
    deployed: Arc<Deployed>,
}

/// The deployment's sinks and routes as written, the Pub/Sub emulator stored sinks use too,
/// and the longest a stored split may last.
#[derive(Debug, Clone)]
struct Deployed {
    sinks: Vec<SinkConfig>,
    routes: Vec<RouteSpec>,
    pubsub_emulator: Option<String>,
    split_max_ttl: Duration,
}

impl Routes {
    /// The deployed routes: `router` is `specs` compiled over `sinks` (the configuration did it
    /// once, at start).
    pub fn deployed(
        sinks: Vec<SinkConfig>,
        specs: Vec<RouteSpec>,
        router: Router,
        pubsub_emulator: Option<String>,
    ) -> Self {
        Self {
            deployed: Arc::new(Deployed {
                sinks: sinks.clone(),
                routes: specs,
                pubsub_emulator,
                split_max_ttl: DEFAULT_SPLIT_MAX_TTL,
            }),
            sinks,
            router,
            splits: Vec::new(),
        }
    }

    /// These routes, with stored splits allowed to last at most `max` from their registration
    /// to their expiry (`RELAY_SPLIT_MAX_TTL_SECS`; [`DEFAULT_SPLIT_MAX_TTL`] unless set).
    pub(crate) fn with_split_max_ttl(mut self, max: Duration) -> Self {
        Arc::make_mut(&mut self.deployed).split_max_ttl = max;
        self
    }

    /// The longest a stored split may last, from its registration to its expiry.
    pub fn split_max_ttl(&self) -> Duration {
        self.deployed.split_max_ttl
    }

    /// The deployed routes with `stored` added, refusing anything that would redefine a
    /// deployed sink or route, and checking every route and split.
    pub fn merge(&self, stored: &StoredRoutes) -> Result<Self, RoutesError> {
        check_counts(stored)?;
        let deployed = &self.deployed;
        let mut sinks = deployed.sinks.clone();
        for (name, spec) in &stored.sinks {
            let mut sink = spec.named(name);
            deployed.set_emulator(&mut sink);
            match deployed.sinks.iter().find(|d| &d.name == name) {
                Some(existing) if *existing == sink => continue,
                Some(_) => return Err(RoutesError::SinkRedefined(name.clone())),
                None => {}
            }
            sink.target
                .shape(&sink.selection)
                .map_err(|error| RoutesError::Shape {
                    sink: name.clone(),
                    error,
                })?;
            sinks.push(sink);
        }
        let mut routes = deployed.routes.clone();
        for route in &stored.routes {
            match deployed.routes.iter().find(|d| d.name == route.name) {
                Some(existing) if existing == route => continue,
                Some(_) => return Err(RoutesError::RouteRedefined(route.name.clone())),
                None => routes.push(route.clone()),
            }
        }
        let names = sinks.iter().map(|s| s.name.clone()).collect();
        let router = Router::compile(&routes, names)?;

        let mut splits = check_splits(&stored.splits, deployed.split_max_ttl)?;
        for split in &mut splits {
            deployed.set_emulator(&mut split.sink);
        }
        crate::sink::check_resources(sinks.iter().chain(splits.iter().map(|s| &s.sink)))?;
        Ok(Self {
            sinks,
            router,
            splits,
            deployed: Arc::clone(deployed),
        })
    }

    /// True when `sink` is one the deployment configured.
    pub(crate) fn is_deployed(&self, sink: &SinkConfig) -> bool {
        self.deployed.sinks.contains(sink)
    }

    /// True when the deployment has a route of this name.
    pub fn has_deployed_route(&self, name: &str) -> bool {
        self.deployed.routes.iter().any(|r| r.name == name)
    }

    /// Where a notification goes at `now`; destination indexes count the named sinks, then
    /// the splits, as in the `RoutingTable` built from these routes.
    pub fn decide(&self, input: &Input<'_>, now: SystemTime) -> Decision {
        decide(&self.router, &self.splits, input, now)
    }

    /// Every sink the routes need built: the named ones, then one per split.
    pub fn sink_configs(&self) -> impl Iterator<Item = &SinkConfig> {
        self.sinks
            .iter()
            .chain(self.splits.iter().map(|split| &split.sink))
    }
}

impl Deployed {
    fn set_emulator(&self, sink: &mut SinkConfig) {
        if let Target::PubSub(target) = &mut sink.target {
            target.emulator_host.clone_from(&self.pubsub_emulator);
        }
    }
}

/// The routing in effect, built: routes over named destinations whose clients exist, splits
/// before them, and the stored document's version they came from.
#[derive(Debug)]
pub(crate) struct RoutingTable {
    /// The stored document's version; `None` when no stored document is in effect.
    pub(crate) version: Option<Version>,
    /// The routes; their sink indexes point into [`destinations`](Self::destinations).
    pub(crate) router: Router,
    /// The named destinations, then one per split, in [`splits`](Self::splits) order.
    pub(crate) destinations: Vec<Destination>,
    /// The splits, earliest registered first.
    pub(crate) splits: Vec<ActiveSplit>,
    uses_request: bool,
    /// The request headers routes and splits name: what archive records keep besides
    /// [`KEPT_HEADERS`](crate::archive::KEPT_HEADERS).
    request_headers: std::collections::BTreeSet<String>,
}

/// Where one notification goes. Why each route decided as it did is
/// [`Router::explain`]'s, which only `relay explain` asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The split that took it, if one did.
    pub split: Option<String>,
    /// The destinations to publish to, each once.
    pub destinations: Vec<usize>,
}

impl RoutingTable {
    /// Builds the table of `routes`, with `sink` giving each sink's client.
    pub(crate) fn new(
        routes: Routes,
        version: Option<Version>,
        mut sink: impl FnMut(&SinkConfig) -> Arc<dyn Sink>,
    ) -> Result<Self, RoutesError> {
        let destinations = routes
            .sink_configs()
            .map(|config| {
                Destination::new(config, sink(config)).map_err(|error| RoutesError::Shape {
                    sink: config.name.clone(),
                    error,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let uses_request =
            routes.router.uses_request() || routes.splits.iter().any(|s| s.pattern.uses_request());
        let mut request_headers = std::collections::BTreeSet::new();
        let patterns = routes.router.routes().iter().map(|r| &r.pattern);
        for pattern in patterns.chain(routes.splits.iter().map(|s| &s.pattern)) {
            pattern.request_headers(&mut request_headers);
        }
        Ok(Self {
            version,
            router: routes.router,
            destinations,
            splits: routes.splits,
            uses_request,
            request_headers,
        })
    }

    /// The request headers a route or a split names.
    pub(crate) fn request_headers(&self) -> &std::collections::BTreeSet<String> {
        &self.request_headers
    }

    /// True when a route or a split matches on `$request`, so the caller builds it.
    pub(crate) fn uses_request(&self) -> bool {
        self.uses_request
    }

    /// Decides where a notification goes at `now`: the first active split it matches, else (or,
    /// for a `copy` split, also) what its routes say.
    pub(crate) fn decide(&self, input: &Input<'_>, now: SystemTime) -> Decision {
        decide(&self.router, &self.splits, input, now)
    }
}

fn decide(router: &Router, splits: &[ActiveSplit], input: &Input<'_>, now: SystemTime) -> Decision {
    let named = router.sink_names().len();
    let split = splits
        .iter()
        .enumerate()
        .find(|(_, split)| now < split.expires_at && split.pattern.matches(input));
    // The routes are matched only when their sinks are wanted: not when a split takes the
    // notification instead of them.
    let destinations = match split {
        None => router.route(input),
        Some((i, split)) if split.copy => {
            let mut all = router.route(input);
            all.push(named + i);
            all
        }
        Some((i, _)) => vec![named + i],
    };
    Decision {
        split: split.map(|(_, s)| s.name.clone()),
        destinations,
    }
}

/// The deployed routes as written: the file's `[[routes]]`, or, with sinks from the variables,
/// one route `all` to every sink.
pub(crate) fn deployed_routes(file_routes: &[RouteSpec], sinks: &[SinkConfig]) -> Vec<RouteSpec> {
    if !file_routes.is_empty() {
        return file_routes.to_vec();
    }
    vec![RouteSpec {
        name: "all".into(),
        pattern: None,
        to: sinks.iter().map(|s| s.name.clone()).collect(),
        stop: false,
        fallback: false,
        accept_unsigned: false,
    }]
}

/// Whether a split pattern takes every notification: it has no condition, or none that some
/// DSS notification fails (a condition that every value of a DSS field satisfies, such as
/// `anything-but ""` on `subscription_id` or `suffix "Z"` on `match.bundle_version`, is no
/// condition). Decided against probe notifications built from the values DSS fields carry (see
/// `probe.rs`); the one check behind both the relay's and `relay split start`'s refusal.
pub(crate) fn matches_anything(pattern: &Pattern) -> bool {
    probe::takes_everything(pattern)
}

#[cfg(test)]
mod tests;
