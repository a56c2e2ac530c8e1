//! One start for both binaries: the configuration from the environment, logging set up from
//! that final configuration (so `log_format` in the file takes effect), a warning for every
//! unknown `RELAY_*` variable, and every client built once and its connection opened, before the
//! first request.

use crate::config::Config;
use crate::relay::{Relay, StartError};
use crate::telemetry;

/// Reads the configuration, starts logging and builds the relay. The error is what the binary
/// prints before it exits; it has been logged already.
pub async fn start() -> Result<Relay, StartError> {
    let config = match Config::from_env() {
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
    let relay = Relay::from_config(config).await.inspect_err(|e| {
        tracing::error!(error = %e, "The relay cannot start.");
    })?;
    relay.warm().await;
    Ok(relay)
}
