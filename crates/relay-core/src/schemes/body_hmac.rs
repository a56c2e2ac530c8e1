//! What GitHub and Shopify share: an HMAC-SHA256 of the raw body alone, in one header (hex
//! after a prefix, or base64), no timestamp, a delivery id and an event type in headers of
//! their own. Each sender is one [`BodyHmac`] constant, which is its [`Scheme`].

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::hmac::Encoding;
use super::{Check, Headers, Proof, Scheme, SchemeError, Signer, owned, pair};

/// GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, raw body)>`. No timestamp: a
/// captured delivery can be replayed; `X-GitHub-Delivery` (a GUID) is the dedup key.
pub const GITHUB: BodyHmac = BodyHmac::new(
    ["x-hub-signature-256", "X-Hub-Signature-256"],
    ("sha256=", Encoding::Hex),
    ["x-github-delivery", "x-github-event"],
);

/// Shopify: `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256(secret, raw body)>`. No timestamp: a
/// captured delivery can be replayed; `X-Shopify-Webhook-Id` is the delivery id and
/// `X-Shopify-Topic` the event type.
pub const SHOPIFY: BodyHmac = BodyHmac::new(
    ["x-shopify-hmac-sha256", "X-Shopify-Hmac-Sha256"],
    ("", Encoding::Base64),
    ["x-shopify-webhook-id", "x-shopify-topic"],
);

/// One sender's body signature, and the scheme it makes.
#[derive(Debug, Clone, Copy)]
pub struct BodyHmac {
    /// The signature's header, lowercase.
    signature: &'static str,
    /// The same, as the sender writes it, for errors.
    shown: &'static str,
    /// Before the encoded signature (`sha256=`), or empty.
    prefix: &'static str,
    /// How the signature is encoded.
    encoding: Encoding,
    /// The delivery id's header, lowercase.
    delivery: &'static str,
    /// The event type's header, lowercase.
    event: &'static str,
}

impl Scheme for BodyHmac {
    fn verify(&self, check: Check<'_>) -> Result<Proof, SchemeError> {
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

    fn has_timestamp(&self) -> bool {
        false
    }

    /// The headers a sender adds: the signature, and the delivery id when given.
    fn sign(&self, body: &[u8], signer: Signer<'_>) -> Result<Headers, SchemeError> {
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

impl BodyHmac {
    /// A scheme from its signature's header (lowercase, and as the sender writes it),
    /// the signature's prefix and encoding, and the delivery id's and event type's headers
    /// (lowercase).
    const fn new(
        [signature, shown]: [&'static str; 2],
        (prefix, encoding): (&'static str, Encoding),
        [delivery, event]: [&'static str; 2],
    ) -> Self {
        Self {
            signature,
            shown,
            prefix,
            encoding,
            delivery,
            event,
        }
    }

    /// The headers the sender sends beside its signature: the delivery id and event type.
    pub(crate) fn unsigned_headers(&self) -> [&'static str; 2] {
        [self.delivery, self.event]
    }
}
