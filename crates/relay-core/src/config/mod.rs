//! The relay's configuration: `RELAY_*` variables and the `RELAY_CONFIG` file, read into the
//! same types and validated once at start.
//!
//! Every problem is reported at once, each naming its variable (and, in the file, its line and
//! column). The relay fails closed: no key and no explicit `RELAY_ALLOW_UNSIGNED=true`, or no
//! sink, and it does not start. This module reads [`sink`](crate::sink) and
//! [`route`](crate::route); neither reads it.

mod file;
mod memory;
mod remote;
mod report;
mod settings;
mod sinks;
mod values;

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

pub use file::{FileConfig, FileError};
pub use memory::{ArchiveConfig, ArchiveKeySource, LedgerConfig, archive_from_vars, archive_key};
pub use remote::is_secret_arn;
pub(crate) use remote::keep as keep_fetched_file;
pub use settings::{SETTINGS, Setting, Settings, markdown_table};
pub use values::{HmacKeys, LogFormat, MetricsFormat, Show};

pub use crate::admission::ServerLimits;

use crate::live::{Routes, RoutesUrl};
use crate::route::{RouteSpec, Router};
use crate::sink::SinkConfig;
use crate::verify::KeyRing;

/// Default for `RELAY_PAYLOAD_FIELD`, the DSS default `payload_form_field`.
pub const DEFAULT_PAYLOAD_FIELD: &str = "payload";

/// The relay's validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The HMAC keys by keyId, and the catch-all secret.
    pub keys: KeyRing,
    /// A Secrets Manager secret whose keys join [`keys`](Self::keys) at start.
    pub keys_secret_arn: Option<String>,
    /// Accept requests without `Authorization`.
    pub allow_unsigned: bool,
    /// The `Date` freshness window; `None` when the check is off.
    pub max_clock_skew: Option<Duration>,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// The multipart form field holding the payload.
    pub payload_field: String,
    /// The deadline for every routed sink to acknowledge.
    pub sink_timeout: Duration,
    /// The longest a destination's transform may run over one notification.
    pub transform_timeout: Duration,
    /// How long, at most, an SQS or SNS batch waits for more messages, resolved for the
    /// platform (zero on Lambda).
    pub batch_wait: Duration,
    /// Log output format, resolved for the platform.
    pub log_format: LogFormat,
    /// Metric lines, resolved for the platform.
    pub metrics: MetricsFormat,
    /// The relay's name in its metrics (the `Relay` dimension): the Lambda function's name, the
    /// Cloud Run service's, else `relay`.
    pub metrics_name: String,
    /// relay-gcf's listen address, when set.
    pub listen: Option<SocketAddr>,
    /// relay-gcf's limits on connections and requests in flight.
    pub server: ServerLimits,
    /// The named sinks: `[sinks]`, or the ones the variables describe.
    pub sinks: Vec<SinkConfig>,
    /// The routes over [`sinks`](Self::sinks): `[[routes]]`, or every notification to every sink.
    pub router: Router,
    /// The deployed routes as written: `[[routes]]`, or one route `all` to every sink.
    pub routes: Vec<RouteSpec>,
    /// The stored routes document, when there is one.
    pub routes_url: Option<RoutesUrl>,
    /// How often, at most, the stored routes are read again.
    pub routes_refresh: Duration,
    /// The largest stored routes document read.
    pub routes_max_bytes: usize,
    /// The longest a split may last, from its registration to its expiry.
    pub split_max_ttl: Duration,
    /// The sources of `[sources]`; empty: the DSS alone, on every path, with
    /// [`keys`](Self::keys).
    pub sources: Vec<crate::source::SourceConfig>,
    /// The delivery ledger, when there is one.
    pub ledger: Option<LedgerConfig>,
    /// The archive and the key its records are sealed with, when there is one.
    pub archive: Option<ArchiveConfig>,
    /// Open the destinations' connections at start.
    pub warm_connections: bool,
    /// `PUBSUB_EMULATOR_HOST`: Pub/Sub sinks publish to the emulator there.
    pub pubsub_emulator: Option<String>,
    /// The configuration file, when one is used.
    pub config_file: Option<String>,
    /// The settings in effect, for [`effective`](Self::effective).
    settings: Settings,
}

