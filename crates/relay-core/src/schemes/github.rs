//! GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, raw body)>`. No timestamp: a
//! captured delivery can be replayed; `X-GitHub-Delivery` (a GUID) is the dedup key.

use std::time::SystemTime;

use http::{HeaderName, HeaderValue};

use super::body_hmac::BodyHmac;
use super::hmac::Encoding;
use super::{Proof, Scheme, SchemeError, Secrets, SignedRequest, SigningKey};

const SIGNED: BodyHmac = BodyHmac {
    signature: "x-hub-signature-256",
    shown: "X-Hub-Signature-256",
    prefix: "sha256=",
    encoding: Encoding::Hex,
    delivery: "x-github-delivery",
    event: "x-github-event",
};

/// GitHub's `X-Hub-Signature-256`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GitHub;

impl Scheme for GitHub {
    fn name(&self) -> &'static str {
        "github"
    }

    fn verify(
        &self,
        request: &SignedRequest<'_>,
        secrets: &Secrets,
        _now: SystemTime,
    ) -> Result<Proof, SchemeError> {
        SIGNED.verify(request, secrets)
    }

    fn has_timestamp(&self) -> bool {
        false
    }

    fn sign(
        &self,
        body: &[u8],
        key: &SigningKey,
        _at: SystemTime,
        id: Option<&str>,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, SchemeError> {
        SIGNED.sign(body, key, id)
    }
}
