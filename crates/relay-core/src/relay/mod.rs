//! The relay's one entry point: a request in, an [`Outcome`] out.
//!
//! The path of a notification: crawler path, method and size checks, then
//! [`verify`](crate::verify) over the raw bytes, then [`intake`](crate::intake) takes the payload
//! out of the body, then [`Notification`] parses it, then the routing [`Table`] in effect (splits,
//! then routes) picks the destinations, each shapes and size-checks its message, and only then
//! does each [`Sink`] publish it. The answer is 202 only when every routed sink acknowledged.
//! [`live`] keeps the routing table up to date with the stored routes.

mod live;

use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use bytes::Bytes;
use futures_util::future::join_all;
use http::request::Parts;
use http::{Method, StatusCode, header};
use serde_json::json;

use crate::admission::{Admission, Ticket};
use crate::config::{Config, MetricsFormat};
use crate::error::Error;
use crate::intake::extract_payload;
use crate::live::refresh::LiveRoutes;
use crate::live::{Deployed, Plan, Table};
use crate::metrics::{self, Metrics};
use crate::notification::{Notification, Verified};
use crate::outcome::Outcome;
use crate::route::{Input, request_document};
use crate::sink::{BuildError, Message, Sink, SinkConfig, SinkError};
use crate::verify::{self, Clock, Policy, SignedRequest, SystemClock};

/// Paths browsers and crawlers probe; never a DSS callback, always 404.
pub const CRAWLER_PATHS: [&str; 2] = ["/robots.txt", "/favicon.ico"];

/// A configured relay: keys, policy, routes and destinations, built once at start and shared
/// by every request. The routing table is swapped whole when the stored routes change.
#[derive(Debug)]
pub struct Relay {
    config: Config,
    policy: Policy,
    /// The routes, splits and destinations in effect.
    table: ArcSwap<Table>,
    /// The stored routes, when `RELAY_ROUTES_URL` is set.
    live: Option<LiveRoutes>,
    clock: Arc<dyn Clock>,
    admission: Admission,
    metrics: Metrics,
}

/// Why a body could not be read in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    /// It exceeded the body limit (413).
    TooLarge,
    /// It did not arrive within the body read timeout (408).
    TimedOut,
    /// The client went away or sent a broken body (400).
    Broken,
}

/// Why the relay could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A sink could not be built: a file that cannot be opened, a client without credentials,
    /// a destination this build leaves out.
    #[error("sink {sink:?}: {error}")]
    Sink {
        /// The sink's name.
        sink: String,
        /// What went wrong.
        error: BuildError,
    },
    /// The HMAC keys could not be read from `RELAY_HMAC_KEYS_SECRET_ARN`.
    #[error("RELAY_HMAC_KEYS_SECRET_ARN: {0}")]
    Secret(String),
    /// The stored routes' store cannot be used.
    #[error("RELAY_ROUTES_URL: {0}")]
    Routes(String),
}

/// What the per-request log line says about the notification.
#[derive(Default)]
struct LogFields {
    filtered: bool,
    subscription_id: Option<String>,
    bundle_uuid: Option<String>,
    bundle_version: Option<String>,
    event_type: Option<String>,
    routes_version: Option<String>,
    split: Option<String>,
}

