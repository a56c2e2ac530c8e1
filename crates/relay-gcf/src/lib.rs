//! The relay as an HTTP service with the Cloud Run / Functions Framework contract: every
//! request, head and body stream, goes to [`Relay::handle`], which reads the body within its
//! limits and decides every answer.
//!
//! [`serve`] speaks HTTP/1.1 only, with a header timeout that also bounds idle keep-alive
//! connections, and drains the requests in flight at shutdown.
#![warn(missing_docs)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use relay_core::Relay;
use tokio::net::{TcpListener, TcpStream};

/// Cloud Run sends SIGKILL 10 s after SIGTERM; requests in flight must finish before that.
pub const DRAIN: Duration = Duration::from_secs(10);

/// After the listener closes, how long a connection already accepted may take to send its
/// request before the drain treats it as idle and closes it. A request sent later than this
/// after SIGTERM is a new request, and Cloud Run stops routing new requests before SIGTERM.
const SETTLE: Duration = Duration::from_secs(1);

/// The whole HTTP surface. Tests drive it with `tower::ServiceExt::oneshot`.
pub fn app(relay: Arc<Relay>) -> Router {
    Router::new().fallback(deliver).with_state(relay)
}

/// Serves `app(relay)` on `listener` until `shutdown` completes, then stops accepting and gives
/// the requests in flight up to [`DRAIN`] to finish.
pub async fn serve(listener: TcpListener, relay: Arc<Relay>, shutdown: impl Future<Output = ()>) {
    let limits = relay.config().server;
    let app = app(relay);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let graceful = GracefulShutdown::new();
    let serve_one = |stream| {
        let service = TowerToHyperService::new(app.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            // Timeouts and clients that go away end connections; nothing to report.
            let _ = connection.await;
        });
    };
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => serve_one(stream),
                Err(e) => {
                    // Out of file descriptors, usually: let connections close before retrying.
                    tracing::warn!(error = %e, "Cannot accept a connection.");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            () = &mut shutdown => break,
        }
    }
    // Connections the kernel already accepted are served rather than reset; then new ones are
    // refused, and the connections just accepted get a moment to read the request they carry,
    // so that the drain waits for it instead of closing them as idle.
    accept_backlog(listener, serve_one);
    tokio::time::sleep(SETTLE).await;
    tracing::info!(
        drain_secs = DRAIN.as_secs(),
        "Shutting down; draining in-flight requests."
    );
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("In-flight requests did not finish within the drain period.");
    }
}

/// Serves every connection the kernel has completed, then closes `listener`. The accept calls
/// are made on the socket itself: the runtime may not have been told of these connections yet,
/// and a connection left in the queue is reset when the listener closes.
fn accept_backlog(listener: TcpListener, mut serve_one: impl FnMut(TcpStream)) {
    let Ok(listener) = listener.into_std() else {
        return;
    };
    // Non-blocking: the loop ends at the first "would block", or at any other error.
    while let Ok((stream, _)) = listener.accept() {
        let stream = stream
            .set_nonblocking(true)
            .and_then(|()| TcpStream::from_std(stream));
        if let Ok(stream) = stream {
            serve_one(stream);
        }
    }
}

/// One request, answered by relay-core; the body is read there, within its limits.
async fn deliver(State(relay): State<Arc<Relay>>, request: Request) -> Response {
    relay
        .handle(request, None)
        .await
        .into_response()
        .map(Body::from)
}
