//! The fuzz targets' bodies for the webhook signature schemes ([`relay_core::schemes`]), shared
//! with the test that replays their seeds and regressions on the stable toolchain.
//!
//! Each reads header lines (`Name: value`) up to an empty line, then the body, and must never
//! panic. Each asserts that a request is accepted only when it carries the signature the
//! sender's key makes over what the scheme signs, computed apart from the verifier (the HMAC of
//! the signed content, as GitHub or Shopify would sign it as a body), that an accepted request's
//! [`Proof`] is what its headers say, that verifying answers the same twice, that a changed body
//! is refused, and that every refusal has one of the stable codes. Each also signs the body with
//! the scheme's own `sign` and checks that this verifies.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use relay_core::schemes::GITHUB;
use relay_core::schemes::SHOPIFY;
use relay_core::schemes::slack::Slack;
use relay_core::schemes::standard_webhooks::{StandardWebhooks, secret_bytes};
use relay_core::schemes::stripe::Stripe;
use relay_core::schemes::{
    Check, DEFAULT_WINDOW, Ed25519SigningKey, HmacKey, Proof, Scheme, SchemeError, Secrets, Signer,
    SigningKey,
};
use relay_core::verify::{Secret, SignedRequest};

mod hmac_template;
mod rfc9421;
pub use hmac_template::hmac_template;
pub use rfc9421::rfc9421;

/// The codes [`Scheme::verify`] may answer (`wrong_key_type` and `unsignable` are a signer's).
const VERIFY_CODES: &str = "missing_signature missing_signed_header malformed_signature \
    duplicate_header invalid_header invalid_timestamp stale_timestamp future_timestamp \
    bad_signature unsupported_algorithm incomplete_signed_headers digest_mismatch \
    ambiguous_signed_value";

/// A secret no sender signs with, configured first (`old`), as during a rotation.
const OLD: &str = "not the sender's secret";
/// The delivery id the targets' own signatures carry.
const DELIVERY: &str = "msg_fuzz_delivery";
/// Every request's method and target: RFC 9421 Appendix B.2's test request.
const TARGET: &str = "/foo?param=Value&Pet=dog";

// The senders' example secrets and instants, as in crates/relay-core/tests/data/schemes/.
const STRIPE_SECRET: &str = "whsec_test_secret";
const STRIPE_NOW: u64 = 1_700_000_000;
const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const SLACK_NOW: u64 = 1_531_420_618;
const WEBHOOKS_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const WEBHOOKS_NOW: u64 = 1_614_265_330;
const GITHUB_SECRET: &str = "It's a Secret to Everybody";
const SHOPIFY_SECRET: &str = "hush";
const RFC9421_NOW: u64 = 1_618_884_473;
/// RFC 9421 Appendix B.1.5's `test-shared-secret` (the fixture's base64, decoded).
const RFC9421_SHARED_SECRET: [u8; 64] = [
    187, 59, 201, 124, 30, 46, 220, 221, 9, 203, 132, 251, 53, 158, 249, 48, 53, 92, 175, 204, 210,
    76, 137, 222, 116, 155, 100, 129, 203, 184, 233, 133, 184, 92, 28, 179, 52, 152, 241, 5, 219,
    99, 82, 71, 73, 60, 27, 91, 152, 120, 72, 14, 46, 169, 114, 95, 35, 177, 171, 35, 149, 51, 45,
    13,
];
/// RFC 9421 Appendix B.1.4's `test-key-ed25519` private key (`d`), the ed25519 signer.
const ED25519_TEST_KEY: [u8; 32] = [
    159, 131, 98, 248, 122, 72, 74, 149, 78, 110, 116, 12, 91, 76, 14, 132, 34, 145, 57, 162, 10,
    168, 171, 86, 255, 102, 88, 111, 106, 125, 41, 197,
];
/// An RFC 9421 secret configured without a key id (accepted for any).
const ANY_ID_SECRET: &str = "accepted for any key id";

