//! A loopback HTTP/1.1 server for the fake endpoints: each connection served by `handler`,
//! with Nagle off.

use std::future::Future;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

/// Serves `handler` with `state` (an endpoint's shared state) on a free loopback port; its
/// `http://127.0.0.1:<port>`.
pub async fn serve_with<S, F, R>(state: std::sync::Arc<S>, handler: F) -> String
where
    S: Send + Sync + 'static,
    F: Fn(std::sync::Arc<S>, hyper::Request<hyper::body::Incoming>) -> R
        + Clone
        + Send
        + Sync
        + 'static,
    R: Future<Output = Result<hyper::Response<Full<Bytes>>, std::convert::Infallible>>
        + Send
        + 'static,
{
    serve(move |request| handler(std::sync::Arc::clone(&state), request)).await
}

/// Serves `handler` on a free loopback port, on the current Tokio runtime; its
/// `http://127.0.0.1:<port>`.
pub async fn serve<F, R>(handler: F) -> String
where
    F: Fn(hyper::Request<hyper::body::Incoming>) -> R + Clone + Send + Sync + 'static,
    R: Future<Output = Result<hyper::Response<Full<Bytes>>, std::convert::Infallible>>
        + Send
        + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let endpoint = format!("http://{}", listener.local_addr().expect("an address"));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let handler = handler.clone();
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(handler)),
            );
        }
    });
    endpoint
}
