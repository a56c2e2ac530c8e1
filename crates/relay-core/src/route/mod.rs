//! Where a notification is routed: an ordered list of routes, each a pattern and the named
//! sinks it delivers to, compiled once at start.
//!
//! Every matching route delivers (fan-out); a route with `stop` ends evaluation when it
//! matches; `fallback` routes take what no other route matched. A sink that several routes
//! name receives the notification once.

mod describe;
mod exact;
mod export;
mod jmes;
mod matcher;
mod pattern;
mod request;

use std::collections::BTreeMap;

use serde_json::Value;

pub use export::{Export, FilterLanguage};
pub use jmes::JMESPATH_MAX_BYTES;
pub(crate) use pattern::REQUEST;
pub use pattern::{Input, Pattern, PatternError};
pub use request::request_document;

/// A compiled route.
#[derive(Debug, Clone)]
pub struct Route {
    /// The route's name, for logs and `relay explain`.
    pub name: String,
    /// What it matches; an empty pattern matches everything.
    pub pattern: Pattern,
    /// Indexes into the router's sink list.
    pub to: Vec<usize>,
    /// Stop evaluating further routes when this one matches.
    pub stop: bool,
    /// Only taken when no other route matched.
    pub fallback: bool,
}

/// The ordered routes over a list of named sinks.
#[derive(Debug, Clone)]
pub struct Router {
    routes: Vec<Route>,
    sink_names: Vec<String>,
    uses_request: bool,
}

/// What one route decided about one notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteVerdict {
    /// The route.
    pub route: String,
    /// Whether it delivers the notification.
    pub matched: bool,
    /// Why: the first condition that failed, or what made it match or not apply.
    pub reason: String,
}

/// The outcome of routing one notification, explained ([`Router::explain`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routing {
    /// One verdict per route, in order (routes after a matching `stop` route included).
    pub verdicts: Vec<RouteVerdict>,
    /// The sinks to publish to, each once, in the order routes named them.
    pub sinks: Vec<usize>,
}

/// A `[[routes]]` entry as written in the configuration file.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// Unique name.
    pub name: String,
    /// The pattern (an object), or `None` to match everything.
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Value>,
    /// Names of sinks.
    pub to: Vec<String>,
    /// See [`Route::stop`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stop: bool,
    /// See [`Route::fallback`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fallback: bool,
    /// Match on `$request` (the path, the query, the headers), which no sender signs: see
    /// `UNSIGNED_REQUEST`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accept_unsigned: bool,
}

/// Why a route or a split that matches on `$request` must say `accept_unsigned = true`.
pub(crate) const UNSIGNED_REQUEST: &str = "matches on $request (the path, the query or the headers), which no sender signs: whoever holds a captured request can change them and send it down this route; add accept_unsigned = true to route on them all the same";

