//! Every way a request can fail, and the one place that decides its status and error code.

use http::StatusCode;

use crate::intake::IntakeError;
use crate::notification::PayloadError;
use crate::schemes::SchemeError;
use crate::verify::VerifyError;

/// A request the relay did not acknowledge.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A method other than GET, HEAD, POST or PUT (405).
    #[error("method {0} is not allowed; send POST or PUT")]
    MethodNotAllowed(http::Method),
    /// A path the relay deliberately does not serve, such as `/favicon.ico` (404).
    #[error("not found")]
    NotFound,
    /// The body, or its declared `Content-Length`, exceeds `RELAY_MAX_BODY_BYTES` (413).
    #[error("the request body is larger than {limit} bytes")]
    BodyTooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// The message is larger than a destination takes (413), checked before any sink is called.
    #[error("the notification is larger than {limit} bytes, the limit of {sink}")]
    MessageTooLarge {
        /// The sink whose limit it exceeds.
        sink: String,
        /// That limit, in bytes (body plus attributes).
        limit: usize,
    },
    /// The adapter could not read the body, e.g. the client went away (400).
    #[error("the request body could not be read")]
    UnreadableBody,
    /// The body did not arrive at the minimum rate, or within the body read timeout (408).
    #[error(
        "the request body did not arrive in time: at least {min_bytes_per_sec} bytes per second, within {secs} s"
    )]
    RequestTimeout {
        /// The timeout, in whole seconds.
        secs: u64,
        /// The minimum rate, in bytes per second.
        min_bytes_per_sec: usize,
    },
    /// The platform's deadline for this request has already passed: no sink is called (503 with
    /// `Retry-After`).
    #[error("no time is left before the platform's deadline; retry later")]
    DeadlinePassed,
    /// Too many requests or body bytes in flight (503 with `Retry-After`).
    #[error("the relay is at its limit of requests in flight; retry later")]
    Overloaded,
    /// With `[sources]` configured, no source answers on the request's path (404).
    #[error("no source is configured for this path")]
    UnknownPath,
    /// The signature check failed (401).
    #[error(transparent)]
    Unauthorized(#[from] VerifyError),
    /// Another source's signature check failed (401).
    #[error(transparent)]
    Signature(SchemeError),
    /// The body has no usable payload (415 or 400).
    #[error(transparent)]
    Intake(#[from] IntakeError),
    /// The payload is not a DSS notification (400).
    #[error(transparent)]
    Payload(#[from] PayloadError),
    /// The delivery ledger could not be read or written: nothing was published (503 with
    /// `Retry-After`).
    #[error("the delivery ledger is unavailable; nothing was published; retry later")]
    LedgerUnavailable,
    /// Another attempt of the same notification is publishing to a destination this one is
    /// routed to (503 with `Retry-After`: when its lease ends).
    #[error(
        "another attempt of this notification is being delivered; retry after {retry_after_secs} s"
    )]
    InProgress {
        /// Seconds until the other attempt's lease ends.
        retry_after_secs: u64,
    },
    /// A sink failed in a way retrying may fix (503 with `Retry-After`).
    #[error("the destination {sink} is temporarily unavailable; retry later")]
    SinkRetryable {
        /// The sink that failed.
        sink: String,
    },
    /// A sink failed in a way only an operator can fix (502).
    #[error("the destination {sink} rejected the notification")]
    SinkFailed {
        /// The sink that failed.
        sink: String,
    },
    /// A destination's transform yielded no body for the notification (502); the other
    /// destinations were published to.
    #[error("the transform of the destination {sink} failed: {reason}")]
    TransformFailed {
        /// The destination whose transform failed.
        sink: String,
        /// Why: the program's error, its time limit, no value, several, or one too large.
        reason: String,
    },
}

/// Seconds a sender is asked to wait after a 503.
pub(crate) const RETRY_AFTER_SECS: u32 = 5;

impl From<SchemeError> for Error {
    /// The DSS's refusals keep their own variant (and its `WWW-Authenticate`).
    fn from(error: SchemeError) -> Self {
        match error {
            SchemeError::Dss(e) => Self::Unauthorized(e),
            other => Self::Signature(other),
        }
    }
}

impl Error {
    /// The HTTP status both adapters return. The DSS retries every non-2xx.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::NotFound | Self::UnknownPath => StatusCode::NOT_FOUND,
            Self::BodyTooLarge { .. } | Self::MessageTooLarge { .. } => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            Self::UnreadableBody | Self::Payload(_) => StatusCode::BAD_REQUEST,
            Self::RequestTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            Self::Overloaded | Self::DeadlinePassed => StatusCode::SERVICE_UNAVAILABLE,
            Self::Unauthorized(_) | Self::Signature(_) => StatusCode::UNAUTHORIZED,
            Self::Intake(e) => e.status(),
            Self::SinkRetryable { .. } | Self::LedgerUnavailable | Self::InProgress { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::SinkFailed { .. } | Self::TransformFailed { .. } => StatusCode::BAD_GATEWAY,
        }
    }

    /// The stable error code in the response body.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MethodNotAllowed(_) => "method_not_allowed",
            Self::NotFound => "not_found",
            Self::UnknownPath => "unknown_path",
            Self::BodyTooLarge { .. } => "body_too_large",
            Self::MessageTooLarge { .. } => "message_too_large",
            Self::UnreadableBody => "unreadable_body",
            Self::RequestTimeout { .. } => "request_timeout",
            Self::Overloaded => "overloaded",
            Self::DeadlinePassed => "deadline_passed",
            Self::Unauthorized(e) => e.code(),
            Self::Signature(e) => e.code(),
            Self::Intake(e) => e.code(),
            Self::Payload(e) => e.code(),
            Self::LedgerUnavailable => "ledger_unavailable",
            Self::InProgress { .. } => "in_progress",
            Self::SinkRetryable { .. } => "sink_unavailable",
            Self::SinkFailed { .. } => "sink_failed",
            Self::TransformFailed { .. } => "transform_failed",
        }
    }
}
