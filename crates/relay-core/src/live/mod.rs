//! Routes that change while the relay runs. The stored routes document (`RELAY_ROUTES_URL`) has
//! the `[sinks.<name>]` and `[[routes]]` tables of `RELAY_CONFIG`, read by the same types, plus
//! `[[splits]]`; merged with the deployed configuration it gives the [`Table`] in effect, which
//! the relay swaps in whole between requests.
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

use crate::route::{Input, Pattern, RouteSpec, Router, Routing};
use crate::sink::{Destination, Sink, SinkConfig, SinkTables, Target};

/// The stored document as written.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredRoutes {
    /// Named sinks, in addition to the deployed ones.
    #[serde(default)]
    pub sinks: SinkTables,
    /// Routes, after the deployed ones.
    #[serde(default)]
    pub routes: Vec<RouteSpec>,
    /// Splits, checked before every route.
    #[serde(default)]
    pub splits: Vec<SplitSpec>,
}

impl StoredRoutes {
    /// Parses a document; the error starts with `line:column: `.
    pub fn parse(text: &str) -> Result<Self, String> {
        crate::config::parse_document(text)
    }
}

/// What the deployment fixed: its sinks and its routes as written (with the variables alone, one
/// route `all` to every sink).
#[derive(Debug, Clone, Default)]
pub struct Deployed {
    /// The deployed sinks.
    pub sinks: Vec<SinkConfig>,
    /// The deployed routes.
    pub routes: Vec<RouteSpec>,
    /// `PUBSUB_EMULATOR_HOST`, which stored Pub/Sub sinks use as the deployed ones do.
    pub pubsub_emulator: Option<String>,
}

impl From<&crate::Config> for Deployed {
    fn from(config: &crate::Config) -> Self {
        Self {
            sinks: config.sinks.clone(),
            routes: config.routes.clone(),
            pubsub_emulator: config.pubsub_emulator.clone(),
        }
    }
}

/// Checks a stored document before it is written: against the deployed configuration when it
/// is known (everything the relay will check), else on its own (its splits, and its routes over
/// its own sinks when they name no other).
pub fn check_document(text: &str, deployed: Option<&Deployed>) -> Result<StoredRoutes, String> {
    let stored = StoredRoutes::parse(text)?;
    match deployed {
        Some(deployed) => {
            Plan::merge(deployed, &stored)?;
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
                Router::compile(&stored.routes, names).map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(stored)
}

/// Checks every split and the uniqueness of their names; returns them earliest registered
/// first (splits registered at the same second keep the document's order).
fn check_splits(specs: &[SplitSpec]) -> Result<Vec<ActiveSplit>, String> {
    let mut seen = BTreeSet::new();
    let mut checked = Vec::with_capacity(specs.len());
    for spec in specs {
        if !seen.insert(spec.name.as_str()) {
            return Err(format!(
                "split {:?}: another split has this name",
                spec.name
            ));
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

/// The deployed configuration and a stored document, merged and checked; nothing built yet.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Every named sink: the deployed ones, then the stored ones.
    pub sinks: Vec<SinkConfig>,
    /// The routes over [`sinks`](Self::sinks).
    pub router: Router,
    /// The splits, earliest registered first.
    pub splits: Vec<ActiveSplit>,
}

impl Plan {
    /// The deployed configuration alone.
    pub fn deployed(deployed: &Deployed) -> Result<Self, String> {
        Self::merge(deployed, &StoredRoutes::default())
    }

    /// Merges `stored` into `deployed`, refusing anything that would redefine a deployed sink or
    /// route, and checking every route and split.
    pub fn merge(deployed: &Deployed, stored: &StoredRoutes) -> Result<Self, String> {
        let mut sinks = deployed.sinks.clone();
        for (name, table) in &stored.sinks {
            let mut sink = SinkConfig {
                name: name.clone(),
                target: table.target.clone(),
                selection: table.selection.clone(),
            };
            set_emulator(&mut sink, deployed);
            match deployed.sinks.iter().find(|d| &d.name == name) {
                Some(existing) if *existing == sink => continue,
                Some(_) => {
                    return Err(format!(
                        "sink {name:?} is deployed (RELAY_CONFIG or the variables): the stored document cannot redefine it"
                    ));
                }
                None => {}
            }
            sink.target
                .shape(&sink.selection)
                .map_err(|e| format!("sink {name:?}, {e}"))?;
            sinks.push(sink);
        }
        let mut routes = deployed.routes.clone();
        for route in &stored.routes {
            match deployed.routes.iter().find(|d| d.name == route.name) {
                Some(existing) if existing == route => continue,
                Some(_) => {
                    return Err(format!(
                        "route {:?} is deployed: the stored document cannot redefine it",
                        route.name
                    ));
                }
                None => routes.push(route.clone()),
            }
        }
        let names = sinks.iter().map(|s| s.name.clone()).collect();
        let router = Router::compile(&routes, names).map_err(|e| e.to_string())?;

        let mut splits = check_splits(&stored.splits)?;
        for split in &mut splits {
            set_emulator(&mut split.sink, deployed);
        }
        Ok(Self {
            sinks,
            router,
            splits,
        })
    }

    /// Where a notification goes at `now`; destination indexes count the named sinks, then
    /// the splits, as in the [`Table`] built from this plan.
    pub fn decide(&self, input: &Input<'_>, now: SystemTime) -> Decision {
        decide(&self.router, &self.splits, input, now)
    }

    /// Every sink the plan needs built: the named ones, then one per split.
    pub fn sink_configs(&self) -> impl Iterator<Item = &SinkConfig> {
        self.sinks
            .iter()
            .chain(self.splits.iter().map(|split| &split.sink))
    }
}

fn set_emulator(sink: &mut SinkConfig, deployed: &Deployed) {
    if let Target::PubSub(target) = &mut sink.target {
        target.emulator_host.clone_from(&deployed.pubsub_emulator);
    }
}

/// The routing in effect: routes over named destinations, splits before them, and the stored
/// document's version they came from.
#[derive(Debug)]
pub struct Table {
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

impl Table {
    /// Builds the table of `plan`, with `sink` giving each sink's client.
    pub fn new(
        plan: Plan,
        version: Option<Version>,
        mut sink: impl FnMut(&SinkConfig) -> Arc<dyn Sink>,
    ) -> Result<Self, String> {
        let destinations = plan
            .sink_configs()
            .map(|config| {
                Destination::new(config, sink(config))
                    .map_err(|e| format!("sink {:?}, {e}", config.name))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let uses_request =
            plan.router.uses_request() || plan.splits.iter().any(|s| s.pattern.uses_request());
        Ok(Self {
            version,
            router: plan.router,
            destinations,
            splits: plan.splits,
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