impl Relay {
    /// Builds every sink the configuration names (opening files, building each SDK client
    /// once) and reads the keys from Secrets Manager when configured.
    pub async fn from_config(config: Config) -> Result<Self, StartError> {
        #[cfg(feature = "aws")]
        let aws = match config.keys_secret_arn.is_some()
            || config.sinks.iter().any(|s| s.target.uses_aws())
        {
            true => Some(crate::sink::load_aws_config(config.sink_timeout).await),
            false => None,
        };
        #[cfg(feature = "secrets")]
        let mut config = config;
        if let Some(arn) = config.keys_secret_arn.clone() {
            #[cfg(feature = "secrets")]
            {
                let sdk = aws.as_ref().expect("loaded for the secret");
                let (named, any) = crate::secrets::load_keys(sdk, &arn)
                    .await
                    .map_err(StartError::Secret)?;
                tracing::info!(
                    named_keys = named.len(),
                    catch_all = any.is_some(),
                    "HMAC keys read from Secrets Manager."
                );
                config.keys.extend(named, any);
            }
            #[cfg(not(feature = "secrets"))]
            return Err(StartError::Secret(format!(
                "{arn} is configured, but this build leaves out the cargo feature \"secrets\""
            )));
        }
        // One way to build a sink: the deployed ones now, those stored routes add later.
        #[cfg(feature = "aws")]
        let factory = live::sink_factory(aws, config.sink_timeout);
        #[cfg(not(feature = "aws"))]
        let factory = live::sink_factory();
        let mut sinks = Vec::with_capacity(config.sinks.len());
        for sink in &config.sinks {
            let fail = |error| StartError::Sink {
                sink: sink.name.clone(),
                error,
            };
            sinks.push(factory(sink.clone()).await.map_err(fail)?);
        }
        let routes_url = config.routes_url.clone();
        let mut sinks = sinks.into_iter();
        let relay = Self::with_sinks(
            config,
            |_| sinks.next().expect("one per sink"),
            Arc::new(SystemClock),
        );
        let Some(url) = routes_url else {
            return Ok(relay);
        };
        let store = crate::live::store::open(&url)
            .await
            .map_err(|e| StartError::Routes(e.to_string()))?;
        let relay = relay.with_live_routes(store, factory);
        // At start, a store that cannot be read or a refused document leaves the deployed
        // routes in effect; both are logged, and the next refresh tries again.
        relay.refresh().await;
        Ok(relay)
    }

    /// A relay with the configured routes and shaping, whose sinks come from `sink` instead of
    /// being built; tests use it to inject sinks and a fixed clock.
    pub fn with_sinks(
        config: Config,
        mut sink: impl FnMut(&SinkConfig) -> Arc<dyn Sink>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let plan = Plan::deployed(&Deployed::from(&config))
            .expect("routes are checked with the configuration");
        let table =
            Table::new(plan, None, &mut sink).expect("shapes are checked with the configuration");
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
        let limits = config.server;
        let admission = Admission::new(
            limits.max_concurrent_requests,
            limits.max_buffered_bytes,
            config.max_body_bytes,
        );
        let metrics = match config.metrics {
            MetricsFormat::Emf => Metrics::emf(Arc::new(metrics::Stdout), &config.metrics_name),
            MetricsFormat::Off => Metrics::off(),
        };
        let names: Vec<&str> = config.sinks.iter().map(|s| s.name.as_str()).collect();
        tracing::info!(sinks = ?names, routes = table.router.routes().len(), max_body_bytes = config.max_body_bytes, "Relay ready.");
        Self {
            config,
            policy,
            table: ArcSwap::from_pointee(table),
            live: None,
            clock,
            admission,
            metrics,
        }
    }

    /// The same relay, writing its metric lines to `out`; tests use it to read them.
    pub fn with_metrics(mut self, out: Arc<dyn metrics::MetricsOut>) -> Self {
        self.metrics = Metrics::emf(out, &self.config.metrics_name);
        self
    }

    /// The configuration the relay runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Answers what can be answered before the body is read: crawler paths, health checks,
    /// refused methods and a declared `Content-Length` over the limit. Adapters call it so that they never
    /// read an oversized body; [`accept`](Self::accept) applies the same checks again.
    pub fn answer_before_body(&self, parts: &Parts) -> Option<Outcome> {
        let started = Instant::now();
        let answer = match self.check_head(parts) {
            Ok(None) => return None,
            Ok(Some(health)) => health,
            Err(e) => Outcome::from_error(&e),
        };
        self.log(parts, &answer, &LogFields::default(), started);
        Some(answer.for_method(&parts.method))
    }

    /// Admits a request whose head has arrived into the budget of requests and body bytes in
    /// flight (relay-gcf), or answers 503 `overloaded` before its body is read. The ticket is
    /// held until the answer is sent.
    pub fn admit(&self, parts: &Parts) -> Result<Ticket, Box<Outcome>> {
        self.admission.admit(parts).map_err(|e| {
            let outcome = Outcome::from_error(&e);
            self.log(parts, &outcome, &LogFields::default(), Instant::now());
            Box::new(outcome)
        })
    }