/// The proof of a scheme that signs a timestamp and no id, verified by the key named `current`:
/// `timestamp` is the one accepted, in seconds as sent.
fn signed_by_current_at(timestamp: &str) -> Proof {
    Proof {
        key_id: Some("current".into()),
        signed_at: Some(at(timestamp.parse().expect("an accepted timestamp"))),
        ..Proof::default()
    }
}

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// Header lines up to the first empty line (`\r\n` or `\n`), then the body. A line without `:`,
/// or whose name or value no header can have, is skipped; a repeated name is kept repeated.
fn split(data: &[u8]) -> (HeaderMap, &[u8]) {
    let mut headers = HeaderMap::new();
    let mut rest = data;
    while !rest.is_empty() {
        let (line, after) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &[][..]),
        };
        rest = after;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = HeaderName::from_bytes(&line[..colon]);
        let value = HeaderValue::from_bytes(line[colon + 1..].trim_ascii());
        if let (Ok(name), Ok(value)) = (name, value) {
            headers.append(name, value);
        }
    }
    (headers, rest)
}

/// A header's one value as text; none when it is absent, repeated or not visible ASCII.
fn one<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    match values.next() {
        Some(_) => None,
        None => value.to_str().ok(),
    }
}

/// The body with the low bit of its last byte flipped (one NUL byte for an empty body).
fn tampered(body: &[u8]) -> Vec<u8> {
    let mut changed = body.to_vec();
    match changed.last_mut() {
        Some(last) => *last ^= 1,
        None => changed.push(0),
    }
    changed
}

fn verify(
    scheme: &dyn Scheme,
    headers: &HeaderMap,
    body: &[u8],
    secrets: &Secrets,
    now: SystemTime,
) -> Result<Proof, SchemeError> {
    let uri = Uri::from_static(TARGET);
    let request = SignedRequest {
        method: &Method::POST,
        uri: &uri,
        headers,
        body,
    };
    scheme.verify(Check::new(&request, secrets, now))
}

/// Verifies: the same answer twice, a refusal with a stable code, and for an accepted request
/// a signed time within the window exactly when the scheme signs one, and, when `bound` (the
/// body is signed), the same headers with a changed body refused.
fn checked(
    scheme: &dyn Scheme,
    headers: &HeaderMap,
    body: &[u8],
    secrets: &Secrets,
    now: SystemTime,
    bound: bool,
) -> Option<Proof> {
    let result = verify(scheme, headers, body, secrets, now);
    let again = verify(scheme, headers, body, secrets, now);
    assert_eq!(result, again, "{scheme:?} answers twice differently");
    let proof = match result {
        Ok(proof) => proof,
        Err(error) => {
            assert!(
                VERIFY_CODES.split(' ').any(|c| c == error.code()),
                "{scheme:?}: {error:?}"
            );
            return None;
        }
    };
    if bound {
        let changed = verify(scheme, headers, &tampered(body), secrets, now);
        assert!(
            changed.is_err(),
            "{scheme:?} accepts a changed body: {changed:?}"
        );
    }
    match proof.signed_at {
        Some(t) => {
            assert!(
                scheme.has_timestamp(),
                "{scheme:?} proves a time it does not sign"
            );
            let distance = now.duration_since(t).unwrap_or_else(|e| e.duration());
            assert!(
                distance <= DEFAULT_WINDOW,
                "{scheme:?} accepts {t:?} at {now:?}"
            );
        }
        None => assert!(!scheme.has_timestamp(), "{scheme:?} proves no signed time"),
    }
    Some(proof)
}

fn hmac_key(secret: &HmacKey) -> SigningKey {
    SigningKey::Hmac {
        key_id: None,
        secret: secret.clone(),
    }
}

/// The hex HMAC-SHA256 of `content` with `key`: GitHub's signature of it as a body.
fn mac_hex(key: &HmacKey, content: &[u8]) -> String {
    let signed = GITHUB.sign(content, Signer::new(&hmac_key(key), at(0), None));
    let value = signed.expect("GitHub signs any body")[0].1.clone();
    let value = value.to_str().expect("a hex signature");
    value
        .strip_prefix("sha256=")
        .expect("its prefix")
        .to_owned()
}

