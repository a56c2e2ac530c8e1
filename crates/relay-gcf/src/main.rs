//! Run with `RELAY_HMAC_SECRET=… RELAY_FILE_SINK=- PORT=8080 cargo run -p relay-gcf`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use relay_core::{Config, Relay, telemetry};
use tokio::sync::Notify;

/// Cloud Run sends SIGKILL 10 s after SIGTERM; in-flight requests must finish before that.
const DRAIN: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> ExitCode {
    telemetry::init(telemetry::format_from_env());
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            tracing::error!("{message}");
            eprintln!("relay-gcf: {message}");
            ExitCode::from(2)
        }
    }
}

async fn run() -> Result<(), String> {
    let addr = listen_addr()?;
    let config = Config::from_env().map_err(|e| e.to_string())?;
    for name in Config::unknown_vars(std::env::vars().map(|(name, _)| name)) {
        tracing::warn!(variable = %name, "Unknown RELAY_ variable ignored.");
    }
    // Sinks are ready before the port opens, so the first request never waits for them.
    let relay = Arc::new(
        Relay::from_config(config)
            .await
            .map_err(|e| e.to_string())?,
    );
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    tracing::info!(%addr, "Listening.");

    let stopping = Arc::new(Notify::new());
    let signal = {
        let stopping = Arc::clone(&stopping);
        async move {
            shutdown_signal().await;
            tracing::info!(
                drain_secs = DRAIN.as_secs(),
                "Shutting down; draining in-flight requests."
            );
            stopping.notify_one();
        }
    };
    let server = axum::serve(listener, relay_gcf::app(relay)).with_graceful_shutdown(signal);
    tokio::select! {
        served = server => served.map_err(|e| format!("server error: {e}")),
        () = async { stopping.notified().await; tokio::time::sleep(DRAIN).await } => {
            tracing::warn!("In-flight requests did not finish within the drain period.");
            Ok(())
        }
    }
}

/// `RELAY_LISTEN` (a full address), else `0.0.0.0:$PORT` with `PORT` defaulting to 8080.
fn listen_addr() -> Result<SocketAddr, String> {
    if let Ok(listen) = std::env::var("RELAY_LISTEN") {
        return listen.parse().map_err(|_| {
            format!("RELAY_LISTEN: expected an address such as 127.0.0.1:8080, got {listen:?}")
        });
    }
    let port = match std::env::var("PORT") {
        Ok(p) => p
            .parse::<u16>()
            .map_err(|_| format!("PORT: expected a port number, got {p:?}"))?,
        Err(_) => 8080,
    };
    Ok(SocketAddr::from(([0, 0, 0, 0], port)))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! { () = ctrl_c => {}, () = term => {} }
}
