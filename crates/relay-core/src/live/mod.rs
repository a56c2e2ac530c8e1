//! Routes that change while the relay runs. The stored routes document (`RELAY_ROUTES_URL`) has
//! the `[sinks.<name>]` and `[[routes]]` tables of `RELAY_CONFIG`, read by the same types, plus
//! `[[splits]]`. Merged with the deployed routes it gives the [`Routes`] in effect (checked,
//! compiled), and with their clients the [`RoutingTable`], which the relay swaps in whole
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

pub mod refresh;
mod split;
pub mod store;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::SystemTime;

use serde::Deserialize;
use serde_json::Value;

pub use split::{MAX_NAME_CHARS, SplitSpec, Timestamp};
pub use store::{Fetched, RoutesUrl, Store, StoreError, Version, WriteError};

use crate::route::{Input, Pattern, RouteError, RouteSpec, Router, Routing};
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
}

/// Checks a stored document before it is written: against the deployed routes when they are
/// known (everything the relay will check), else on its own (its splits, and its routes over
/// its own sinks when they name no other).
pub fn check_document(text: &str, deployed: Option<&Routes>) -> Result<StoredRoutes, RoutesError> {
    let stored = StoredRoutes::parse(text)?;
    match deployed {
        Some(deployed) => {
            deployed.merge(&stored)?;
        }
        None => {
            check_splits(&stored.splits)?;
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

/// Checks every split and the uniqueness of their names; returns them earliest registered
/// first (splits registered at the same second keep the document's order).
fn check_splits(specs: &[SplitSpec]) -> Result<Vec<ActiveSplit>, RoutesError> {
    let mut seen = BTreeSet::new();
    let mut checked = Vec::with_capacity(specs.len());
    for spec in specs {
        if !seen.insert(spec.name.as_str()) {
            return Err(RoutesError::Split {
                split: spec.name.clone(),
                message: "another split has this name".into(),
            });
        }
        checked.push((spec.registered_at, spec.check()?));
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

/// The deployment's sinks and routes as written, and the Pub/Sub emulator stored sinks use too.
#[derive(Debug)]
struct Deployed {
    sinks: Vec<SinkConfig>,
    routes: Vec<RouteSpec>,
    pubsub_emulator: Option<String>,
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
            }),
            sinks,
            router,
            splits: Vec::new(),
        }
    }

    /// The deployed routes with `stored` added, refusing anything that would redefine a
    /// deployed sink or route, and checking every route and split.
    pub fn merge(&self, stored: &StoredRoutes) -> Result<Self, RoutesError> {
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

        let mut splits = check_splits(&stored.splits)?;
        for split in &mut splits {
            deployed.set_emulator(&mut split.sink);
        }
        Ok(Self {
            sinks,
            router,
            splits,
            deployed: Arc::clone(deployed),
        })
    }

    /// True when `sink` is one the deployment configured.
    pub fn is_deployed(&self, sink: &SinkConfig) -> bool {
        self.deployed.sinks.contains(sink)
    }

    /// True when the deployment has a route of this name.
    pub fn has_deployed_route(&self, name: &str) -> bool {
        self.deployed.routes.iter().any(|r| r.name == name)
    }

    /// Where a notification goes at `now`; destination indexes count the named sinks, then
    /// the splits, as in the [`RoutingTable`] built from these routes.
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
pub struct RoutingTable {
    /// The stored document's version; `None` when no stored document is in effect.
    pub version: Option<Version>,
    /// The routes; their sink indexes point into [`destinations`](Self::destinations).
    pub router: Router,
    /// The named destinations, then one per split, in [`splits`](Self::splits) order.
    pub destinations: Vec<Destination>,
    /// The splits, earliest registered first.
    pub splits: Vec<ActiveSplit>,
    uses_request: bool,
}

/// Where one notification goes, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The split that took it, if one did.
    pub split: Option<String>,
    /// What each route decided (every route is evaluated, for `relay explain`).
    pub routing: Routing,
    /// The destinations to publish to, each once.
    pub destinations: Vec<usize>,
}

impl RoutingTable {
    /// Builds the table of `routes`, with `sink` giving each sink's client.
    pub fn new(
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
        Ok(Self {
            version,
            router: routes.router,
            destinations,
            splits: routes.splits,
            uses_request,
        })
    }

    /// True when a route or a split matches on `$request`, so the caller builds it.
    pub fn uses_request(&self) -> bool {
        self.uses_request
    }

    /// Decides where a notification goes at `now`: the first active split it matches, else (or,
    /// for a `copy` split, also) what its routes say.
    pub fn decide(&self, input: &Input<'_>, now: SystemTime) -> Decision {
        decide(&self.router, &self.splits, input, now)
    }
}

fn decide(router: &Router, splits: &[ActiveSplit], input: &Input<'_>, now: SystemTime) -> Decision {
    let routing = router.route(input);
    let named = router.sink_names().len();
    let split = splits
        .iter()
        .enumerate()
        .find(|(_, split)| now < split.expires_at && split.pattern.matches(input));
    let destinations = match split {
        None => routing.sinks.clone(),
        Some((i, split)) if split.copy => {
            let mut all = routing.sinks.clone();
            all.push(named + i);
            all
        }
        Some((i, _)) => vec![named + i],
    };
    Decision {
        split: split.map(|(_, s)| s.name.clone()),
        routing,
        destinations,
    }
}

/// The deployed routes as written: the file's `[[routes]]`, or, with sinks from the variables,
/// one route `all` to every sink.
pub fn deployed_routes(file_routes: &[RouteSpec], sinks: &[SinkConfig]) -> Vec<RouteSpec> {
    if !file_routes.is_empty() {
        return file_routes.to_vec();
    }
    vec![RouteSpec {
        name: "all".into(),
        pattern: None,
        to: sinks.iter().map(|s| s.name.clone()).collect(),
        stop: false,
        fallback: false,
    }]
}

/// Whether a split pattern takes (nearly) every notification: it has no condition, or it
/// matches a notification without fields, or one whose fields are all empty. A split with a real
/// condition (a prefix, a list of values, a number) fails at least one of them.
pub(crate) fn matches_anything(pattern: &Pattern) -> bool {
    let bare = Value::Object(Default::default());
    let empty = serde_json::json!({
        "subscription_id": "",
        "event_type": "",
        "transaction_id": "",
        "match": {"bundle_uuid": "", "bundle_version": ""},
    });
    pattern.is_empty()
        || [bare, empty]
            .iter()
            .any(|document| pattern.matches(&Input::new(document, &Value::Null)))
}

#[cfg(test)]
mod tests;
