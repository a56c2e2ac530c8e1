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

/// A request's body, whole; empty when it cannot be read.
pub async fn body(request: hyper::Request<hyper::body::Incoming>) -> Bytes {
    use http_body_util::BodyExt as _;
    let collected = request.into_body().collect().await;
    collected.map(|b| b.to_bytes()).unwrap_or_default()
}

/// An AWS JSON protocol call as a fake endpoint reads it.
#[derive(Debug)]
pub struct AwsCall {
    /// Its `X-Amz-Target` (`AmazonSQS.SendMessage`), empty when absent.
    pub target: String,
    /// Its body as JSON; `Null` when it is not JSON.
    pub input: serde_json::Value,
}

impl AwsCall {
    /// Reads `request`'s target and JSON body.
    pub async fn read(request: hyper::Request<hyper::body::Incoming>) -> Self {
        let target = (request.headers().get("x-amz-target"))
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let bytes = body(request).await;
        let input = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        Self { target, input }
    }

    /// The operation its target names after `prefix` (`DynamoDB_20120810.`), or empty.
    pub fn operation(&self, prefix: &str) -> &str {
        self.target.strip_prefix(prefix).unwrap_or_default()
    }
}

/// An AWS JSON 1.0 answer with `status` and `body`.
pub fn aws_reply(status: u16, body: &serde_json::Value) -> hyper::Response<Full<Bytes>> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/x-amz-json-1.0")
        .header("x-amzn-requestid", "fake")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("a valid response")
}
