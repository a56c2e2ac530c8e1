//! Shopify: `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256(secret, raw body)>`. No timestamp: a
//! captured delivery can be replayed; `X-Shopify-Webhook-Id` is the delivery id and
//! `X-Shopify-Topic` the event type.

use super::body_hmac::{BodyHmac, BodyHmacSender};
use super::hmac::Encoding;

/// Shopify's `X-Shopify-Hmac-Sha256`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shopify;

impl BodyHmacSender for Shopify {
    const NAME: &'static str = "shopify";
    const SIGNED: BodyHmac = BodyHmac {
        signature: "x-shopify-hmac-sha256",
        shown: "X-Shopify-Hmac-Sha256",
        prefix: "",
        encoding: Encoding::Base64,
        delivery: "x-shopify-webhook-id",
        event: "x-shopify-topic",
    };
}
