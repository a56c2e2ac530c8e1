//! Shopify: `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256(secret, raw body)>`. No timestamp: a
//! captured delivery can be replayed; `X-Shopify-Webhook-Id` is the delivery id and
//! `X-Shopify-Topic` the event type.

use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use http::{HeaderName, HeaderValue};

use super::{Proof, Scheme, SchemeError, Secrets, SignedRequest, SigningKey};
use super::{header, hmac_sha256, match_hmac, owned, pair};

const SIGNATURE: &str = "x-shopify-hmac-sha256";

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
        let value = header(request.headers, SIGNATURE)?
            .ok_or(SchemeError::MissingSignature("X-Shopify-Hmac-Sha256"))?;
        let candidate = BASE64
            .decode(value)
            .map_err(|_| SchemeError::MalformedSignature("the signature is not base64"))?;
        let key_id = match_hmac(
            secrets.hmac_for(None),
            &[candidate],
            |s| Some(s.expose().to_vec()),
            |key| hmac_sha256(key, &[request.body]).to_vec(),
        )?;
        Ok(Proof {
            key_id,
            delivery_id: owned(request.headers, "x-shopify-webhook-id")?,
            event_type: owned(request.headers, "x-shopify-topic")?,
            signed_at: None,
        })
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
        let mac = hmac_sha256(key.hmac_secret()?.expose(), &[body]);
        let mut headers = vec![pair(SIGNATURE, BASE64.encode(mac))?];
        if let Some(id) = id {
            headers.push(pair("x-shopify-webhook-id", id.to_owned())?);
        }
        Ok(headers)
    }
}
