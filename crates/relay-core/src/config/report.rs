//! What the configuration says about itself: `relay check`'s printout and the attributes a
//! route's sinks send, for `relay export`.

use super::{Config, SETTINGS};
use crate::route::Route;

impl Config {
    /// The attributes that every sink of `route` sends, the ones a cloud-side filter for the
    /// route may name.
    pub fn sent_by_route(&self, route: &Route) -> Vec<String> {
        let shapes: Vec<_> = route
            .to
            .iter()
            .filter_map(|&i| self.sinks.get(i))
            .filter_map(|s| s.target.shape(&s.selection).ok())
            .collect();
        let Some((first, rest)) = shapes.split_first() else {
            return Vec::new();
        };
        let sent = first.sent_attributes();
        sent.into_iter()
            .filter(|name| rest.iter().all(|s| s.sent_attributes().contains(name)))
            .map(str::to_owned)
            .collect()
    }

    /// The effective settings as `(name, value)` pairs, secrets masked, for `relay check`:
    /// every setting of the table, then one line per sink and per route.
    pub fn effective(&self) -> Vec<(String, String)> {
        let mut lines: Vec<(String, String)> = SETTINGS
            .iter()
            .map(|s| {
                (
                    s.var.to_owned(),
                    self.settings
                        .shown(s.key)
                        .unwrap_or_else(|| "(unset)".into()),
                )
            })
            .collect();
        for sink in &self.sinks {
            let shape = sink
                .target
                .shape(&sink.selection)
                .map(|s| s.describe())
                .unwrap_or_default();
            lines.push((
                format!("sink {}", sink.name),
                format!("{}{shape}", sink.target.describe()),
            ));
        }
        for route in self.router.routes() {
            let to: Vec<&str> = route
                .to
                .iter()
                .map(|&i| self.router.sink_names()[i].as_str())
                .collect();
            let kind = match (route.fallback, route.pattern.is_empty()) {
                (true, _) => "fallback".to_owned(),
                (false, true) => "everything".to_owned(),
                (false, false) => format!("match {}", route.pattern.source()),
            };
            let stop = if route.stop { ", then stop" } else { "" };
            lines.push((
                format!("route {}", route.name),
                format!("{kind} -> {}{stop}", to.join(", ")),
            ));
        }
        lines
    }
}
