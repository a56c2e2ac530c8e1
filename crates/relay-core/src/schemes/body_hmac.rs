//! What GitHub and Shopify share: an HMAC-SHA256 of the raw body alone, in one header (hex
//! after a prefix, or base64), no timestamp, a delivery id and an event type in headers of
//! their own. Each sender is a type with one [`BodyHmac`] constant ([`BodyHmacSender`]), and
//! is a [`Scheme`] by it.

use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use http::{HeaderName, HeaderValue};

use super::hmac::Encoding;
use super::{Proof, Scheme, SchemeError, Secrets, SignedRequest, SigningKey};
use super::{header, hmac_sha256, match_hmac, owned, pair};

/// A sender whose scheme is one [`BodyHmac`].
pub(super) trait BodyHmacSender: std::fmt::Debug + Send + Sync {
    /// The scheme's name in the configuration.
    const NAME: &'static str;
    /// Its signature.
    const SIGNED: BodyHmac;
}

impl<T: BodyHmacSender> Scheme for T {
    fn name(&self) -> &'static str {
        T::NAME
    }

    fn verify(
        &self,
        request: &SignedRequest<'_>,
        secrets: &Secrets,
        _now: SystemTime,
    ) -> Result<Proof, SchemeError> {
        T::SIGNED.verify(request, secrets)
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
        T::SIGNED.sign(body, key, id)
    }
}

/// One sender's body signature.
#[derive(Debug, Clone, Copy)]
pub(super) struct BodyHmac {
    /// The signature's header, lowercase.
    pub(super) signature: &'static str,
    /// The same, as the sender writes it, for errors.
    pub(super) shown: &'static str,
    /// Before the encoded signature (`sha256=`), or empty.
    pub(super) prefix: &'static str,
    /// How the signature is encoded.
    pub(super) encoding: Encoding,
    /// The delivery id's header, lowercase.
    pub(super) delivery: &'static str,
    /// The event type's header, lowercase.
    pub(super) event: &'static str,
}

impl BodyHmac {
    /// Verifies `request`'s body against the secrets without a key id.
    pub(super) fn verify(
        &self,
        request: &SignedRequest<'_>,
        secrets: &Secrets,
    ) -> Result<Proof, SchemeError> {
        let value = header(request.headers, self.signature)?
            .ok_or(SchemeError::MissingSignature(self.shown))?;
        let encoded = value
            .strip_prefix(self.prefix)
            .ok_or(SchemeError::MalformedSignature(
                "the signature lacks its prefix",
            ))?;
        let candidate = match self.encoding {
            Encoding::Hex => hex::decode(encoded)
                .map_err(|_| SchemeError::MalformedSignature("the signature is not hex"))?,
            Encoding::Base64 => BASE64
                .decode(encoded)
                .map_err(|_| SchemeError::MalformedSignature("the signature is not base64"))?,
        };
        let key_id = match_hmac(
            secrets.hmac_for(None),
            &[candidate],
            |s| Some(s.expose().to_vec()),
            |key| hmac_sha256(key, &[request.body]).to_vec(),
        )?;
        Ok(Proof {
            key_id,
            delivery_id: owned(request.headers, self.delivery)?,
            event_type: owned(request.headers, self.event)?,
            signed_at: None,
        })
    }

    /// The headers a sender adds: the signature, and the delivery id when given.
    pub(super) fn sign(
        &self,
        body: &[u8],
        key: &SigningKey,
        id: Option<&str>,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, SchemeError> {
        let mac = hmac_sha256(key.hmac_secret()?.expose(), &[body]);
        let encoded = match self.encoding {
            Encoding::Hex => hex::encode(mac),
            Encoding::Base64 => BASE64.encode(mac),
        };
        let mut headers = vec![pair(self.signature, format!("{}{encoded}", self.prefix))?];
        if let Some(id) = id {
            headers.push(pair(self.delivery, id.to_owned())?);
        }
        Ok(headers)
    }
}
