//! The settings of the relay's memory: the delivery ledger and the archive.

use std::time::Duration;

use super::{ConfigErrors, Settings, settings_of};
use crate::archive::{ArchiveKey, ArchiveUrl, MIN_KEY_BYTES, StreamUrl};
use crate::verify::Secret;

/// The delivery ledger's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerConfig {
    /// Where it lives.
    pub url: crate::ledger::LedgerUrl,
    /// How long an entry is kept after its last attempt.
    pub retention: Duration,
    /// What counts as one notification.
    pub key: crate::ledger::LedgerKey,
    /// Whether notifications no route takes are recorded too.
    pub record_filtered: bool,
}

impl LedgerConfig {
    /// The ledger the variables (and the `RELAY_CONFIG` file they name) configure, if any,
    /// without the rest of the relay's configuration: for tools that only read the ledger.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, ConfigErrors> {
        let settings = settings_of(&var, "RELAY_LEDGER_")?;
        Ok(Self::from_settings(&settings))
    }

    pub(super) fn from_settings(settings: &Settings) -> Option<Self> {
        let url = settings.ledger_url.clone()?;
        Some(Self {
            url,
            retention: Duration::from_secs(
                settings
                    .ledger_retention_secs
                    .map_or(crate::ledger::DEFAULT_RETENTION_SECS, |s| s.0),
            ),
            key: settings.ledger_key.unwrap_or_default(),
            record_filtered: settings.ledger_record_filtered.is_none_or(|f| f.0),
        })
    }
}

/// The archive's settings.
#[derive(Debug, Clone)]
pub struct ArchiveConfig {
    /// Where it lives.
    pub url: ArchiveUrl,
    /// Where the key its records are sealed with comes from.
    pub key: ArchiveKeySource,
    /// How long it keeps a record.
    pub retention: Duration,
    /// The engine its records are written through, if any (`RELAY_ARCHIVE_STREAM`).
    pub stream: Option<StreamUrl>,
}

/// Where the archive's key comes from.
#[derive(Debug, Clone)]
pub enum ArchiveKeySource {
    /// `RELAY_ARCHIVE_KEY`.
    Given(ArchiveKey),
    /// `RELAY_ARCHIVE_KEY_SECRET_ARN`: read from Secrets Manager at start.
    SecretArn(String),
}

/// What `RELAY_ARCHIVE_KEY` must be.
const KEY_RULE: &str = "the archive's records are sealed with a key of at least 16 bytes (RELAY_ARCHIVE_KEY, or RELAY_ARCHIVE_KEY_SECRET_ARN naming a secret that holds it; `openssl rand -hex 32` makes one); keep it as long as the archive";

/// The key of `secret`, refusing one that is too short.
pub fn archive_key(secret: &Secret) -> Result<ArchiveKey, String> {
    ArchiveKey::new(secret.expose()).ok_or_else(|| {
        format!(
            "is {} bytes, shorter than {MIN_KEY_BYTES}: {KEY_RULE}",
            secret.expose().len()
        )
    })
}

impl ArchiveConfig {
    /// The archive the settings configure, if any; the variable and the problem when its key
    /// is missing or too short.
    pub(super) fn from_settings(
        settings: &Settings,
    ) -> Result<Option<Self>, (&'static str, String)> {
        let Some(url) = settings.archive_url.clone() else {
            return match &settings.archive_stream {
                Some(stream) => Err((
                    "RELAY_ARCHIVE_STREAM",
                    format!("is {stream}, but RELAY_ARCHIVE_URL, where it delivers, is not set"),
                )),
                None => Ok(None),
            };
        };
        let key = match (&settings.archive_key, &settings.archive_key_secret_arn) {
            (Some(secret), None) => {
                ArchiveKeySource::Given(archive_key(secret).map_err(|e| ("RELAY_ARCHIVE_KEY", e))?)
            }
            (None, Some(arn)) => ArchiveKeySource::SecretArn(arn.to_string()),
            (Some(_), Some(_)) => {
                return Err((
                    "RELAY_ARCHIVE_KEY",
                    "set RELAY_ARCHIVE_KEY or RELAY_ARCHIVE_KEY_SECRET_ARN, not both".into(),
                ));
            }
            (None, None) => {
                return Err(("RELAY_ARCHIVE_KEY", format!("is not set: {KEY_RULE}")));
            }
        };
        let stream = settings.archive_stream.clone();
        if let Some(refused) = stream.as_ref().and_then(|s| s.refuses(&url)) {
            return Err(("RELAY_ARCHIVE_STREAM", refused));
        }
        let days = settings.archive_retention_days.map_or(30, |d| d.0);
        let retention = Duration::from_secs(
            u64::try_from(days)
                .unwrap_or(u64::MAX)
                .saturating_mul(86_400),
        );
        Ok(Some(Self {
            url,
            key,
            retention,
            stream,
        }))
    }
}

impl ArchiveConfig {
    /// This archive with its Pub/Sub stream, if it has one, publishing to the emulator at
    /// `host` (`PUBSUB_EMULATOR_HOST`), as Pub/Sub sinks do.
    pub(super) fn through_emulator(mut self, host: Option<&str>) -> Self {
        if let Some(StreamUrl::PubSub { emulator_host, .. }) = &mut self.stream {
            *emulator_host = host.map(str::to_owned);
        }
        self
    }
}

/// The archive the variables (and the `RELAY_CONFIG` file they name) configure, if any,
/// without the rest of the relay's configuration: for tools that only read the archive.
pub fn archive_from_vars(
    var: impl Fn(&str) -> Option<String>,
) -> Result<Option<ArchiveUrl>, ConfigErrors> {
    Ok(settings_of(&var, "RELAY_ARCHIVE_")?.archive_url)
}
