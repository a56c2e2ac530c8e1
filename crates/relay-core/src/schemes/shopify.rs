//! Shopify: `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256(secret, raw body)>`. No timestamp: a
//! captured delivery can be replayed; `X-Shopify-Webhook-Id` is the delivery id and
//! `X-Shopify-Topic` the event type.

use std::time::SystemTime;

use http::{HeaderName, HeaderValue};

use super::body_hmac::BodyHmac;
use super::hmac::Encoding;
use super::{Proof, Scheme, SchemeError, Secrets, SignedRequest, SigningKey};

const SIGNED: BodyHmac = BodyHmac {
    signature: "x-shopify-hmac-sha256",
    shown: "X-Shopify-Hmac-Sha256",
    prefix: "",
    encoding: Encoding::Base64,
    delivery: "x-shopify-webhook-id",
    event: "x-shopify-topic",
};

/// Shopify's `X-Shopify-Hmac-Sha256`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shopify;

impl Scheme for Shopify {
    fn name(&self) -> &'static str {
        "shopify"
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
