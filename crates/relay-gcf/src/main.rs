//! Run with `RELAY_HMAC_SECRET=… RELAY_FILE_SINK=- PORT=8080 cargo run -p relay-gcf`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

/// Requests in flight allocate and free many small buffers; with glibc's allocator that was about
/// a sixth of the relay's CPU, and mimalloc cut the CPU per notification by about a quarter
/// (`make bench-load`). The image sets `MIMALLOC_ARENA_EAGER_COMMIT=0`, which keeps the resident
/// memory where glibc's was.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    let relay = Arc::new(
        relay_core::bootstrap::start()
            .await
            .map_err(|e| e.to_string())?,
    );
    // Stored routes (RELAY_ROUTES_URL), read again every RELAY_ROUTES_REFRESH_SECS.
    tokio::spawn(Arc::clone(&relay).keep_routes_fresh());
    // Idle and stalled connections hold a descriptor each until their timeout.
    if let Err(e) = rlimit::increase_nofile_limit(u64::MAX) {
        tracing::warn!(error = %e, "Cannot raise the open-file limit.");
    }
    let addr = listen_addr(relay.config().listen)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    tracing::info!(%addr, "Listening.");
    relay_gcf::serve(listener, relay, shutdown_signal()).await;
    // The metric lines of the last requests, before SIGKILL.
    relay_core::metrics::flush_stdout(std::time::Duration::from_secs(1)).await;
    Ok(())
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
