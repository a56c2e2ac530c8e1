//! What the relay answers: a status, headers and a JSON body, ready for any adapter to copy.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::json;

use crate::error::{Error, RETRY_AFTER_SECS};

/// The relay's answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The HTTP status. Never a 3xx: the DSS does not follow redirects.
    pub status: StatusCode,
    /// Response headers (always `Content-Type: application/json`).
    pub headers: HeaderMap,
    /// The JSON body.
    pub body: Bytes,
    /// The error code, for logs; `None` on success.
    pub code: Option<&'static str>,
}

impl Outcome {
    /// A JSON answer with the given status.
    pub fn json(status: StatusCode, body: &impl serde::Serialize) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Self {
            status,
            headers,
            body: Bytes::from(serde_json::to_vec(body).expect("an answer serializes")),
            code: None,
        }
    }

    /// The answer to a failed request: `{"error": {"code", "message"}}` plus the headers the
    /// status calls for (`Allow`, `WWW-Authenticate`, `Retry-After`).
    pub(crate) fn from_error(error: &Error) -> Self {
        let body = json!({"error": {"code": error.code(), "message": error.to_string()}});
        let mut outcome = Self::json(error.status(), &body);
        outcome.code = Some(error.code());
        let extra = match error {
            Error::MethodNotAllowed(_) => Some((header::ALLOW, "GET, HEAD, POST, PUT".to_owned())),
            Error::Unauthorized(_) => Some((
                header::WWW_AUTHENTICATE,
                r#"Signature realm="dss-relay",headers="date digest""#.to_owned(),
            )),
            Error::SinkRetryable { .. }
            | Error::Overloaded
            | Error::DeadlinePassed
            | Error::LedgerUnavailable => Some((header::RETRY_AFTER, RETRY_AFTER_SECS.to_string())),
            Error::InProgress { retry_after_secs } => {
                Some((header::RETRY_AFTER, retry_after_secs.to_string()))
            }
            _ => None,
        };
        if let Some((name, value)) = extra {
            outcome
                .headers
                .insert(name, HeaderValue::from_str(&value).expect("static ASCII"));
        }
        outcome
    }

    /// The answer as sent for `method`: a `HEAD` answer has the headers and no body.
    pub(crate) fn for_method(mut self, method: &http::Method) -> Self {
        if method == http::Method::HEAD {
            self.body = Bytes::new();
        }
        self
    }

    /// Converts into an `http::Response`, for adapters built on the `http` types.
    pub fn into_response(self) -> http::Response<Bytes> {
        let mut response = http::Response::new(self.body);
        *response.status_mut() = self.status;
        *response.headers_mut() = self.headers;
        response
    }
}
