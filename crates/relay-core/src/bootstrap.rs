//! One start for both binaries: the configuration from the environment (its file read from
//! Secrets Manager first when `RELAY_CONFIG` names a secret), logging set up from
//! that final configuration (so `log_format` in the file takes effect), a warning for every
//! unknown `RELAY_*` variable, and every client built once and its connection opened, before the
//! first request.

use crate::config::{Config, ConfigError, ConfigErrors, is_secret_arn};
use crate::relay::{Relay, StartError};
use crate::telemetry;

/// Reads the configuration, starts logging and builds the relay. The error is what the binary
/// prints before it exits; it has been logged already.
pub async fn start() -> Result<Relay, StartError> {
    start_as(|relay| relay).await
}

/// [`start`], for a platform that runs one request at a time and may freeze the process once it
/// has answered (Lambda): each request is one [`Relay::invoke`], which writes the invocation's
/// metric lines itself.
pub async fn start_per_invocation() -> Result<Relay, StartError> {
    let relay = start_as(Relay::per_invocation).await?;
    relay.write_held_metrics();
    Ok(relay)
}

/// Starts the relay, `shaped` before its connections open.
async fn start_as(shaped: impl FnOnce(Relay) -> Relay) -> Result<Relay, StartError> {
    let file = std::env::var("RELAY_CONFIG").ok();
    let config = match fetch_config_file(file.as_deref())
        .await
        .and_then(|()| Config::from_env())
    {
        Ok(config) => config,
        Err(errors) => {
            // No configuration to take the format from: the platform decides.
            telemetry::init(telemetry::format_from_env());
            tracing::error!("{errors}");
            return Err(errors.into());
        }
    };
    telemetry::init(config.log_format);
    for name in Config::unknown_vars(std::env::vars().map(|(name, _)| name)) {
        tracing::warn!(variable = %name, "Unknown RELAY_ variable ignored.");
    }
    let relay = shaped(Relay::from_config(config).await.inspect_err(|e| {
        tracing::error!(error = %e, "The relay cannot start.");
    })?);
    relay.warm().await;
    Ok(relay)
}

/// Reads the configuration document from its secret when `value` (what `RELAY_CONFIG` holds) is
/// a Secrets Manager ARN, once; a path, or nothing, needs nothing read. A secret that cannot be
/// read is refused as an unreadable file is, and the relay does not start.
pub async fn fetch_config_file(value: Option<&str>) -> Result<(), ConfigErrors> {
    let Some(arn) = value.filter(|v| is_secret_arn(v)) else {
        return Ok(());
    };
    let document = read_secret(arn).await.map_err(|message| {
        ConfigErrors(vec![ConfigError {
            var: "RELAY_CONFIG",
            message: format!("{arn}: {message}"),
        }])
    })?;
    crate::config::keep_fetched_file(arn, document);
    Ok(())
}

#[cfg(feature = "secrets")]
async fn read_secret(arn: &str) -> Result<String, String> {
    let sdk = crate::cloud::load_aws_config(std::time::Duration::from_secs(10)).await;
    crate::secrets::load_text(&sdk, arn).await
}

#[cfg(not(feature = "secrets"))]
async fn read_secret(_arn: &str) -> Result<String, String> {
    Err("a Secrets Manager secret, and this build reads none (the `secrets` feature)".into())
}
