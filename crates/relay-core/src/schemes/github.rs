//! GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, raw body)>`. No timestamp: a
//! captured delivery can be replayed; `X-GitHub-Delivery` (a GUID) is the dedup key.

use std::time::SystemTime;

use http::{HeaderName, HeaderValue};

use super::{Proof, Scheme, SchemeError, Secrets, SignedRequest, SigningKey};
use super::{header, hmac_sha256, match_hmac, owned, pair};

const SIGNATURE: &str = "x-hub-signature-256";
const PREFIX: &str = "sha256=";

/// GitHub's `X-Hub-Signature-256`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GitHub;

impl Scheme for GitHub {
    fn name(&self) -> &'static str {
        "github"
    }

    fn verify(
        &self,
        request: &SignedRequest<'_>,
        secrets: &Secrets,
        _now: SystemTime,
    ) -> Result<Proof, SchemeError> {
        let value = header(request.headers, SIGNATURE)?
            .ok_or(SchemeError::MissingSignature("X-Hub-Signature-256"))?;
        let hex_sig = value
            .strip_prefix(PREFIX)
            .ok_or(SchemeError::MalformedSignature("expected sha256=<hex>"))?;
        let candidate = hex::decode(hex_sig)
            .map_err(|_| SchemeError::MalformedSignature("the signature is not hex"))?;
        let key_id = match_hmac(
            secrets.hmac_for(None),
            &[candidate],
            |s| Some(s.expose().to_vec()),
            |key| hmac_sha256(key, &[request.body]).to_vec(),
        )?;
        Ok(Proof {
            key_id,
            delivery_id: owned(request.headers, "x-github-delivery")?,
            event_type: owned(request.headers, "x-github-event")?,
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
        let mut headers = vec![pair(SIGNATURE, format!("{PREFIX}{}", hex::encode(mac)))?];
        if let Some(id) = id {
            headers.push(pair("x-github-delivery", id.to_owned())?);
        }
        Ok(headers)
    }
}