    /// The answer for a request whose body could not be read in full.
    pub fn answer_unreadable(&self, parts: &Parts, why: Unreadable) -> Outcome {
        let error = match why {
            Unreadable::TooLarge => Error::BodyTooLarge {
                limit: self.config.max_body_bytes,
            },
            Unreadable::TimedOut => Error::RequestTimeout {
                secs: self.config.server.body_timeout.as_secs(),
            },
            Unreadable::Broken => Error::UnreadableBody,
        };
        let outcome = Outcome::from_error(&error);
        self.log(parts, &outcome, &LogFields::default(), Instant::now());
        outcome
    }

    /// Handles one inbound request: method, path, query, headers and the raw body bytes.
    pub async fn accept(&self, request: http::Request<Bytes>) -> Outcome {
        self.accept_until(request, None).await
    }

    /// Like [`accept`](Self::accept), answering by `deadline` at the latest (a platform's own
    /// timeout, minus a margin); sinks get the earlier of it and `RELAY_SINK_TIMEOUT_MS`.
    pub async fn accept_until(
        &self,
        request: http::Request<Bytes>,
        deadline: Option<Instant>,
    ) -> Outcome {
        let started = Instant::now();
        let sinks_deadline = deadline.map_or(started + self.config.sink_timeout, |d| {
            d.min(started + self.config.sink_timeout)
        });
        let (parts, body) = request.into_parts();
        let mut fields = LogFields::default();
        let outcome = match self
            .process(&parts, body, &mut fields, sinks_deadline)
            .await
        {
            Ok(outcome) => outcome,
            Err(e) => Outcome::from_error(&e),
        };
        self.log(&parts, &outcome, &fields, started);
        outcome.for_method(&parts.method)
    }

