//! How a relay starts: the keys read from their stores, the ledger, the archive and its key
//! opened, every configured sink built once, and the stored routes read, before the first
//! request.

use std::sync::Arc;

use super::ledger::Recorder;
use super::{Relay, live};
use crate::archive::{Archive, ArchiveKey, RecordStream};
use crate::cloud::Cloud;
use crate::config::{ArchiveConfig, Config, ConfigErrors};
use crate::live::StoreError;
use crate::sink::BuildError;
use crate::verify::SystemClock;

/// Why the relay could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is refused: every problem, each naming its variable.
    #[error(transparent)]
    Config(#[from] ConfigErrors),
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
    /// The archive's key could not be read from `RELAY_ARCHIVE_KEY_SECRET_ARN`, or is too short.
    #[error("RELAY_ARCHIVE_KEY_SECRET_ARN: {0}")]
    ArchiveKey(String),
    /// A source's keys could not be read from its `secret_arn`.
    #[error("RELAY_CONFIG: source {name:?}: {error}")]
    SourceKeys {
        /// The source's name.
        name: String,
        /// What went wrong.
        error: String,
    },
    /// The stored routes' store cannot be used.
    #[error("RELAY_ROUTES_URL: {0}")]
    Routes(#[source] StoreError),
    /// The delivery ledger cannot be opened.
    #[error("RELAY_LEDGER_URL: {0}")]
    Ledger(#[source] crate::ledger::LedgerError),
    /// The archive cannot be opened.
    #[error("RELAY_ARCHIVE_URL: {0}")]
    Archive(#[source] crate::archive::ArchiveError),
}

/// The archive's key: as configured, or read from Secrets Manager.
#[cfg_attr(not(feature = "secrets"), allow(unused_variables))]
async fn archive_key(
    source: &crate::config::ArchiveKeySource,
    cloud: &Cloud,
) -> Result<ArchiveKey, StartError> {
    let arn = match source {
        crate::config::ArchiveKeySource::Given(key) => return Ok(key.clone()),
        crate::config::ArchiveKeySource::SecretArn(arn) => arn,
    };
    #[cfg(feature = "secrets")]
    {
        let fail = |e: String| StartError::ArchiveKey(format!("{arn}: {e}"));
        let text = crate::secrets::load_text(cloud.aws().await, arn).await;
        let text = text.map_err(fail)?;
        crate::config::archive_key(&crate::verify::Secret::new(text)).map_err(fail)
    }
    #[cfg(not(feature = "secrets"))]
    {
        Err(StartError::ArchiveKey(format!(
            "{arn} is configured, but this build leaves out the cargo feature \"secrets\""
        )))
    }
}

/// The archive `settings` name, and the key its records are sealed with (read from Secrets
/// Manager where configured so): what a relay writes to, and what `relay replay` and `relay
/// trace --refused` read, their clients built from `cloud`.
pub async fn open_archive(
    settings: &ArchiveConfig,
    cloud: &Cloud,
) -> Result<(Arc<dyn Archive>, ArchiveKey), StartError> {
    let archive =
        (crate::archive::open(&settings.url, cloud).await).map_err(StartError::Archive)?;
    let key = archive_key(&settings.key, cloud).await?;
    Ok((archive, key))
}

/// The archive a relay writes: its store and key ([`open_archive`]), and the stream its records
/// go through (`RELAY_ARCHIVE_STREAM`), if any.
async fn open_archive_writer(
    settings: &ArchiveConfig,
    cloud: &Cloud,
) -> Result<(Arc<dyn Archive>, ArchiveKey, Option<Arc<dyn RecordStream>>), StartError> {
    let (archive, key) = open_archive(settings, cloud).await?;
    let stream = match &settings.stream {
        Some(url) => {
            Some((crate::archive::open_stream(url, cloud).await).map_err(StartError::Archive)?)
        }
        None => None,
    };
    let through = settings.stream.as_ref().map(|s| s.to_string());
    tracing::info!(archive = %archive.url(), through, "Archive open: every verified notification is written there.");
    Ok((archive, key, stream))
}

/// Whether starting reaches AWS: a secret to read, a destination, the ledger or the archive
/// there.
#[cfg(feature = "aws")]
fn needs_aws(config: &Config) -> bool {
    config.keys_secret_arn.is_some()
        || config.sources.iter().any(|s| s.secret_arn.is_some())
        || config.sinks.iter().any(|s| s.target.uses_aws())
        || config
            .ledger
            .as_ref()
            .is_some_and(|l| matches!(l.url, crate::ledger::LedgerUrl::DynamoDb { .. }))
        || config.archive.as_ref().is_some_and(|a| {
            matches!(a.url, crate::archive::ArchiveUrl::S3 { .. })
                || a.stream.is_some()
                || matches!(a.key, crate::config::ArchiveKeySource::SecretArn(_))
        })
}

/// The relay's HMAC keys and each source's keys, read from Secrets Manager where their ARNs are
/// configured.
#[cfg_attr(not(feature = "secrets"), allow(unused_variables))]
async fn read_secrets(config: &mut Config, cloud: &Cloud) -> Result<(), StartError> {
    if let Some(arn) = config.keys_secret_arn.clone() {
        #[cfg(feature = "secrets")]
        {
            let (named, any) = crate::secrets::load_keys(cloud.aws().await, &arn)
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
    #[cfg(feature = "secrets")]
    for source in config.sources.iter_mut() {
        let Some(arn) = source.secret_arn.clone() else {
            continue;
        };
        let fail = |e: String| StartError::SourceKeys {
            name: source.name.clone(),
            error: format!("{arn}: {e}"),
        };
        let text = crate::secrets::load_text(cloud.aws().await, &arn).await;
        let text = text.map_err(fail)?;
        source.keys = Some(crate::source::read_keys(source.scheme, &text).map_err(fail)?);
        tracing::info!(source = %source.name, "A source's keys read from Secrets Manager.");
    }
    #[cfg(not(feature = "secrets"))]
    if let Some(source) = config.sources.iter().find(|s| s.secret_arn.is_some()) {
        return Err(StartError::SourceKeys {
            name: source.name.clone(),
            error: "its secret_arn is set, but this build leaves out the cargo feature \"secrets\""
                .into(),
        });
    }
    Ok(())
}

impl Relay {
    /// Builds every sink the configuration names (opening files, building each SDK client
    /// once) and reads the keys from Secrets Manager when configured.
    pub async fn from_config(config: Config) -> Result<Self, StartError> {
        let cloud = Cloud::new(config.sink_timeout);
        // Loaded now when anything is on AWS, so that no request waits for it.
        #[cfg(feature = "aws")]
        if needs_aws(&config) {
            cloud.aws().await;
        }
        let mut config = config;
        read_secrets(&mut config, &cloud).await?;
        let ledger = match &config.ledger {
            Some(settings) => Some(Recorder {
                store: (crate::ledger::open(&settings.url, &cloud).await)
                    .map_err(StartError::Ledger)?,
                config: settings.clone(),
            }),
            None => None,
        };
        let archive = match &config.archive {
            Some(settings) => Some(open_archive_writer(settings, &cloud).await?),
            None => None,
        };
        // One way to build a sink: the deployed ones now, those stored routes add later.
        let factory = live::sink_factory(cloud.clone(), config.batch_wait);
        let mut sinks = Vec::with_capacity(config.sinks.len());
        for sink in &config.sinks {
            let fail = |error| StartError::Sink {
                sink: sink.name.clone(),
                error,
            };
            sinks.push(factory(sink.clone()).await.map_err(fail)?);
        }
        let (routes_url, routes_max_bytes) = (config.routes_url.clone(), config.routes_max_bytes);
        let mut sinks = sinks.into_iter();
        let mut relay = Self::with_sinks(
            config,
            |_| sinks.next().expect("one per sink"),
            Arc::new(SystemClock),
        );
        if let Some(recorder) = ledger {
            tracing::info!(ledger = %recorder.config.url, key = %recorder.config.key, retention_secs = recorder.config.retention.as_secs(), "Delivery ledger open.");
            relay.ledger = Some(recorder);
        }
        if let Some((archive, key, stream)) = archive {
            relay = relay.with_archive_through(archive, key, stream);
        }
        let Some(url) = routes_url else {
            return Ok(relay);
        };
        let store = crate::live::store::open(&url, routes_max_bytes, &cloud)
            .await
            .map_err(StartError::Routes)?;
        let relay = relay.with_live_routes(store, factory);
        // At start, a store that cannot be read or a refused document leaves the deployed
        // routes in effect; both are logged, and the next refresh tries again.
        relay.refresh().await;
        Ok(relay)
    }
}
