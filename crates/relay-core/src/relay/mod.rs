//! The relay's one entry point, [`Relay::handle`]: a request head and its body in, an
//! [`Outcome`] out. Every answer is decided on this path.
//!
//! The path of a notification: crawler path, method and size checks on the head, then
//! `admission.rs` (the budget in flight, the body read within its limit and
//! timeout), then [`verify`](crate::verify) over the raw bytes, then [`intake`](crate::intake)
//! takes the payload out of the body, then [`Notification`] parses it, then the
//! `RoutingTable` in effect (splits, then routes) picks the destinations, each shapes and
//! size-checks its message (`sink::shape`), then the attempt claims those
//! destinations in the delivery ledger (`ledger`), and only then does each [`Sink`] not yet
//! acknowledged publish it (`publish`), the [`archive`](crate::archive) as well when there is
//! one; the ledger records what they did. The answer is 202 only when every routed sink (and the
//! archive) acknowledged, now or in an earlier attempt. `live` keeps the routing table up to
//! date with the stored routes; `log` writes the request's one line; `replay` sends an
//! archived notification again along the same path, from the routing on; `start` builds a
//! relay from its configuration, once.

mod attempt;
mod invoke;
mod ledger;
mod live;
mod log;
mod publish;
mod refused;
mod replay;
mod standing;
mod start;

use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::request::Parts;
use http::{Method, StatusCode};
use http_body::Body;
use serde_json::json;

use self::attempt::Attempt;
use self::ledger::{Recorder, Routing};
use self::log::LogFields;
use self::publish::Answered;
pub use self::replay::{
    REPLAYED, ReplayError, ReplayPlan, ReplayRecord, ReplaySelection, ReplayTo, Replayed,
};
pub use self::standing::Standing;
pub use self::start::{StartError, open_archive};
use crate::admission::{Admission, declared_length};
use crate::config::{Config, MetricsFormat};
use crate::error::Error;
use crate::live::RoutingTable;
use crate::live::refresh::LiveRoutes;
use crate::metrics::{self, Metrics};
use crate::notification::Notification;
use crate::outcome::Outcome;
use crate::route::Input;
use crate::sink::{Destination, Message, Sink, SinkConfig};
use crate::source::{Opened, Sources};
use crate::verify::{Clock, Policy};

/// Paths browsers and crawlers probe; never a DSS callback, always 404.
pub(crate) const CRAWLER_PATHS: [&str; 2] = ["/robots.txt", "/favicon.ico"];

/// A configured relay: keys, policy, routes and destinations, built once at start and shared
/// by every request. The routing table is swapped whole when the stored routes change.
#[derive(Debug)]
pub struct Relay {
    config: Config,
    /// Who may send, on which paths: the DSS alone on every path without `[sources]`.
    sources: Sources,
    /// The routes, splits and destinations in effect.
    table: ArcSwap<RoutingTable>,
    /// The stored routes, when `RELAY_ROUTES_URL` is set.
    live: Option<LiveRoutes>,
    /// The delivery ledger, when `RELAY_LEDGER_URL` is set.
    ledger: Option<Recorder>,
    /// The archive, when `RELAY_ARCHIVE_URL` is set: a destination every verified notification
    /// is routed to.
    archive: Option<Destination>,
    /// The key the archive's records are sealed with, for replays to open them.
    archive_key: Option<crate::archive::ArchiveKey>,
    clock: Arc<dyn Clock>,
    admission: Admission,
    metrics: Metrics,
    /// The metric lines held for the end of each invocation ([`Relay::invoke`]), when the
    /// relay runs one request at a time (Lambda).
    held: Option<Arc<metrics::Held>>,
}

impl Relay {
    /// A relay with the configured routes and shaping, whose sinks come from `sink` instead of
    /// being built; tests use it to inject sinks and a fixed clock.
    pub fn with_sinks(
        config: Config,
        mut sink: impl FnMut(&SinkConfig) -> Arc<dyn Sink>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let table = RoutingTable::new(config.routes(), None, &mut sink)
            .expect("shapes are checked with the configuration");
        if config.max_clock_skew.is_none() {
            tracing::warn!(
                "The Date check is off (RELAY_MAX_CLOCK_SKEW_SECS=0): a captured notification can be replayed at any time."
            );
        }
        if config.allow_unsigned {
            if config.keys.is_empty() {
                tracing::warn!(
                    "Signature verification is OFF (RELAY_ALLOW_UNSIGNED=true, no key): anyone who knows the URL can publish."
                );
            } else {
                tracing::warn!(
                    "Unsigned notifications are accepted (RELAY_ALLOW_UNSIGNED=true); signed ones are still verified."
                );
            }
        }
        let policy = Policy {
            max_clock_skew: config.max_clock_skew,
            allow_unsigned: config.allow_unsigned,
        };
        let sources = Sources::new(&config.sources, &config.keys, &policy);
        let admission = Admission::new(config.server, config.max_body_bytes);
        let metrics = match config.metrics {
            MetricsFormat::Emf => Metrics::emf(Arc::new(metrics::Stdout), &config.metrics_name),
            MetricsFormat::Off => Metrics::off(),
        };
        let names: Vec<&str> = config.sinks.iter().map(|s| s.name.as_str()).collect();
        tracing::info!(sinks = ?names, routes = table.router.routes().len(), max_body_bytes = config.max_body_bytes, "Relay ready.");
        Self {
            config,
            sources,
            table: ArcSwap::from_pointee(table),
            live: None,
            ledger: None,
            archive: None,
            archive_key: None,
            clock,
            admission,
            metrics,
            held: None,
        }
    }

