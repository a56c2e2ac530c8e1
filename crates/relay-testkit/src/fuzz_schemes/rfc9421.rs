//! The RFC 9421 target: the default required components, `content-digest` alone and none, and
//! the relay's own signatures of a request.

use http::HeaderMap;
use relay_core::schemes::rfc9421::{Rfc9421, content_digest};
use relay_core::schemes::{Ed25519SigningKey, HmacKey, Scheme, Secrets, Signer, SigningKey};
use relay_core::verify::{Secret, SignedRequest};

use super::{ANY_ID_SECRET, ED25519_TEST_KEY, OLD, RFC9421_NOW, RFC9421_SHARED_SECRET, TARGET};
use super::{at, checked, one, round_trip, split};

/// RFC 9421 (`Signature-Input`, `Signature`, `Content-Digest`), with the default required
/// components (`@method`, `@path`, `content-digest`), with `content-digest` alone, and with none
/// (as for Appendix B's vectors): whatever one accepts the looser ones do, and what requires
/// components covers them and refuses a changed body; the relay's own signatures of a request
/// verify under the default; an accepted request proves a configured key id or the `keyid` it
/// names, and no delivery id or event.
pub fn rfc9421(data: &[u8]) {
    check_rfc9421(data);
}

pub(super) fn check_rfc9421(data: &[u8]) -> bool {
    let (headers, body) = split(data);
    let now = at(RFC9421_NOW);
    let shared = HmacKey::from_bytes(RFC9421_SHARED_SECRET);
    let ed25519 = Ed25519SigningKey::from_bytes(&ED25519_TEST_KEY);
    let secrets = Secrets::new()
        .with_hmac_id("old", Secret::new(OLD))
        .with_hmac_id("test-shared-secret", shared.clone())
        .with_ed25519_id("test-key-ed25519", ed25519.verifying_key())
        .with_hmac(Secret::new(ANY_ID_SECRET));
    let default = Rfc9421::default();
    let required = Rfc9421 {
        required: vec!["content-digest".into()],
        ..Rfc9421::default()
    };
    let optional = Rfc9421 {
        required: Vec::new(),
        ..Rfc9421::default()
    };
    signs_and_verifies(&default, &required, shared, ed25519, &secrets, body);
    let strictest = checked(&default, &headers, body, &secrets, now, true);
    let strict = checked(&required, &headers, body, &secrets, now, true);
    if strictest.is_some() {
        assert!(
            strict.is_some(),
            "accepted only with @method and @path required"
        );
        let input = one(&headers, "signature-input").expect("an accepted Signature-Input");
        assert!(
            input.contains("\"@method\"") && input.contains("\"@path\""),
            "{input}"
        );
    }
    let loose = checked(&optional, &headers, body, &secrets, now, false);
    let input = one(&headers, "signature-input");
    if strict.is_some() {
        assert!(
            loose.is_some(),
            "accepted only when content-digest is required"
        );
        let input = input.expect("an accepted Signature-Input");
        assert!(input.contains("\"content-digest\""), "{input}");
    }
    let Some(proof) = strict.or(loose) else {
        return false;
    };
    let input = input.expect("an accepted Signature-Input");
    match proof.key_id.as_deref() {
        None | Some("test-shared-secret" | "test-key-ed25519") => {}
        Some(named) => {
            let quoted = named.replace('\\', "\\\\").replace('"', "\\\"");
            let keyid = format!("keyid=\"{quoted}\"");
            assert!(input.contains(&keyid), "proves {named:?}: {input}");
        }
    }
    assert_eq!((proof.delivery_id, proof.event_type), (None, None));
    true
}

/// What `required` (the digest only) and `default` (with the method and the path) sign for each
/// test key verifies, and carries the body's digest.
fn signs_and_verifies(
    default: &Rfc9421,
    required: &Rfc9421,
    shared: HmacKey,
    ed25519: Ed25519SigningKey,
    secrets: &Secrets,
    body: &[u8],
) {
    let now = at(RFC9421_NOW);
    let signers = [
        SigningKey::Hmac {
            key_id: Some("test-shared-secret".into()),
            secret: shared,
        },
        SigningKey::Ed25519 {
            key_id: Some("test-key-ed25519".into()),
            key: ed25519,
        },
    ];
    for (signer, id) in signers
        .iter()
        .zip(["test-shared-secret", "test-key-ed25519"])
    {
        let own = required.sign(body, Signer::new(signer, now, None));
        let own = round_trip(required, own, secrets, body, now, id);
        assert_eq!(own["content-digest"], content_digest(body));
        let uri = http::Uri::from_static(TARGET);
        let request = SignedRequest {
            method: &http::Method::POST,
            uri: &uri,
            headers: &HeaderMap::new(),
            body,
        };
        let own = default.sign_request(&request, Signer::new(signer, now, None));
        round_trip(default, own, secrets, body, now, id);
    }
}
