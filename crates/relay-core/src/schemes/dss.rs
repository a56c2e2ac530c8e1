//! The DSS: draft-cavage HTTP Signatures over `date` and `digest` with HMAC-SHA256, its keys
//! looked up by `keyId` ([`crate::verify`] holds the protocol). Its refusals keep the DSS's own
//! codes (`missing_authorization`, `unknown_key_id`, `stale_date`, …) through
//! [`SchemeError::Dss`].

use super::{Check, Headers, Proof, Scheme, SchemeError, Signer, SigningKey};
use crate::verify::{self, FixedClock, KeyRing, Policy};

/// The DSS's signature, with the keys and the policy of the source it signs for.
#[derive(Debug, Clone)]
pub struct Dss {
    /// Its keys, by `keyId`: a DSS source is checked against these, not the check's secrets.
    pub keys: KeyRing,
    /// The clock skew allowed, and whether an unsigned request is accepted.
    pub policy: Policy,
}

impl Scheme for Dss {
    fn verify(&self, check: Check<'_>) -> Result<Proof, SchemeError> {
        let key_id = verify::verify(
            *check.request,
            &self.keys,
            &self.policy,
            &FixedClock(check.now),
        )?;
        Ok(Proof {
            key_id,
            ..Proof::default()
        })
    }

    fn has_timestamp(&self) -> bool {
        self.policy.max_clock_skew.is_some()
    }

    /// `Date`, `Digest` and `Authorization`, as the DSS sends them; the key needs its key id.
    fn sign(&self, body: &[u8], signer: Signer<'_>) -> Result<Headers, SchemeError> {
        let SigningKey::Hmac {
            key_id: Some(key_id),
            secret,
        } = signer.key
        else {
            return Err(match signer.key {
                SigningKey::Hmac { .. } => SchemeError::Unsignable("the DSS signs with a key id"),
                SigningKey::Ed25519 { .. } => SchemeError::WrongKeyType,
            });
        };
        let signed = verify::sign_with(key_id, secret.expose(), signer.at, body)
            .map_err(|_| SchemeError::Unsignable("the key id cannot be placed in a header"))?;
        Ok(vec![
            (http::header::DATE, signed.date),
            (verify::DIGEST, signed.digest),
            (http::header::AUTHORIZATION, signed.authorization),
        ])
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::error::Error;
    use crate::schemes::{HmacKey, Secrets, SignedRequest};
    use crate::verify::{Secret, VerifyError};

    fn dss() -> Dss {
        let named = BTreeMap::from([("hca-dss:k1".to_owned(), Secret::new("ribos0me"))]);
        Dss {
            keys: KeyRing::new(named, None),
            policy: Policy {
                max_clock_skew: Some(Duration::from_secs(300)),
                allow_unsigned: false,
            },
        }
    }

    fn checked(
        dss: &Dss,
        headers: &http::HeaderMap,
        now: SystemTime,
    ) -> Result<Proof, SchemeError> {
        let uri = http::Uri::from_static("/");
        let request = SignedRequest {
            method: &http::Method::POST,
            uri: &uri,
            headers,
            body: b"{}",
        };
        let secrets = Secrets::new();
        dss.verify(Check::new(&request, &secrets, now))
    }

    #[test]
    fn what_it_signs_it_verifies_and_its_refusals_keep_the_dss_codes() {
        let (dss, at) = (
            dss(),
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        );
        let key = SigningKey::Hmac {
            key_id: Some("hca-dss:k1".into()),
            secret: HmacKey::from_bytes(*b"ribos0me"),
        };
        let signer = Signer::new(&key, at, None);
        let headers: http::HeaderMap = dss.sign(b"{}", signer).unwrap().into_iter().collect();
        let proof = checked(&dss, &headers, at).unwrap();
        assert_eq!(proof.key_id.as_deref(), Some("hca-dss:k1"));
        assert!(dss.has_timestamp());

        let late = checked(&dss, &headers, at + Duration::from_secs(301)).unwrap_err();
        assert_eq!(late, SchemeError::Dss(VerifyError::StaleDate));
        assert_eq!(late.code(), "stale_date");
        assert!(matches!(
            Error::from(late),
            Error::Unauthorized(VerifyError::StaleDate)
        ));
        let missing = checked(&dss, &http::HeaderMap::new(), at).unwrap_err();
        assert_eq!(missing.code(), "missing_authorization");

        let no_id = SigningKey::Hmac {
            key_id: None,
            secret: HmacKey::from_bytes(*b"ribos0me"),
        };
        let refused = dss.sign(
            b"{}",
            Signer {
                key: &no_id,
                ..signer
            },
        );
        assert_eq!(refused.unwrap_err().code(), "unsignable");
    }
}