/// The base64 HMAC-SHA256 of `content` with `key`: Shopify's signature of it as a body.
fn mac_base64(key: &HmacKey, content: &[u8]) -> String {
    let signed = SHOPIFY.sign(content, Signer::new(&hmac_key(key), at(0), None));
    let value = signed.expect("Shopify signs any body")[0].1.clone();
    value.to_str().expect("a base64 signature").to_owned()
}

/// The headers `signed` verify, with the key `key_id`, and not for a changed body; returned.
fn round_trip(
    scheme: &dyn Scheme,
    signed: Result<Vec<(HeaderName, HeaderValue)>, SchemeError>,
    secrets: &Secrets,
    body: &[u8],
    now: SystemTime,
    key_id: &str,
) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (header, value) in signed.unwrap_or_else(|e| panic!("{scheme:?} cannot sign: {e}")) {
        headers.append(header, value);
    }
    let proof = verify(scheme, &headers, body, secrets, now);
    let proof = proof.unwrap_or_else(|e| panic!("{scheme:?} refuses its own signature: {e}"));
    assert_eq!(proof.key_id.as_deref(), Some(key_id), "{scheme:?}");
    let changed = verify(scheme, &headers, &tampered(body), secrets, now);
    assert!(
        changed.is_err(),
        "{scheme:?} accepts its signature on another body"
    );
    headers
}

/// The old secret, then the sender's as `current`.
fn rotation(current: HmacKey) -> Secrets {
    Secrets::new()
        .with_hmac_id("old", Secret::new(OLD))
        .with_hmac_id("current", current)
}

/// `Stripe-Signature` (`t=…,v1=…`): accepted only with a `v1` that is the key's HMAC of
/// `{t}.{body}` (hex, any case), proving `t` and the key `current` and nothing else.
pub fn stripe_signature(data: &[u8]) {
    check_stripe(data);
}

fn check_stripe(data: &[u8]) -> bool {
    let (headers, body) = split(data);
    let (scheme, now) = (Stripe::default(), at(STRIPE_NOW));
    let key = HmacKey::from(Secret::new(STRIPE_SECRET));
    let secrets = rotation(key.clone());
    let content = |t: &str| [t.as_bytes(), b".", body].concat();
    let own = scheme.sign(body, Signer::new(&hmac_key(&key), now, None));
    let own = round_trip(&scheme, own, &secrets, body, now, "current");
    let expected = mac_hex(&key, &content(&STRIPE_NOW.to_string()));
    assert_eq!(
        own["stripe-signature"],
        format!("t={STRIPE_NOW},v1={expected}")
    );
    let Some(proof) = checked(&scheme, &headers, body, &secrets, now, true) else {
        return false;
    };
    let value = one(&headers, "stripe-signature").expect("an accepted header");
    let pairs: Vec<_> = value
        .split(',')
        .filter_map(|p| p.trim().split_once('='))
        .collect();
    let t = pairs.iter().find(|p| p.0 == "t").expect("an accepted t").1;
    let mac = mac_hex(&key, &content(t));
    let signed = pairs
        .iter()
        .any(|&(name, v)| name == "v1" && v.eq_ignore_ascii_case(&mac));
    assert!(signed, "accepted without the key's v1: {value}");
    assert_eq!(proof, signed_by_current_at(t), "{value}");
    true
}

/// `X-Slack-Signature` and `X-Slack-Request-Timestamp`: accepted only with `v0=` and the key's
/// HMAC of `v0:{timestamp}:{body}` (hex, any case), the timestamp as sent.
pub fn slack(data: &[u8]) {
    check_slack(data);
}