/// The settings of the variables over the `RELAY_CONFIG` file, refusing only problems with the
/// file and with the variables named `prefix`*: what a tool reading one part needs.
fn settings_of(
    var: &impl Fn(&str) -> Option<String>,
    prefix: &str,
) -> Result<Settings, ConfigErrors> {
    let (vars, errors) = Settings::from_vars(var);
    let mut errors: Vec<ConfigError> = errors
        .into_iter()
        .filter(|(var, _)| *var == "RELAY_CONFIG" || var.starts_with(prefix))
        .map(|(var, message)| ConfigError { var, message })
        .collect();
    let path = vars.config.clone().filter(|p| !p.is_empty());
    let file = match path.as_deref().map(FileConfig::load).transpose() {
        Ok(file) => file.unwrap_or_default(),
        Err(e) => {
            errors.push(ConfigError {
                var: "RELAY_CONFIG",
                message: e.to_string(),
            });
            FileConfig::default()
        }
    };
    if !errors.is_empty() {
        return Err(ConfigErrors(errors));
    }
    Ok(vars.or(file.relay).or_defaults())
}

/// One invalid setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}: {message}")]
pub struct ConfigError {
    /// The variable at fault (`RELAY_CONFIG` for anything in the file).
    pub var: &'static str,
    /// What is wrong with it.
    pub message: String,
}

/// Every problem found in one configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid configuration:")?;
        for e in &self.0 {
            write!(f, "\n  - {e}")?;
        }
        Ok(())
    }
}

impl Config {
    /// Reads the process environment.
    pub(crate) fn from_env() -> Result<Self, ConfigErrors> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads variables through `var`, so tests and tools need not touch the process environment.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigErrors> {
        Self::read(var, true)
    }

