//! The relay as an HTTP service with the Cloud Run / Functions Framework contract: every path
//! goes to relay-core, which may answer before the body is read; the body is read up to the
//! configured limit, and relay-core decides every answer (crawler paths included).
#![warn(missing_docs)]

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use relay_core::{Outcome, Relay};

/// The whole HTTP surface. Tests drive it with `tower::ServiceExt::oneshot`.
pub fn app(relay: Arc<Relay>) -> Router {
    Router::new().fallback(deliver).with_state(relay)
}

async fn deliver(State(relay): State<Arc<Relay>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if let Some(answer) = relay.answer_before_body(&parts) {
        return respond(answer);
    }
    // Never buffer more than the limit, whatever Content-Length claimed.
    let body = match Limited::new(body, relay.config().max_body_bytes)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            let too_large = e.downcast_ref::<LengthLimitError>().is_some();
            return respond(relay.answer_unreadable(&parts, too_large));
        }
    };
    respond(relay.accept(Request::from_parts(parts, body)).await)
}

fn respond(outcome: Outcome) -> Response {
    outcome.into_response().map(Body::from)
}