fn check_slack(data: &[u8]) -> bool {
    let (headers, body) = split(data);
    let (scheme, now) = (Slack::default(), at(SLACK_NOW));
    let key = HmacKey::from(Secret::new(SLACK_SECRET));
    let secrets = rotation(key.clone());
    let content = |ts: &str| [b"v0:", ts.as_bytes(), b":", body].concat();
    let own = scheme.sign(body, Signer::new(&hmac_key(&key), now, None));
    let own = round_trip(&scheme, own, &secrets, body, now, "current");
    let expected = mac_hex(&key, &content(&SLACK_NOW.to_string()));
    assert_eq!(own["x-slack-signature"], format!("v0={expected}"));
    let Some(proof) = checked(&scheme, &headers, body, &secrets, now, true) else {
        return false;
    };
    let value = one(&headers, "x-slack-signature").expect("an accepted signature");
    let ts = one(&headers, "x-slack-request-timestamp").expect("an accepted timestamp");
    let hex = value.strip_prefix("v0=").expect("an accepted v0=");
    let mac = mac_hex(&key, &content(ts));
    assert!(hex.eq_ignore_ascii_case(&mac), "not the key's: {value}");
    assert_eq!(proof, signed_by_current_at(ts), "{ts}");
    true
}

/// Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`): accepted only
/// with a `v1,` that is the `whsec_` key's HMAC of `{id}.{timestamp}.{body}` (base64), or a
/// `v1a,` that is the test key's ed25519 signature of it, proving the id and the timestamp.
pub fn standard_webhooks(data: &[u8]) {
    check_standard_webhooks(data);
}

fn check_standard_webhooks(data: &[u8]) -> bool {
    let (headers, body) = split(data);
    let (scheme, now) = (StandardWebhooks::default(), at(WEBHOOKS_NOW));
    let secret = HmacKey::from(Secret::new(WEBHOOKS_SECRET));
    let key = HmacKey::from_bytes(secret_bytes(&secret).expect("a whsec_ secret"));
    let ed25519 = Ed25519SigningKey::from_bytes(&ED25519_TEST_KEY);
    let secrets = Secrets::new()
        .with_hmac_id("old", Secret::new("whsec_b2xkLXNlY3JldA=="))
        .with_hmac_id("current", secret.clone())
        .with_ed25519_id("ed25519", ed25519.verifying_key());
    let content = |id: &str, ts: &str| [id.as_bytes(), b".", ts.as_bytes(), b".", body].concat();
    let own = scheme.sign(body, Signer::new(&hmac_key(&secret), now, Some(DELIVERY)));
    let own = round_trip(&scheme, own, &secrets, body, now, "current");
    let expected = mac_base64(&key, &content(DELIVERY, &WEBHOOKS_NOW.to_string()));
    assert_eq!(own["webhook-signature"], format!("v1,{expected}"));
    let signer = SigningKey::Ed25519 {
        key_id: None,
        key: ed25519,
    };
    let own = scheme.sign(body, Signer::new(&signer, now, Some(DELIVERY)));
    round_trip(&scheme, own, &secrets, body, now, "ed25519");
    let Some(proof) = checked(&scheme, &headers, body, &secrets, now, true) else {
        return false;
    };
    let id = one(&headers, "webhook-id").expect("an accepted id");
    let ts = one(&headers, "webhook-timestamp").expect("an accepted timestamp");
    let value = one(&headers, "webhook-signature").expect("an accepted signature");
    let signed_at = at(ts.parse().expect("an accepted timestamp"));
    let expected = match proof.key_id.as_deref() {
        Some("current") => format!("v1,{}", mac_base64(&key, &content(id, ts))),
        Some("ed25519") => {
            // ed25519 signs deterministically: the test key's one signature of this content,
            // with the timestamp written as `sign` writes it.
            let signed = scheme.sign(body, Signer::new(&signer, signed_at, Some(id)));
            let signed = signed.expect("the test key signs any request");
            let signature = signed.iter().find(|h| h.0 == "webhook-signature");
            let signature = signature.expect("a signature").1.to_str();
            signature.expect("a visible signature").to_owned()
        }
        other => panic!("accepted with the key {other:?}: {value}"),
    };
    let carried = value.split_ascii_whitespace().any(|s| s == expected);
    assert!(carried, "accepted without {expected}: {value}");
    let proof_is = Proof {
        key_id: proof.key_id.clone(),
        delivery_id: Some(id.to_owned()),
        event_type: None,
        signed_at: Some(signed_at),
    };
    assert_eq!(proof, proof_is, "{value}");
    true
}