/// Why routes could not be compiled. `route` names the route, `field` the part at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("route {route:?}, {field}: {message}")]
pub struct RouteError {
    /// The route at fault (or `""` for the list as a whole).
    pub route: String,
    /// `match.<path>`, `to`, `name`, `stop`…
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl Router {
    /// Routes every notification to every sink: the zero-configuration path of the variables.
    pub fn to_all(sink_names: Vec<String>) -> Self {
        let route = Route {
            name: "all".to_owned(),
            pattern: Pattern::compile(&Value::Object(Default::default())).expect("empty pattern"),
            to: (0..sink_names.len()).collect(),
            stop: false,
            fallback: false,
        };
        Self {
            routes: vec![route],
            sink_names,
            uses_request: false,
        }
    }

    /// Compiles route definitions over the named sinks, checking everything a route can get
    /// wrong: unknown or unused sinks, bad patterns, duplicate names, and routes an earlier
    /// `stop` route leaves unreachable.
    pub fn compile(specs: &[RouteSpec], sink_names: Vec<String>) -> Result<Self, RouteError> {
        let fail = |route: &str, field: &str, message: String| RouteError {
            route: route.to_owned(),
            field: field.to_owned(),
            message,
        };
        if specs.is_empty() {
            return Err(fail(
                "",
                "routes",
                "there are sinks but no [[routes]]".into(),
            ));
        }
        let index: BTreeMap<&str, usize> = sink_names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let mut routes: Vec<Route> = Vec::with_capacity(specs.len());
        let mut used = vec![false; sink_names.len()];
        for spec in specs {
            let route = compile_route(spec, &routes, &index, &mut used)?;
            routes.push(route);
        }
        if let Some(i) = used.iter().position(|u| !u) {
            return Err(fail(
                "",
                "routes",
                format!("the sink {:?} is not used by any route", sink_names[i]),
            ));
        }
        let uses_request = routes.iter().any(|r| r.pattern.uses_request());
        Ok(Self {
            routes,
            sink_names,
            uses_request,
        })
    }

    /// The names of the sinks, by index.
    pub(crate) fn sink_names(&self) -> &[String] {
        &self.sink_names
    }

    /// The routes, in order.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// True when some route matches on `$request`, so the caller builds it.
    pub(crate) fn uses_request(&self) -> bool {
        self.uses_request
    }

    /// The sinks one notification goes to, each once, in the order routes named them. This is
    /// the relay's path: it compiles nothing and formats nothing ([`explain`](Self::explain)
    /// says why).
    pub fn route(&self, input: &Input<'_>) -> Vec<usize> {
        self.evaluate(input, None)
    }

    /// The same decision as [`route`](Self::route), with each route's verdict and its reason,
    /// for `relay explain`.
    pub fn explain(&self, input: &Input<'_>) -> Routing {
        let mut verdicts = Vec::with_capacity(self.routes.len());
        let sinks = self.evaluate(input, Some(&mut verdicts));
        Routing { verdicts, sinks }
    }

    /// Routes one notification; with `verdicts`, says why for each route (only then is any
    /// text formatted).
    fn evaluate(
        &self,
        input: &Input<'_>,
        mut verdicts: Option<&mut Vec<RouteVerdict>>,
    ) -> Vec<usize> {
        let explaining = verdicts.is_some();
        let mut sinks: Vec<usize> = Vec::new();
        let mut matched_any = false;
        let mut stopped: Option<&str> = None;
        let take = |sinks: &mut Vec<usize>, route: &Route| {
            for &i in &route.to {
                if !sinks.contains(&i) {
                    sinks.push(i);
                }
            }
        };
        let mut note = |route: &Route, matched: bool, reason: &dyn Fn() -> String| {
            if let Some(verdicts) = verdicts.as_deref_mut() {
                verdicts.push(RouteVerdict {
                    route: route.name.clone(),
                    matched,
                    reason: reason(),
                });
            }
        };
        for route in self.routes.iter().filter(|r| !r.fallback) {
            if let Some(stopper) = stopped {
                note(route, false, &|| {
                    format!("not evaluated: {stopper:?} matched and has stop = true")
                });
                continue;
            }
            // Only an explanation needs to know which condition failed.
            let failed = match explaining {
                true => route.pattern.first_failure(input),
                false => (!route.pattern.matches(input)).then(String::new),
            };
            if let Some(failed) = failed {
                note(route, false, &|| format!("failed: {failed}"));
                continue;
            }
            matched_any = true;
            take(&mut sinks, route);
            if route.stop {
                stopped = Some(&route.name);
            }
            note(route, true, &|| {
                match route.pattern.is_empty() {
                    true => "no conditions",
                    false => "every condition held",
                }
                .to_owned()
            });
        }
        for route in self.routes.iter().filter(|r| r.fallback) {
            if matched_any {
                note(route, false, &|| {
                    "fallback not taken: another route matched".into()
                });
            } else {
                take(&mut sinks, route);
                note(route, true, &|| "fallback: no other route matched".into());
            }
        }
        sinks
    }
}

/// One route checked against those before it (`earlier`) and the sinks (`index`, by name),
/// marking the sinks it sends to in `used`.
fn compile_route(
    spec: &RouteSpec,
    earlier: &[Route],
    index: &BTreeMap<&str, usize>,
    used: &mut [bool],
) -> Result<Route, RouteError> {
    let fail = |route: &str, field: &str, message: String| RouteError {
        route: route.to_owned(),
        field: field.to_owned(),
        message,
    };
    if spec.name.is_empty() {
        return Err(fail("", "name", "every route needs a name".into()));
    }
    if earlier.iter().any(|r| r.name == spec.name) {
        return Err(fail(
            &spec.name,
            "name",
            "another route has this name".into(),
        ));
    }
    if spec.to.is_empty() {
        return Err(fail(&spec.name, "to", "name at least one sink".into()));
    }
    let mut to = Vec::new();
    for name in &spec.to {
        let &i = index.get(name.as_str()).ok_or_else(|| {
            let known: Vec<&str> = index.keys().copied().collect();
            fail(
                &spec.name,
                "to",
                format!("unknown sink {name:?}; sinks are {known:?}"),
            )
        })?;
        used[i] = true;
        if !to.contains(&i) {
            to.push(i);
        }
    }
    if spec.fallback && spec.pattern.is_some() {
        return Err(fail(
            &spec.name,
            "match",
            "a fallback route takes what matched nothing; it has no match".into(),
        ));
    }
    let pattern = Pattern::compile(
        spec.pattern
            .as_ref()
            .unwrap_or(&Value::Object(Default::default())),
    )
    .map_err(|e| fail(&spec.name, &e.at, e.message))?;
    if pattern.uses_request() && !spec.accept_unsigned {
        return Err(fail(&spec.name, "match", UNSIGNED_REQUEST.into()));
    }
    let cover = earlier
        .iter()
        .find(|r| r.stop && !r.fallback && covers(r, spec));
    if let Some(cover) = cover.filter(|_| !spec.fallback) {
        return Err(fail(
            &spec.name,
            "match",
            format!(
                "can never match: the earlier route {:?} has stop = true and matches everything this one does",
                cover.name
            ),
        ));
    }
    Ok(Route {
        name: spec.name.clone(),
        pattern,
        to,
        stop: spec.stop,
        fallback: spec.fallback,
    })
}

/// Whether the earlier `stop` route `earlier` matches at least everything `spec` would: it has
/// no condition, or exactly the same pattern. (Finer subsumption is not attempted.)
fn covers(earlier: &Route, spec: &RouteSpec) -> bool {
    earlier.pattern.is_empty() || spec.pattern.as_ref() == Some(earlier.pattern.source())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(
        name: &str,
        pattern: Option<Value>,
        to: &[&str],
        stop: bool,
        fallback: bool,
    ) -> RouteSpec {
        RouteSpec {
            name: name.into(),
            pattern,
            to: to.iter().map(|s| (*s).to_owned()).collect(),
            stop,
            fallback,
            // The tests of $request routes opt in as their users must.
            accept_unsigned: true,
        }
    }

    fn sinks() -> Vec<String> {
        ["analysis", "indexer", "dev"].map(String::from).to_vec()
    }

    /// The explanation, after checking that the relay's path decides the same.
    fn route(router: &Router, document: Value) -> Routing {
        let input = Input::new(&document, &Value::Null);
        let routing = router.explain(&input);
        assert_eq!(router.route(&input), routing.sinks, "{document}");
        routing
    }

    fn router() -> Router {
        Router::compile(
            &[
                spec(
                    "dev-project",
                    Some(json!({"subscription_id": [{"prefix": "dev-"}]})),
                    &["dev"],
                    true,
                    false,
                ),
                spec(
                    "creates",
                    Some(json!({"event_type": ["CREATE"]})),
                    &["analysis", "indexer"],
                    false,
                    false,
                ),
                spec(
                    "big-bundles",
                    Some(json!({"match": {"bundle_uuid": [{"prefix": "b"}]}})),
                    &["indexer"],
                    false,
                    false,
                ),
                spec("rest", None, &["indexer"], false, true),
            ],
            sinks(),
        )
        .unwrap()
    }

    #[test]
    fn fans_out_and_publishes_to_a_shared_sink_once() {
        let r = route(
            &router(),
            json!({"subscription_id": "s", "event_type": "CREATE", "match": {"bundle_uuid": "b1"}}),
        );
        assert_eq!(r.sinks, [0, 1], "indexer named by two routes appears once");
        let matched: Vec<bool> = r.verdicts.iter().map(|d| d.matched).collect();
        assert_eq!(matched, [false, true, true, false]);
        assert_eq!(
            r.verdicts[0].reason,
            r#"failed: subscription_id is one of [prefix "dev-"]"#
        );
        assert_eq!(
            r.verdicts[3].reason,
            "fallback not taken: another route matched"
        );
    }

    #[test]
    fn stop_ends_evaluation_and_fallback_takes_the_rest() {
        let r = route(
            &router(),
            json!({"subscription_id": "dev-1", "event_type": "CREATE", "match": {"bundle_uuid": "b1"}}),
        );
        assert_eq!(r.sinks, [2]);
        assert!(
            r.verdicts[1]
                .reason
                .starts_with("not evaluated: \"dev-project\" matched")
        );
        let r = route(
            &router(),
            json!({"subscription_id": "s", "event_type": "DELETE", "match": {"bundle_uuid": "c1"}}),
        );
        assert_eq!(r.sinks, [1]);
        assert_eq!(r.verdicts[3].reason, "fallback: no other route matched");
    }

    #[test]
    fn nothing_matched_and_no_fallback_routes_nowhere() {
        let router = Router::compile(
            &[spec(
                "creates",
                Some(json!({"event_type": ["CREATE"]})),
                &["analysis"],
                false,
                false,
            )],
            vec!["analysis".into()],
        )
        .unwrap();
        assert!(
            route(&router, json!({"event_type": "DELETE"}))
                .sinks
                .is_empty()
        );
    }

    /// The routes `toml` gives (an array of `[[routes]]` tables, as a configuration writes
    /// them), with `ALL` standing for a route `all` to every sink.
    fn routes_of(toml: &str) -> Vec<RouteSpec> {
        #[derive(serde::Deserialize)]
        struct File {
            routes: Vec<RouteSpec>,
        }
        let all = r#"{ name = "all", to = ["analysis", "indexer", "dev"] }"#;
        let file = format!("routes = {}", toml.replace("ALL", all));
        toml::from_str::<File>(&file).unwrap().routes
    }

    #[test]
    fn compile_errors_name_the_route_and_field() {
        // The routes, then the route and the field the error names.
        let cases = [
            (r#"[{ name = "a", to = ["nope"] }]"#, "a", "to"),
            (r#"[{ name = "a", to = ["analysis"] }]"#, "", "routes"),
            (r#"[ALL, { name = "all", to = ["dev"] }]"#, "all", "name"),
            (r#"[ALL, { name = "empty", to = [] }]"#, "empty", "to"),
            (
                r#"[ALL, { name = "x", to = ["dev"], match = { a = [{ regex = "(" }] } }]"#,
                "x",
                "match.a",
            ),
            (
                r#"[
                    { name = "first", to = ["analysis", "indexer", "dev"], stop = true },
                    { name = "later", to = ["dev"], match = { a = ["b"] } },
                ]"#,
                "later",
                "match",
            ),
            (
                r#"[
                    ALL,
                    { name = "same", to = ["dev"], match = { a = ["b"] }, stop = true },
                    { name = "again", to = ["dev"], match = { a = ["b"] } },
                ]"#,
                "again",
                "match",
            ),
            (
                r#"[ALL, { name = "fb", to = ["dev"], match = { a = ["b"] }, fallback = true }]"#,
                "fb",
                "match",
            ),
        ];
        for (routes, route, field) in cases {
            let e = Router::compile(&routes_of(routes), sinks()).unwrap_err();
            assert_eq!((e.route.as_str(), e.field.as_str()), (route, field), "{e}");
        }
    }

    #[test]
    fn an_allow_list_of_100000_ids_matches_as_a_list_does() {
        let ids: Vec<String> = (0..100_000).map(|i| format!("id-{i:06}")).collect();
        let router = Router::compile(
            &[spec(
                "allowed",
                Some(json!({"subscription_id": ids, "event_type": ["CREATE", 5]})),
                &["analysis"],
                false,
                false,
            )],
            vec!["analysis".into()],
        )
        .unwrap();
        let listed = json!({"subscription_id": "id-054321", "event_type": "CREATE"});
        let numeric = json!({"subscription_id": ["x", "id-099999"], "event_type": 5.0});
        let unlisted = json!({"subscription_id": "id-100000", "event_type": "CREATE"});
        assert_eq!(route(&router, listed.clone()).sinks, [0]);
        assert_eq!(route(&router, numeric).sinks, [0]);
        assert!(route(&router, unlisted.clone()).sinks.is_empty());
        // What it costs, matching or not, is the `allowlist` group of benches/route.rs.
    }

    #[test]
    fn only_routes_that_read_the_request_ask_for_it() {
        assert!(!router().uses_request());
        let r = Router::compile(
            &[spec(
                "gcp",
                Some(json!({"$request": {"query": {"replica": ["gcp"]}}})),
                &["analysis"],
                false,
                false,
            )],
            vec!["analysis".into()],
        )
        .unwrap();
        assert!(r.uses_request());
        let request = json!({"path": "/", "query": {"replica": ["gcp"]}, "headers": {}});
        assert_eq!(r.route(&Input::new(&json!({}), &request)), [0]);
    }
}