    /// The same relay, writing its metric lines to `out`; tests use it to read them.
    pub fn with_metrics(mut self, out: Arc<dyn metrics::MetricsOut>) -> Self {
        self.metrics = Metrics::emf(out, &self.config.metrics_name);
        self
    }

    /// The same relay, recording in `store` with the configuration's ledger settings (or the
    /// defaults); tests use it to share one ledger between relays.
    pub fn with_ledger(mut self, store: Arc<dyn crate::ledger::Ledger>) -> Self {
        let config = self
            .config
            .ledger
            .clone()
            .unwrap_or_else(|| crate::config::LedgerConfig {
                url: crate::ledger::LedgerUrl::File("(injected)".into()),
                retention: std::time::Duration::from_secs(crate::ledger::DEFAULT_RETENTION_SECS),
                key: crate::ledger::LedgerKey::default(),
                record_filtered: true,
            });
        self.ledger = Some(Recorder { store, config });
        self
    }

    /// The same relay, writing every verified notification to `archive` as well; tests use it
    /// to inject a store.
    pub fn with_archive(
        self,
        archive: Arc<dyn crate::archive::Archive>,
        key: crate::archive::ArchiveKey,
    ) -> Self {
        self.with_archive_through(archive, key, None)
    }

    /// The same relay, writing every verified notification to `archive`, through `stream` when
    /// given (`RELAY_ARCHIVE_STREAM`).
    pub(crate) fn with_archive_through(
        mut self,
        archive: Arc<dyn crate::archive::Archive>,
        key: crate::archive::ArchiveKey,
        stream: Option<Arc<dyn crate::archive::RecordStream>>,
    ) -> Self {
        self.archive = Some(crate::archive::destination(archive, key.clone(), stream));
        self.archive_key = Some(key);
        self
    }

    /// Opens every destination's connection, the ledger's and the archive's, concurrently and
    /// within the sink timeout, before the first notification (`RELAY_WARM_CONNECTIONS`): on
    /// Lambda the first invocation would otherwise pay each TLS handshake on a sliver of a CPU.
    /// A destination that cannot be reached is logged, and the relay starts all the same: its
    /// first notification tries again, as it would have.
    pub async fn warm(&self) {
        if !self.config.warm_connections {
            return;
        }
        let started = Instant::now();
        let table = self.table.load_full();
        let sinks = table
            .destinations
            .iter()
            .chain(self.archive.as_ref())
            .map(|d| async move { (d, d.sink.warm().await) });
        let ledger = async {
            match &self.ledger {
                Some(recorder) => Some(recorder.store.warm().await),
                None => None,
            }
        };
        let work = futures_util::future::join(futures_util::future::join_all(sinks), ledger);
        let Ok((sinks, ledger)) = tokio::time::timeout(self.config.sink_timeout, work).await else {
            tracing::warn!(
                timeout_ms = self.config.sink_timeout.as_millis() as u64,
                "Opening the destinations' connections took longer than the sink timeout; the first notification opens those still closed."
            );
            return;
        };
        for (destination, result) in sinks {
            if let Err(e) = result {
                tracing::warn!(sink = %destination.name, resource = %destination.resource, error = %e, "A destination's connection could not be opened at start; its first notification tries again.");
            }
        }
        if let Some(Err(e)) = ledger {
            tracing::warn!(error = %e, "The ledger's connection could not be opened at start; the first claim tries again.");
        }
        tracing::info!(
            elapsed_ms = started.elapsed().as_secs_f64() * 1000.0,
            "Connections opened."
        );
    }