    /// `Ok(Some(_))`: answered (health); `Ok(None)`: go on to the body.
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
        let declared = headers
            .get_all(header::CONTENT_LENGTH)
            .iter()
            .filter_map(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
            .max();
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(Error::BodyTooLarge { limit });
        }
        Ok(None)
    }

    async fn process(
        &self,
        parts: &Parts,
        body: Bytes,
        fields: &mut LogFields,
        deadline: Instant,
    ) -> Result<Outcome, Error> {
        if let Some(answer) = self.check_head(parts)? {
            return Ok(answer);
        }
        if deadline <= Instant::now() {
            return Err(Error::DeadlinePassed);
        }
        if body.len() > self.config.max_body_bytes {
            return Err(Error::BodyTooLarge {
                limit: self.config.max_body_bytes,
            });
        }
        let received_at = self.clock.now();
        let signed = SignedRequest {
            method: &parts.method,
            uri: &parts.uri,
            headers: &parts.headers,
            body: &body,
        };
        let proof = verify::verify(signed, &self.config.keys, &self.policy, self.clock.as_ref())?;
        let payload = extract_payload(&parts.headers, body, &self.config.payload_field).await?;
        let notification = Notification::parse(payload)?.into_verified(proof);
        fields.subscription_id = Some(notification.subscription_id().to_owned());
        fields.bundle_uuid = Some(notification.bundle_uuid().to_owned());
        fields.bundle_version = Some(notification.bundle_version().to_owned());
        fields.event_type = notification.event_type().map(str::to_owned);

        let table = self.table.load_full();
        let routes_version = table.version.as_ref().map(|v| v.0.as_str());
        fields.routes_version = routes_version.map(str::to_owned);
        let request = match table.uses_request() {
            true => request_document(parts.uri.path(), parts.uri.query(), &parts.headers),
            false => serde_json::Value::Null,
        };
        let input = Input::new(notification.document(), &request);
        let decision = table.decide(&input, received_at);
        fields.split.clone_from(&decision.split);
        if decision.destinations.is_empty() {
            // Nothing wants it: acknowledge, so the DSS does not retry.
            fields.filtered = true;
            return Ok(Outcome::json(
                StatusCode::ACCEPTED,
                &json!({
                    "status": "filtered",
                    "dedup_key": notification.dedup_key(),
                    "routes_version": routes_version,
                }),
            ));
        }

        let attempt = crate::notification::notify_attempt(&parts.headers);
        let base = Message::new(&notification, attempt, received_at);
        // Every routed destination's message is shaped and size-checked before any sink is
        // called: a notification one of them cannot take is refused before anything leaves.
        let mut messages = Vec::with_capacity(decision.destinations.len());
        for &i in &decision.destinations {
            let destination = &table.destinations[i];
            let message = destination.shape.apply(&base, &notification).map_err(|e| {
                tracing::error!(sink = destination.name, error = %e, "A template cannot be filled; an operator must act.");
                Error::SinkFailed {
                    sink: destination.sink.name().to_owned(),
                }
            })?;
            if let Some(limit) = destination
                .max_message_bytes
                .filter(|&max| message.encoded_size() > max)
            {
                return Err(Error::MessageTooLarge {
                    sink: destination.sink.name().to_owned(),
                    limit,
                });
            }
            messages.push((&destination.sink, message));
        }
        self.publish(&notification, messages, deadline, routes_version)
            .await
    }

    /// Publishes to the routed sinks concurrently; 202 only when all of them acknowledged.
    async fn publish(
        &self,
        notification: &Notification<Verified>,
        messages: Vec<(&Arc<dyn Sink>, Message)>,
        deadline: Instant,
        routes_version: Option<&str>,
    ) -> Result<Outcome, Error> {
        let results = join_all(messages.into_iter().map(|(sink, message)| async move {
            let started = Instant::now();
            let publish = sink.publish(std::slice::from_ref(&message));
            let result = match tokio::time::timeout_at(deadline.into(), publish).await {
                Ok(results) => results.into_iter().next().unwrap_or_else(|| {
                    Err(SinkError::Permanent(
                        "the sink answered for no message".into(),
                    ))
                }),
                Err(_) => Err(SinkError::Retryable(
                    "no acknowledgement before the deadline".into(),
                )),
            };
            self.metrics.publish(
                sink.name(),
                result.as_ref(),
                started.elapsed().as_secs_f64() * 1000.0,
            );
            (sink.name(), result)
        }))
        .await;

        let mut deliveries = Vec::with_capacity(results.len());
        let mut failure: Option<Error> = None;
        for (sink, result) in results {
            match result {
                Ok(receipt) => {
                    deliveries.push(json!({"sink": sink, "message_id": receipt.message_id}))
                }
                Err(e) => {
                    let retryable = e.is_retryable();
                    if retryable {
                        tracing::warn!(sink, error = %e, dedup_key = notification.dedup_key(), "Sink failed; the sender will retry.");
                    } else {
                        tracing::error!(sink, error = %e, dedup_key = notification.dedup_key(), "Sink rejected the notification; an operator must act.");
                    }
                    // A permanent failure outranks a retryable one: retrying cannot fix it.
                    let sink = sink.to_owned();
                    failure = match failure {
                        Some(f @ Error::SinkFailed { .. }) => Some(f),
                        _ if !retryable => Some(Error::SinkFailed { sink }),
                        Some(f) => Some(f),
                        None => Some(Error::SinkRetryable { sink }),
                    };
                }
            }
        }
        if let Some(failure) = failure {
            return Err(failure);
        }
        Ok(Outcome::json(
            StatusCode::ACCEPTED,
            &json!({
                "status": "published",
                "dedup_key": notification.dedup_key(),
                "deliveries": deliveries,
                "routes_version": routes_version,
            }),
        ))
    }

    fn log(&self, parts: &Parts, outcome: &Outcome, fields: &LogFields, started: Instant) {
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        let status = outcome.status.as_u16();
        let code = outcome.code.unwrap_or(match status {
            _ if fields.filtered => "filtered",
            200 => "ok",
            _ => "published",
        });
        self.metrics.answer(status, code, latency_ms);
        macro_rules! line {
            ($level:ident, $msg:literal) => {
                tracing::$level!(
                    method = %parts.method,
                    path = parts.uri.path(),
                    status,
                    code = outcome.code,
                    subscription_id = fields.subscription_id.as_deref(),
                    bundle_uuid = fields.bundle_uuid.as_deref(),
                    bundle_version = fields.bundle_version.as_deref(),
                    event_type = fields.event_type.as_deref(),
                    routes_version = fields.routes_version.as_deref(),
                    split = fields.split.as_deref(),
                    latency_ms,
                    $msg
                )
            };
        }
        match status {
            _ if fields.filtered => line!(info, "Notification filtered out: no route matched."),
            200..=299 => line!(info, "Request answered."),
            502 => line!(error, "Notification not delivered."),
            _ => line!(warn, "Request refused."),
        }
    }
}
