//! Standard Webhooks: `webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature`,
//! a space-separated list of `v1,<base64 HMAC-SHA256>` and `v1a,<base64 ed25519>` over
//! `"{id}.{timestamp}.{body}"`. A symmetric secret is `whsec_` + base64 of its bytes. Several
//! signatures allow rotation; any one verifying is enough. `webhook-id` is the delivery id.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::{Signature, Signer as _};

use super::{Check, Headers, HmacKey, Proof, Scheme, SchemeError, Signer, Window};
use super::{SigningKey, match_hmac, pair};
use crate::mac::hmac_sha256;

const ID: &str = "webhook-id";
const TIMESTAMP: &str = "webhook-timestamp";
const SIGNATURE: &str = "webhook-signature";
/// The prefix of a symmetric secret.
pub(crate) const SECRET_PREFIX: &str = "whsec_";
/// More signatures than any rotation needs are refused rather than each tried.
const MAX_SIGNATURES: usize = 8;

/// Standard Webhooks v1 (HMAC) and v1a (ed25519).
#[derive(Debug, Clone, Copy, Default)]
pub struct StandardWebhooks {
    /// Largest accepted distance between `webhook-timestamp` and now.
    pub window: Window,
}

/// The HMAC key of a `whsec_` secret (the prefix is optional, and so is the base64's padding);
/// none when it is not base64.
pub fn secret_bytes(secret: &HmacKey) -> Option<Vec<u8>> {
    let text = secret.expose();
    let text = text.strip_prefix(SECRET_PREFIX.as_bytes()).unwrap_or(text);
    SECRET_BASE64.decode(text).ok()
}

/// Base64 with or without its padding: the reference libraries pad a secret before decoding it,
/// so an unpadded secret works with them, and here too.
const SECRET_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// The `v1` and `v1a` signatures of a `webhook-signature` header; other versions are skipped.
fn parse(value: &str) -> Result<(Vec<Vec<u8>>, Vec<Signature>), SchemeError> {
    let (mut v1, mut v1a) = (Vec::new(), Vec::new());
    for (n, part) in value.split_ascii_whitespace().enumerate() {
        if n == MAX_SIGNATURES {
            return Err(SchemeError::MalformedSignature("too many signatures"));
        }
        let (version, sig) = part.split_once(',').ok_or(SchemeError::MalformedSignature(
            "expected version,signature",
        ))?;
        // As the reference libraries do, a signature that cannot be one (not base64, a v1a of
        // another length) is skipped like a version this relay does not know: another entry
        // may still verify.
        let Ok(bytes) = BASE64.decode(sig) else {
            continue;
        };
        match version {
            "v1" => v1.push(bytes),
            "v1a" => {
                if let Ok(sig) = Signature::from_slice(&bytes) {
                    v1a.push(sig);
                }
            }
            _ => {}
        }
    }
    if v1.is_empty() && v1a.is_empty() {
        return Err(SchemeError::MalformedSignature("no v1 or v1a signature"));
    }
    Ok((v1, v1a))
}

impl Scheme for StandardWebhooks {
    fn verify(&self, check: Check<'_>) -> Result<Proof, SchemeError> {
        let value = check.signature(SIGNATURE, "webhook-signature")?;
        let (id, ts) = (check.needed(ID)?, check.needed(TIMESTAMP)?);
        let (v1, v1a) = parse(value)?;
        let signed_at = check.timestamp(ts, self.window)?;
        let content: [&[u8]; 5] = [id.as_bytes(), b".", ts.as_bytes(), b".", check.request.body];
        let by_hmac = match v1.is_empty() {
            true => Err(SchemeError::BadSignature),
            false => match_hmac(check.secrets.hmac_for(None), &v1, secret_bytes, |key| {
                hmac_sha256(key, &content).to_vec()
            }),
        };
        let key_id = match by_hmac {
            Ok(key_id) => key_id,
            Err(_) => {
                let message = content.concat();
                (check.secrets.ed25519_for(None))
                    .find(|e| v1a.iter().any(|s| e.key.verify_strict(&message, s).is_ok()))
                    .map(|e| e.id.clone())
                    .ok_or(SchemeError::BadSignature)?
            }
        };
        Ok(Proof {
            delivery_id: Some(id.to_owned()),
            ..Proof::timed(key_id, signed_at)
        })
    }

    fn sign(&self, body: &[u8], signer: Signer<'_>) -> Result<Headers, SchemeError> {
        let id = (signer.id).ok_or(SchemeError::Unsignable(
            "Standard Webhooks signs a webhook-id",
        ))?;
        let ts = signer.unix();
        let content: [&[u8]; 5] = [id.as_bytes(), b".", ts.as_bytes(), b".", body];
        let signature = match signer.key {
            SigningKey::Hmac { secret, .. } => {
                let key = secret_bytes(secret)
                    .ok_or(SchemeError::Unsignable("the secret is not whsec_<base64>"))?;
                format!("v1,{}", BASE64.encode(hmac_sha256(&key, &content)))
            }
            SigningKey::Ed25519 { key, .. } => {
                let sig = key.sign(&content.concat());
                format!("v1a,{}", BASE64.encode(sig.to_bytes()))
            }
        };
        Ok(vec![
            pair(ID, id.to_owned())?,
            pair(TIMESTAMP, ts)?,
            pair(SIGNATURE, signature)?,
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_headers_are_refused_without_panicking() {
        for bad in ["", "v1", "v1,***", "v2,AAAA", "v1a,AAAA", " , "] {
            assert!(
                matches!(parse(bad), Err(SchemeError::MalformedSignature(_))),
                "{bad}"
            );
        }
        assert!(parse(&"v1,AAAA ".repeat(MAX_SIGNATURES + 1)).is_err());
        assert_eq!(parse("v2,AAAA v1,AAAA").unwrap().0, vec![vec![0u8; 3]]);
        // A v1a that cannot be a signature is skipped, as the reference libraries skip it.
        let (v1, v1a) = parse("v1,AAAA v1a,AAAA").unwrap();
        assert_eq!((v1.len(), v1a.len()), (1, 0));
    }
}
