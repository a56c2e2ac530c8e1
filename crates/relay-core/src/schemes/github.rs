//! GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, raw body)>`. No timestamp: a
//! captured delivery can be replayed; `X-GitHub-Delivery` (a GUID) is the dedup key.

use super::body_hmac::{BodyHmac, BodyHmacSender};
use super::hmac::Encoding;

/// GitHub's `X-Hub-Signature-256`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GitHub;

impl BodyHmacSender for GitHub {
    const NAME: &'static str = "github";
    const SIGNED: BodyHmac = BodyHmac {
        signature: "x-hub-signature-256",
        shown: "X-Hub-Signature-256",
        prefix: "sha256=",
        encoding: Encoding::Hex,
        delivery: "x-github-delivery",
        event: "x-github-event",
    };
}
