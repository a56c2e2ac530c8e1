//! Run locally with `cargo lambda watch -p relay-lambda`, then
//! `cargo lambda invoke relay-lambda --data-file crates/relay-lambda/events/dss-v2-create.json`.

use std::sync::Arc;

use lambda_http::{Error, Request, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    // Configuration is validated and every client is built once, during Init.
    let relay = Arc::new(relay_core::bootstrap::start_per_invocation().await?);
    run(service_fn(move |request: Request| {
        let relay = Arc::clone(&relay);
        async move { Ok::<_, Error>(relay_lambda::handle(&relay, request).await) }
    }))
    .await
}
