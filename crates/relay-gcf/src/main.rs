//! Run with `RELAY_HMAC_SECRET=… RELAY_FILE_SINK=- PORT=8080 cargo run -p relay-gcf`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

/// Cloud Run sends SIGKILL 10 s after SIGTERM; in-flight requests must finish before that.
const DRAIN: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("relay-gcf: {message}");
            ExitCode::from(2)
        }
    }
}

async fn run() -> Result<(), String> {
    // Sinks are ready before the port opens, so the first request never waits for them.
    let relay = Arc::new(relay_core::bootstrap::start().await?);
    let addr = listen_addr(relay.config().listen)?;
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

/// The configured `listen` address, else `0.0.0.0:$PORT` with `PORT` defaulting to 8080.
fn listen_addr(listen: Option<SocketAddr>) -> Result<SocketAddr, String> {
    if let Some(addr) = listen {
        return Ok(addr);
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
