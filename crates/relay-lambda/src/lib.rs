//! The relay as an AWS Lambda handler: Function URL, API Gateway (HTTP and REST) and ALB events
//! all arrive as one `lambda_http::Request`, whose body `lambda_http` has already
//! base64-decoded; those are the bytes the DSS signed.
#![warn(missing_docs)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::Full;
use lambda_http::{Body, Request, RequestExt, Response};
use relay_core::Relay;

/// Time kept back from the invocation's deadline to send the answer.
const MARGIN: Duration = Duration::from_millis(500);

/// Turns one event into one relay answer.
pub async fn handle(relay: &Relay, request: Request) -> Response<Body> {
    let context = request.lambda_context_ref();
    let deadline = context.and_then(|ctx| deadline(ctx.deadline));
    // The invocation's X-Ray trace id (Lambda's `_X_AMZN_TRACE_ID`), in the header the core
    // reads it from: the function's own segment, which the request's header precedes.
    let xray = context
        .and_then(|ctx| ctx.xray_trace_id.as_deref())
        .and_then(|id| lambda_http::http::HeaderValue::from_str(id).ok());
    let mut request = request.map(|body| {
        Full::new(match body {
            Body::Empty => Bytes::new(),
            Body::Text(text) => Bytes::from(text),
            Body::Binary(bytes) => Bytes::from(bytes),
            other => Bytes::copy_from_slice(other.as_ref()),
        })
    });
    if let Some(xray) = xray {
        request
            .headers_mut()
            .insert(relay_core::sink::XRAY_HEADER, xray);
    }
    let outcome = relay.invoke(request, deadline).await;
    // relay-core always answers JSON text.
    outcome
        .into_response()
        .map(|json| Body::Text(String::from_utf8_lossy(&json).into_owned()))
}

/// The invocation deadline (milliseconds since the epoch) as an `Instant`, less the margin; a
/// deadline already passed is now, so the relay answers 503 at once instead of calling a sink.
fn deadline(epoch_ms: u64) -> Option<Instant> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    let left = Duration::from_millis(epoch_ms).saturating_sub(now);
    Some(Instant::now() + left.saturating_sub(MARGIN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passed_deadline_is_now_not_the_sink_timeout() {
        let past = deadline(1_000).expect("a deadline");
        assert!(past <= Instant::now());
        let soon = SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + Duration::from_secs(3);
        let soon = deadline(soon.as_millis() as u64).expect("a deadline");
        assert!(
            soon > Instant::now() + Duration::from_secs(2)
                && soon < Instant::now() + Duration::from_secs(3)
        );
    }
}
