//! Slack v0: `X-Slack-Signature: v0=<hex HMAC-SHA256(secret, "v0:{timestamp}:{body}")>` with
//! `X-Slack-Request-Timestamp` (Unix seconds), checked within a window (5 minutes by default).

use super::{Check, Headers, Proof, Scheme, SchemeError, Signer, Window, pair};

const SIGNATURE: &str = "x-slack-signature";
const TIMESTAMP: &str = "x-slack-request-timestamp";

/// Slack's v0 request signing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Slack {
    /// Largest accepted distance between the signed timestamp and now.
    pub window: Window,
}

impl Scheme for Slack {
    fn verify(&self, check: Check<'_>) -> Result<Proof, SchemeError> {
        let value = check.signature(SIGNATURE, "X-Slack-Signature")?;
        let ts = check.needed(TIMESTAMP)?;
        let hex_sig = value
            .strip_prefix("v0=")
            .ok_or(SchemeError::MalformedSignature("expected v0=<hex>"))?;
        let candidate = hex::decode(hex_sig)
            .map_err(|_| SchemeError::MalformedSignature("the signature is not hex"))?;
        let signed_at = check.timestamp(ts, self.window)?;
        let key_id = check.hmac(
            &[candidate],
            &[b"v0:", ts.as_bytes(), b":", check.request.body],
        )?;
        Ok(Proof::timed(key_id, signed_at))
    }

    fn sign(&self, body: &[u8], signer: Signer<'_>) -> Result<Headers, SchemeError> {
        let ts = signer.unix();
        let mac = signer.hmac(&[b"v0:", ts.as_bytes(), b":", body])?;
        Ok(vec![
            pair(SIGNATURE, format!("v0={}", hex::encode(mac)))?,
            pair(TIMESTAMP, ts)?,
        ])
    }
}
