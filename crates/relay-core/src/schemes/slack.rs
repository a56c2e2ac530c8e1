//! Slack v0: `X-Slack-Signature: v0=<hex HMAC-SHA256(secret, "v0:{timestamp}:{body}")>` with
//! `X-Slack-Request-Timestamp` (Unix seconds), checked within a window (5 minutes by default).

use std::time::{Duration, SystemTime};

use http::{HeaderName, HeaderValue};

use super::{DEFAULT_WINDOW, Proof, Scheme, SchemeError, Secrets, SignedRequest, SigningKey};
use super::{check_timestamp, header, hmac_sha256, match_hmac, pair, unix_secs};

const SIGNATURE: &str = "x-slack-signature";
const TIMESTAMP: &str = "x-slack-request-timestamp";

/// Slack's v0 request signing.
#[derive(Debug, Clone, Copy)]
pub struct Slack {
    /// Largest accepted distance between the signed timestamp and now.
    pub window: Duration,
}

impl Default for Slack {
    fn default() -> Self {
        Self {
            window: DEFAULT_WINDOW,
        }
    }
}

impl Scheme for Slack {
    fn name(&self) -> &'static str {
        "slack"
    }

    fn verify(
        &self,
        request: &SignedRequest<'_>,
        secrets: &Secrets,
        now: SystemTime,
    ) -> Result<Proof, SchemeError> {
        let value = header(request.headers, SIGNATURE)?
            .ok_or(SchemeError::MissingSignature("X-Slack-Signature"))?;
        let ts = header(request.headers, TIMESTAMP)?
            .ok_or_else(|| SchemeError::MissingHeader("X-Slack-Request-Timestamp".into()))?;
        let hex_sig = value
            .strip_prefix("v0=")
            .ok_or(SchemeError::MalformedSignature("expected v0=<hex>"))?;
        let candidate = hex::decode(hex_sig)
            .map_err(|_| SchemeError::MalformedSignature("the signature is not hex"))?;
        let signed_at = check_timestamp(ts, now, self.window)?;
        let key_id = match_hmac(
            secrets.hmac_for(None),
            &[candidate],
            |s| Some(s.expose().to_vec()),
            |key| hmac_sha256(key, &[b"v0:", ts.as_bytes(), b":", request.body]).to_vec(),
        )?;
        Ok(Proof {
            key_id,
            signed_at: Some(signed_at),
            ..Proof::default()
        })
    }

    fn has_timestamp(&self) -> bool {
        true
    }

    fn sign(
        &self,
        body: &[u8],
        key: &SigningKey,
        at: SystemTime,
        _id: Option<&str>,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, SchemeError> {
        let ts = unix_secs(at).to_string();
        let mac = hmac_sha256(
            key.hmac_secret()?.expose(),
            &[b"v0:", ts.as_bytes(), b":", body],
        );
        Ok(vec![
            pair(SIGNATURE, format!("v0={}", hex::encode(mac)))?,
            pair(TIMESTAMP, ts)?,
        ])
    }
}