    /// The configuration `relay replay` runs with: the relay's, read as [`from_vars`] reads it,
    /// but without its keys. A replay verifies nothing, so no HMAC key, source secret or secret
    /// ARN is needed, read or fetched; its relay never answers a request.
    ///
    /// [`from_vars`]: Self::from_vars
    pub fn for_replay(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigErrors> {
        Self::read(var, false)
    }

    /// `read_keys`: a relay's configuration (true), or a replay's (false).
    fn read(var: impl Fn(&str) -> Option<String>, read_keys: bool) -> Result<Self, ConfigErrors> {
        let (vars, file, config_file, mut errors) = load(&var)?;
        let mut fail =
            |var: &'static str, message: String| errors.push(ConfigError { var, message });
        let in_file =
            |message: String| format!("{}: {message}", config_file.as_deref().unwrap_or_default());
        // Variables override the file's [relay] settings.
        let mut settings = vars.clone().or(file.relay).or_defaults();
        let (metrics, metrics_name, batch_wait, log_format) =
            platform_defaults(&mut settings, &var);
        let (keys, keys_secret_arn, sources) = keys_and_sources(
            &settings,
            &file.sources,
            &var,
            read_keys,
            &mut fail,
            &in_file,
        );
        let allow_unsigned = settings.allow_unsigned.is_some_and(|f| f.0);

        let (sinks, routes, router) = sinks::read(
            (&file.sinks, &file.routes),
            &vars,
            &var,
            &mut fail,
            &in_file,
        );

        check_limits(&settings, &sinks, &mut fail);
        let archive = ArchiveConfig::from_settings(&settings).unwrap_or_else(|(var, message)| {
            fail(var, message);
            None
        });
        if !errors.is_empty() {
            return Err(ConfigErrors(errors));
        }
        let skew = settings.max_clock_skew_secs.map_or(0, |s| s.0);
        let pubsub_emulator = var("PUBSUB_EMULATOR_HOST").filter(|h| !h.is_empty());
        Ok(Self {
            keys,
            keys_secret_arn,
            allow_unsigned,
            max_clock_skew: (skew > 0).then(|| Duration::from_secs(skew)),
            max_body_bytes: settings.max_body_bytes.map_or(usize::MAX, |b| b.get()),
            payload_field: settings
                .payload_field
                .as_ref()
                .map_or(DEFAULT_PAYLOAD_FIELD.into(), |f| f.to_string()),
            sink_timeout: Duration::from_millis(settings.sink_timeout_ms.map_or(0, |m| m.0)),
            transform_timeout: Duration::from_millis(
                settings.transform_timeout_ms.map_or(100, |m| m.0),
            ),
            batch_wait: Duration::from_millis(batch_wait),
            log_format,
            metrics,
            metrics_name,
            listen: settings.listen.map(|l| l.0),
            server: ServerLimits::of(&settings),
            sinks,
            router: router.expect("no routing error was reported"),
            routes,
            routes_url: settings.routes_url.clone(),
            routes_refresh: Duration::from_secs(settings.routes_refresh_secs.map_or(10, |s| s.0)),
            routes_max_bytes: settings
                .routes_max_bytes
                .map_or(crate::live::store::DEFAULT_MAX_BYTES, |b| b.get()),
            split_max_ttl: settings
                .split_max_ttl_secs
                .map_or(crate::live::DEFAULT_SPLIT_MAX_TTL, |s| {
                    Duration::from_secs(s.0)
                }),
            sources,
            ledger: LedgerConfig::from_settings(&settings),
            archive: archive.map(|a| a.through_emulator(pubsub_emulator.as_deref())),
            warm_connections: settings.warm_connections.is_none_or(|f| f.0),
            pubsub_emulator,
            config_file,
            settings,
        })
    }

    /// The deployed routes, compiled once when the configuration was read: the routing the
    /// relay starts with, and what stored routes are merged into.
    pub fn routes(&self) -> Routes {
        Routes::deployed(
            self.sinks.clone(),
            self.routes.clone(),
            self.router.clone(),
            self.pubsub_emulator.clone(),
        )
        .with_split_max_ttl(self.split_max_ttl)
    }

    /// `RELAY_*` names among `names` that the relay does not know, most likely typos.
    pub fn unknown_vars(names: impl IntoIterator<Item = String>) -> Vec<String> {
        names
            .into_iter()
            .filter(|n| n.starts_with("RELAY_") && !SETTINGS.iter().any(|s| s.var == n))
            .collect()
    }
}

/// The variables read through `var`, the `RELAY_CONFIG` file they name (parsed), its path, and
/// the problems so far; a file that cannot be read or parsed ends the reading.
fn load(
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<(Settings, FileConfig, Option<String>, Vec<ConfigError>), ConfigErrors> {
    let (vars, errors) = Settings::from_vars(&var);
    let mut errors: Vec<ConfigError> = errors
        .into_iter()
        .map(|(var, message)| ConfigError { var, message })
        .collect();
    let config_file = vars.config.clone().filter(|p| !p.is_empty());
    match config_file.as_deref().map(FileConfig::load).transpose() {
        Ok(file) => Ok((vars, file.unwrap_or_default(), config_file, errors)),
        Err(e) => {
            errors.push(ConfigError {
                var: "RELAY_CONFIG",
                message: e.to_string(),
            });
            Err(ConfigErrors(errors))
        }
    }
}

/// What depends on the platform the relay runs on (Lambda, Cloud Run, or neither), filled into
/// `settings` where it leaves them unset: the metric lines and their name, the batcher's wait
/// and the log format.
fn platform_defaults(
    settings: &mut Settings,
    var: &dyn Fn(&str) -> Option<String>,
) -> (MetricsFormat, String, u64, LogFormat) {
    let on_lambda = var("AWS_LAMBDA_FUNCTION_NAME").is_some();
    let on_platform = on_lambda || var("K_SERVICE").is_some();
    let metrics_name = var("AWS_LAMBDA_FUNCTION_NAME")
        .or_else(|| var("K_SERVICE"))
        .unwrap_or_else(|| "relay".into());
    let metrics = *settings.metrics.get_or_insert(if on_lambda {
        MetricsFormat::Emf
    } else {
        MetricsFormat::Off
    });
    let batch_wait = settings
        .batch_wait_ms
        .get_or_insert(values::WaitMillis(if on_lambda { 0 } else { 1 }))
        .0;
    let log_format = *settings.log_format.get_or_insert(if on_platform {
        LogFormat::Json
    } else {
        LogFormat::Text
    });
    (metrics, metrics_name, batch_wait, log_format)
}

/// The relay's keys, the secret that holds them, and the sources (`specs`, their secrets read
/// through `var`); with `read_keys` false (a replay) no key is read and none is required.
fn keys_and_sources(
    settings: &Settings,
    specs: &std::collections::BTreeMap<String, crate::source::SourceSpec>,
    var: &dyn Fn(&str) -> Option<String>,
    read_keys: bool,
    fail: &mut impl FnMut(&'static str, String),
    in_file: &impl Fn(String) -> String,
) -> (KeyRing, Option<String>, Vec<crate::source::SourceConfig>) {
    let keys = match read_keys {
        true => KeyRing::new(
            settings.hmac_keys.clone().unwrap_or_default().0,
            settings.hmac_secret.clone(),
        ),
        false => KeyRing::default(),
    };
    let keys_secret_arn = settings
        .hmac_keys_secret_arn
        .as_ref()
        .filter(|_| read_keys)
        .map(|a| a.to_string());
    let allow_unsigned = settings.allow_unsigned.is_some_and(|f| f.0);
    let sources = sources(specs, var, read_keys, fail, in_file);
    // The relay's keys are needed by the DSS alone, or by a DSS source without its own.
    let relay_keys_used = specs.is_empty()
        || sources.iter().any(|s| {
            s.scheme == crate::source::SchemeName::Dss && s.keys.is_none() && s.secret_arn.is_none()
        });
    if read_keys
        && relay_keys_used
        && keys.is_empty()
        && keys_secret_arn.is_none()
        && !allow_unsigned
    {
        fail(
            "RELAY_HMAC_KEYS",
            "no HMAC key is configured: set RELAY_HMAC_KEYS, RELAY_HMAC_SECRET or RELAY_HMAC_KEYS_SECRET_ARN (or, to accept unsigned notifications, RELAY_ALLOW_UNSIGNED=true)".into(),
        );
    }
    (keys, keys_secret_arn, sources)
}

/// The limits that depend on one another or on the sinks: refresh and split lifetimes of at
/// least a second, a ledger retention longer than an attempt's lease, no sink named like the
/// archive.
fn check_limits(
    settings: &Settings,
    sinks: &[SinkConfig],
    fail: &mut impl FnMut(&'static str, String),
) {
    if settings.routes_refresh_secs.is_some_and(|s| s.0 == 0) {
        fail(
            "RELAY_ROUTES_REFRESH_SECS",
            "must be at least 1: every instance reads the stored routes this often".into(),
        );
    }
    if settings.split_max_ttl_secs.is_some_and(|s| s.0 == 0) {
        fail(
            "RELAY_SPLIT_MAX_TTL_SECS",
            "must be at least 1: a split lasts longer than zero".into(),
        );
    }
    // An attempt's lease lasts at most the sink timeout plus the margin: an entry that
    // expired sooner would let a second attempt publish while the first still does.
    let lease_ms = settings.sink_timeout_ms.map_or(5_000, |m| m.0)
        + crate::ledger::LEASE_MARGIN_MS.unsigned_abs();
    if settings
        .ledger_retention_secs
        .is_some_and(|s| s.0.saturating_mul(1000) <= lease_ms)
    {
        fail(
            "RELAY_LEDGER_RETENTION_SECS",
            format!(
                "must be longer than an attempt's lease, the sink timeout (RELAY_SINK_TIMEOUT_MS) plus 2 s: over {} s; the DSS retries for up to 7 days, so keep 691200 (8 days) or more",
                lease_ms / 1000
            ),
        );
    }
    if settings.archive_url.is_some() && sinks.iter().any(|s| s.name == crate::archive::SINK_NAME) {
        fail(
            "RELAY_ARCHIVE_URL",
            format!(
                "a sink is named {:?}, the archive's name among the destinations; rename the sink",
                crate::archive::SINK_NAME
            ),
        );
    }
}

impl ServerLimits {
    /// The limits `settings` (with their defaults) give.
    fn of(settings: &Settings) -> Self {
        Self {
            header_timeout: Duration::from_millis(settings.header_timeout_ms.map_or(0, |m| m.0)),
            body_timeout: Duration::from_millis(settings.body_timeout_ms.map_or(0, |m| m.0)),
            body_min_bytes_per_sec: settings.body_min_bytes_per_sec.map_or(1, |c| c.0),
            max_concurrent_requests: settings.max_concurrent_requests.map_or(1, |c| c.0),
            max_buffered_bytes: settings.max_buffered_bytes.map_or(0, |b| b.get()),
        }
    }
}

/// The `[sources.<name>]` tables, each checked (its secret read through `var`), and their
/// paths: each path named once, at most one source without paths.
fn sources(
    specs: &std::collections::BTreeMap<String, crate::source::SourceSpec>,
    var: &dyn Fn(&str) -> Option<String>,
    read_keys: bool,
    fail: &mut impl FnMut(&'static str, String),
    in_file: &impl Fn(String) -> String,
) -> Vec<crate::source::SourceConfig> {
    let mut sources = Vec::new();
    for (name, spec) in specs {
        match crate::source::SourceConfig::new(name, spec, var, read_keys) {
            Ok(source) => sources.push(source),
            Err(problems) => problems
                .into_iter()
                .for_each(|p| fail("RELAY_CONFIG", in_file(p))),
        }
    }
    let mut seen = std::collections::BTreeMap::new();
    for source in specs
        .iter()
        .flat_map(|(name, spec)| spec.paths.iter().map(move |p| (p, name)))
    {
        if let Some(first) = seen.insert(source.0, source.1) {
            fail(
                "RELAY_CONFIG",
                in_file(format!(
                    "the path {:?} is named by the sources {first:?} and {:?}; a path belongs to one source",
                    source.0, source.1
                )),
            );
        }
    }
    let catch_all: Vec<&String> = specs
        .iter()
        .filter(|(_, spec)| spec.paths.is_empty())
        .map(|(name, _)| name)
        .collect();
    if catch_all.len() > 1 {
        fail(
            "RELAY_CONFIG",
            in_file(format!(
                "the sources {catch_all:?} have no paths; at most one source may take every path the others do not name"
            )),
        );
    }
    sources
}