    /// The configuration the relay runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The one entry point: answers a request, reading its body here, and by `deadline` at the
    /// latest (a platform's own timeout, less a margin). Sinks get the earlier of it and
    /// `RELAY_SINK_TIMEOUT_MS`, counted from when the body has been read.
    pub async fn handle<B>(&self, request: http::Request<B>, deadline: Option<Instant>) -> Outcome
    where
        B: Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let started = Instant::now();
        let (parts, body) = request.into_parts();
        let mut fields = LogFields::default();
        let outcome = match self.answer(&parts, body, &mut fields, deadline).await {
            Ok(outcome) => outcome,
            Err(e) => Outcome::from_error(&e),
        };
        self.log(&parts, &outcome, &fields, started);
        outcome.for_method(&parts.method)
    }

    /// [`handle`](Self::handle) for a request whose body is already in memory, with no
    /// deadline but the sink timeout.
    pub async fn accept(&self, request: http::Request<Bytes>) -> Outcome {
        self.handle(request.map(http_body_util::Full::new), None)
            .await
    }

    /// The head checks, admission and the body read, then the notification's path.
    async fn answer<B>(
        &self,
        parts: &Parts,
        body: B,
        fields: &mut LogFields,
        deadline: Option<Instant>,
    ) -> Result<Outcome, Error>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        if let Some(health) = self.check_head(parts)? {
            return Ok(health);
        }
        // Held until the answer: the request and its body's bytes count against the budget.
        let mut ticket = self.admission.admit()?;
        let body = self.admission.read(parts, body, &mut ticket).await?;
        let read = Instant::now();
        let sinks_deadline = deadline.map_or(read + self.config.sink_timeout, |d| {
            d.min(read + self.config.sink_timeout)
        });
        if sinks_deadline <= read {
            return Err(Error::DeadlinePassed);
        }
        self.deliver(parts, body, fields, sinks_deadline).await
    }

    /// `Ok(Some(_))`: answered (health); `Ok(None)`: go on to the body. Crawler paths, health
    /// checks, refused methods and a declared `Content-Length` over the limit are answered
    /// before the body is read.
    fn check_head(&self, parts: &Parts) -> Result<Option<Outcome>, Error> {
        if CRAWLER_PATHS.contains(&parts.uri.path()) {
            return Err(Error::NotFound);
        }
        let (method, headers) = (&parts.method, &parts.headers);
        match *method {
            Method::GET | Method::HEAD => {
                return Ok(Some(Outcome::json(
                    StatusCode::OK,
                    &json!({"status": "ok"}),
                )));
            }
            Method::POST | Method::PUT => {}
            _ => return Err(Error::MethodNotAllowed(method.clone())),
        }
        let limit = self.config.max_body_bytes;
        if declared_length(headers).is_some_and(|n| n > limit as u64) {
            return Err(Error::BodyTooLarge { limit });
        }
        Ok(None)
    }

    /// A body read in full: verified, opened, parsed, routed, shaped, published.
    async fn deliver(
        &self,
        parts: &Parts,
        body: Bytes,
        fields: &mut LogFields,
        deadline: Instant,
    ) -> Result<Outcome, Error> {
        let received_at = self.clock.now();
        let source = self
            .sources
            .for_path(parts.uri.path())
            .ok_or(Error::UnknownPath)?;
        let notification = self.open(parts, body, source, received_at).await?;
        fields.notification(&notification);

        let table = self.table.load_full();
        let routes_version = table.version.as_ref().map(|v| v.0.as_str());
        fields.routes_version = routes_version.map(str::to_owned);
        // The request document, made once when a route reads it; the archive's record reuses it.
        let request = table.uses_request().then(|| attempt::request_of(parts));
        let unread = serde_json::Value::Null;
        let input = Input::new(notification.document(), request.as_ref().unwrap_or(&unread))
            .from(notification.source());
        let decision = table.decide(&input, received_at);
        fields.split.clone_from(&decision.split);
        let filtered = decision.destinations.is_empty();
        fields.filtered = filtered;
        let base = Message::new(&notification, &parts.headers, received_at);
        let trace_id = base.trace.as_ref().map(|t| t.trace_id());
        fields.trace_id = trace_id.map(str::to_owned);
        let planned = self.plan(
            &table,
            &decision.destinations,
            &notification,
            &base,
            parts,
            request,
        )?;
        // A filtered notification is recorded only when RELAY_LEDGER_RECORD_FILTERED is on
        // (without it, its archive write alone makes a retry harmless); then the attempt claims
        // no destination, and the DSS gets its 202 so that it does not retry.
        let record = !filtered
            || self
                .ledger
                .as_ref()
                .is_some_and(|r| r.config.record_filtered);
        let attempted = self
            .attempt(Attempt {
                notification: &notification,
                table: &table,
                planned,
                routing: Routing {
                    destinations: &[],
                    routes_version,
                    split: decision.split.as_deref(),
                    run: None,
                },
                received_at,
                deadline,
                record,
            })
            .await?;
        fields.duplicate = attempted.is_duplicate();
        let answered = Answered {
            routes_version,
            filtered,
            trace_id,
        };
        self.delivered(&notification, &attempted, answered)
    }
}

impl Relay {
    /// The request verified by its source and opened; one refused after it verified is kept
    /// ([`keep_refused`](Self::keep_refused)) before the refusal is answered.
    async fn open(
        &self,
        parts: &Parts,
        body: Bytes,
        source: &crate::source::Source,
        received_at: std::time::SystemTime,
    ) -> Result<Notification<crate::notification::Verified>, Error> {
        let payload_field = &self.config.payload_field;
        let opened = source
            .open(parts, body.clone(), payload_field, self.clock.as_ref())
            .await;
        match opened {
            Ok(notification) => Ok(notification),
            Err(Opened::Unverified(error)) => Err(error),
            Err(Opened::Refused(refusal)) => Err(self
                .keep_refused(parts, body, source, refusal, received_at)
                .await),
        }
    }
}
