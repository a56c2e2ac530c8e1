//! What GitHub and Shopify share: an HMAC-SHA256 of the raw body alone, in one header (hex
//! after a prefix, or base64), no timestamp, a delivery id and an event type in headers of
//! their own. Each sender is a type with one [`BodyHmac`] constant ([`BodyHmacSender`]), and
//! is a [`Scheme`] by it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::hmac::Encoding;
use super::{Check, Headers, Proof, Scheme, SchemeError, Signer, owned, pair};

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

    fn verify(&self, check: Check<'_>) -> Result<Proof, SchemeError> {
        T::SIGNED.verify(check)
    }

    fn has_timestamp(&self) -> bool {
        false
    }

    fn sign(&self, body: &[u8], signer: Signer<'_>) -> Result<Headers, SchemeError> {
        T::SIGNED.sign(body, signer)
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
    pub(super) fn verify(&self, check: Check<'_>) -> Result<Proof, SchemeError> {
        let value = check.signature(self.signature, self.shown)?;
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
        let key_id = check.hmac(&[candidate], &[check.request.body])?;
        let headers = check.request.headers;
        Ok(Proof {
            key_id,
            delivery_id: owned(headers, self.delivery)?,
            event_type: owned(headers, self.event)?,
            signed_at: None,
        })
    }

    /// The headers a sender adds: the signature, and the delivery id when given.
    pub(super) fn sign(&self, body: &[u8], signer: Signer<'_>) -> Result<Headers, SchemeError> {
        let mac = signer.hmac(&[body])?;
        let encoded = match self.encoding {
            Encoding::Hex => hex::encode(mac),
            Encoding::Base64 => BASE64.encode(mac),
        };
        let mut headers = vec![pair(self.signature, format!("{}{encoded}", self.prefix))?];
        if let Some(id) = signer.id {
            headers.push(pair(self.delivery, id.to_owned())?);
        }
        Ok(headers)
    }
}