/// GitHub's `X-Hub-Signature-256` and Shopify's `X-Shopify-Hmac-Sha256`: accepted only with the
/// key's HMAC of the body (`sha256=` and hex in any case; base64), proving the key `current`
/// and the delivery id and event type headers as sent.
pub fn body_hmac(data: &[u8]) {
    check_body_hmac(data);
}

fn check_body_hmac(data: &[u8]) -> bool {
    let (headers, body) = split(data);
    let now = at(STRIPE_NOW);
    let github: (&dyn Scheme, _, _, _, _, _) = (
        &GITHUB,
        GITHUB_SECRET,
        "x-hub-signature-256",
        "sha256=",
        "x-github-delivery",
        "x-github-event",
    );
    let shopify: (&dyn Scheme, _, _, _, _, _) = (
        &SHOPIFY,
        SHOPIFY_SECRET,
        "x-shopify-hmac-sha256",
        "",
        "x-shopify-webhook-id",
        "x-shopify-topic",
    );
    let mut accepted = false;
    for (scheme, secret, signature, prefix, delivery, event) in [github, shopify] {
        let key = HmacKey::from(Secret::new(secret));
        let secrets = rotation(key.clone());
        let own = scheme.sign(body, Signer::new(&hmac_key(&key), now, Some(DELIVERY)));
        round_trip(scheme, own, &secrets, body, now, "current");
        let Some(proof) = checked(scheme, &headers, body, &secrets, now, true) else {
            continue;
        };
        let value = one(&headers, signature).expect("an accepted signature");
        let encoded = value.strip_prefix(prefix).expect("an accepted prefix");
        let signed = match prefix {
            "" => encoded == mac_base64(&key, body),
            _ => encoded.eq_ignore_ascii_case(&mac_hex(&key, body)),
        };
        assert!(signed, "{scheme:?} accepts {value}");
        let proof_is = Proof {
            key_id: Some("current".into()),
            delivery_id: one(&headers, delivery).map(str::to_owned),
            event_type: one(&headers, event).map(str::to_owned),
            signed_at: None,
        };
        assert_eq!(proof, proof_is, "{scheme:?}");
        accepted = true;
    }
    accepted
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    type Check = fn(&[u8]) -> bool;

    const CHECKS: [(&str, Check); 6] = [
        ("stripe_signature", super::check_stripe),
        ("standard_webhooks", super::check_standard_webhooks),
        ("rfc9421", super::rfc9421::check_rfc9421),
        ("slack", super::check_slack),
        ("body_hmac", super::check_body_hmac),
        ("hmac_template", super::hmac_template::check_hmac_template),
    ];

    /// Each seed answers as its name says, `valid-…` accepted and `refused-…` refused, so that
    /// the checks on accepted requests run from the first input.
    #[test]
    fn every_scheme_seed_is_accepted_or_refused_as_named() {
        let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
        for (target, check) in CHECKS {
            let mut valid = 0;
            for entry in std::fs::read_dir(seeds.join(target)).expect("a seed folder") {
                let path = entry.expect("a readable folder").path();
                let name = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default();
                let accepted = name.starts_with("valid-");
                assert!(accepted || name.starts_with("refused-"), "{target}/{name}");
                let data = std::fs::read(&path).expect("a readable seed");
                assert_eq!(check(&data), accepted, "{target}/{name}");
                valid += usize::from(accepted);
            }
            assert!(valid > 0, "no valid-… seed for {target}");
        }
    }
}
