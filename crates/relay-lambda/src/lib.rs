//! The relay as an AWS Lambda handler: Function URL, API Gateway (HTTP and REST) and ALB events
//! all arrive as one `lambda_http::Request`, whose body `lambda_http` has already
//! base64-decoded; those are the bytes the DSS signed.
#![warn(missing_docs)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use lambda_http::{Body, Request, RequestExt, Response, http};
use relay_core::Relay;

/// Time kept back from the invocation's deadline to send the answer.
const MARGIN: Duration = Duration::from_millis(500);

/// Turns one event into one relay answer.
pub async fn handle(relay: &Relay, request: Request) -> Response<Body> {
    let deadline = request
        .lambda_context_ref()
        .and_then(|ctx| deadline(ctx.deadline));
    let (parts, body) = request.into_parts();
    let body = match body {
        Body::Empty => Bytes::new(),
        Body::Text(text) => Bytes::from(text),
        Body::Binary(bytes) => Bytes::from(bytes),
        other => Bytes::copy_from_slice(other.as_ref()),
    };
    let outcome = relay
        .accept_until(http::Request::from_parts(parts, body), deadline)
        .await;
    // relay-core always answers JSON text.
    outcome
        .into_response()
        .map(|json| Body::Text(String::from_utf8_lossy(&json).into_owned()))
}

/// The invocation deadline (milliseconds since the epoch) as an `Instant`, less the margin.
fn deadline(epoch_ms: u64) -> Option<Instant> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    let left = Duration::from_millis(epoch_ms).checked_sub(now)?;
    Some(Instant::now() + left.saturating_sub(MARGIN))
}
