//! Requests signed and encoded as the DSS sent them, and what the tests read off the answers.

use std::time::SystemTime;

use bytes::Bytes;
use relay_core::Outcome;
use relay_core::verify::{Secret, sign};

use crate::capture;

/// Signs requests as the DSS did: `Date`, `Digest` and `Authorization` over `date digest`.
#[derive(Debug, Clone)]
pub struct Signer {
    /// The keyId.
    pub key_id: String,
    /// The secret.
    pub secret: String,
    /// The time the `Date` header gives.
    pub at: SystemTime,
}

/// The multipart boundary of the DSS captures.
pub const BOUNDARY: &str = "2769baffc4f24cbc83ced26aa0c2f712";

impl Signer {
    /// Signs with the capture secret at the captures' `Date`.
    pub fn capture(key_id: &str) -> Self {
        Self {
            key_id: key_id.to_owned(),
            secret: capture::SECRET.to_owned(),
            at: capture::time(),
        }
    }

    /// A signed `POST /` with `body` as `application/json`.
    pub fn json(&self, body: &str) -> http::Request<Bytes> {
        self.request("application/json", body.as_bytes().to_vec())
    }

    /// A signed `PUT /` with `payload` in the `payload` field after `foo=bar`, as the DSS's
    /// multipart subscriptions sent it.
    pub fn multipart(&self, payload: &str) -> http::Request<Bytes> {
        let fields = [("foo".to_owned(), "bar".to_owned())];
        let body = relay_core::intake::dss_multipart_body(
            BOUNDARY,
            &fields,
            "payload",
            payload.as_bytes(),
        );
        let mut request = self.request(&format!("multipart/form-data; boundary={BOUNDARY}"), body);
        *request.method_mut() = http::Method::PUT;
        request
    }

    /// A signed `POST /` with this content type and body.
    pub fn request(&self, content_type: &str, body: Vec<u8>) -> http::Request<Bytes> {
        let signature = sign(
            &self.key_id,
            &Secret::new(self.secret.as_str()),
            self.at,
            &body,
        )
        .expect("a valid keyId");
        http::Request::post("/")
            .header("content-type", content_type)
            .header("date", signature.date)
            .header("digest", signature.digest)
            .header("authorization", signature.authorization)
            .body(Bytes::from(body))
            .expect("a valid request")
    }
}

/// A short v2 notification with the given event type.
pub fn v2(event_type: &str) -> String {
    format!(
        r#"{{"subscription_id": "s", "event_type": "{event_type}", "match": {{"bundle_uuid": "u", "bundle_version": "v"}}}}"#
    )
}

/// Panics, showing the body, unless the answer is 202.
pub fn assert_accepted(outcome: &Outcome) {
    let body = String::from_utf8_lossy(&outcome.body);
    assert_eq!(outcome.status, http::StatusCode::ACCEPTED, "{body}");
}

/// The status and `error.code` (empty for a success) of an answer.
pub fn status_and_code(outcome: &Outcome) -> (u16, String) {
    let body: serde_json::Value = serde_json::from_slice(&outcome.body).expect("a JSON body");
    let code = body["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (outcome.status.as_u16(), code)
}

/// The headers `scheme` adds to a `POST` of `body` to `target` (a path, with a query if any),
/// signed with `key` at `at`, as a sender sends it.
pub fn scheme_headers(
    scheme: &dyn relay_core::schemes::Scheme,
    target: &str,
    body: &[u8],
    key: &relay_core::schemes::SigningKey,
    at: std::time::SystemTime,
    id: Option<&str>,
) -> http::HeaderMap {
    let uri: http::Uri = target.parse().expect("a request target");
    let unsigned = http::HeaderMap::new();
    let request = relay_core::schemes::SignedRequest {
        method: &http::Method::POST,
        uri: &uri,
        headers: &unsigned,
        body,
    };
    scheme
        .sign_request(&request, relay_core::schemes::Signer::new(key, at, id))
        .expect("the scheme signs it")
        .into_iter()
        .collect()
}
