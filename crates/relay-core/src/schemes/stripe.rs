//! Stripe: `Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "{t}.{body}")>[,v1=…]`.
//! Several `v1` values appear during a secret's rotation; any one matching is enough. Other
//! schemes (`v0`, the test scheme) are ignored. The timestamp is checked within a window
//! (5 minutes by default, as Stripe's libraries do).

use super::{Check, Headers, Proof, Scheme, SchemeError, Signer, Window, pair};

const SIGNATURE: &str = "stripe-signature";
/// More `v1` values than any rotation needs are refused rather than each tried.
const MAX_SIGNATURES: usize = 8;

/// Stripe's `Stripe-Signature`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stripe {
    /// Largest accepted distance between `t` and now.
    pub window: Window,
}

/// The `t` and the `v1` values of a `Stripe-Signature` header.
fn parse(value: &str) -> Result<(&str, Vec<Vec<u8>>), SchemeError> {
    let mut t = None;
    let mut v1 = Vec::new();
    for part in value.split(',') {
        let (name, val) = part
            .trim()
            .split_once('=')
            .ok_or(SchemeError::MalformedSignature("expected name=value pairs"))?;
        match name {
            "t" if t.replace(val).is_some() => {
                return Err(SchemeError::MalformedSignature("t is repeated"));
            }
            "t" => {}
            "v1" => {
                if v1.len() == MAX_SIGNATURES {
                    return Err(SchemeError::MalformedSignature("too many v1 signatures"));
                }
                // A value that is not hex cannot match; it is skipped like another scheme.
                if let Ok(bytes) = hex::decode(val) {
                    v1.push(bytes);
                }
            }
            _ => {}
        }
    }
    let t = t.ok_or(SchemeError::MalformedSignature("t is missing"))?;
    if v1.is_empty() {
        return Err(SchemeError::MalformedSignature("no v1 signature"));
    }
    Ok((t, v1))
}

impl Scheme for Stripe {
    fn verify(&self, check: Check<'_>) -> Result<Proof, SchemeError> {
        let (t, candidates) = parse(check.signature(SIGNATURE, "Stripe-Signature")?)?;
        let signed_at = check.timestamp(t, self.window)?;
        let key_id = check.hmac(&candidates, &[t.as_bytes(), b".", check.request.body])?;
        Ok(Proof::timed(key_id, signed_at))
    }

    fn sign(&self, body: &[u8], signer: Signer<'_>) -> Result<Headers, SchemeError> {
        let t = signer.unix();
        let mac = signer.hmac(&[t.as_bytes(), b".", body])?;
        Ok(vec![pair(
            SIGNATURE,
            format!("t={t},v1={}", hex::encode(mac)),
        )?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_headers_are_refused_without_panicking() {
        for bad in [
            "",
            "t",
            "t=1",
            "v1=00",
            "t=1,t=2,v1=00",
            ",,,",
            "t=1,v1=zz",
            "=",
            "t=1,v0=00",
        ] {
            assert!(
                matches!(parse(bad), Err(SchemeError::MalformedSignature(_))),
                "{bad}"
            );
        }
        let many = format!("t=1{}", ",v1=00".repeat(MAX_SIGNATURES + 1));
        assert!(parse(&many).is_err());
        assert_eq!(parse("t=1, v1=00,v0=11").unwrap().1, vec![vec![0u8]]);
    }
}
