//! Run locally with `cargo lambda watch -p relay-lambda`, then
//! `cargo lambda invoke relay-lambda --data-file crates/relay-lambda/events/dss-v2-create.json`.

use std::sync::Arc;

use lambda_http::{Error, Request, run, service_fn};
use relay_core::{Config, Relay, telemetry};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init(telemetry::format_from_env());
    // Configuration is validated and every client is built once, during Init.
    let config = Config::from_env().inspect_err(|e| tracing::error!("{e}"))?;
    for name in Config::unknown_vars(std::env::vars().map(|(name, _)| name)) {
        tracing::warn!(variable = %name, "Unknown RELAY_ variable ignored.");
    }
    let relay = Arc::new(
        Relay::from_config(config)
            .await
            .inspect_err(|e| tracing::error!("{e}"))?,
    );
    run(service_fn(move |request: Request| {
        let relay = Arc::clone(&relay);
        async move { Ok::<_, Error>(relay_lambda::handle(&relay, request).await) }
    }))
    .await
}
