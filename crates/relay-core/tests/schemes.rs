//! Each signature scheme against its sender's own published example (fixtures under
//! tests/data/schemes/, with where each came from), and each refusing a tampered body, a stale
//! timestamp and a wrong key.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD as BASE64, URL_SAFE_NO_PAD as BASE64URL};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use relay_core::schemes::GITHUB;
use relay_core::schemes::SHOPIFY;
use relay_core::schemes::hmac::{Encoding, GenericHmac, HmacConfig};
use relay_core::schemes::rfc9421::Rfc9421;
use relay_core::schemes::slack::Slack;
use relay_core::schemes::standard_webhooks::StandardWebhooks;
use relay_core::schemes::stripe::Stripe;
use relay_core::schemes::{
    Check, Ed25519SigningKey, Ed25519VerifyingKey, HmacKey, Proof, Scheme, SchemeError, Secrets,
    Signer, SigningKey, Window,
};
use relay_core::verify::{Secret, SignedRequest};
use serde_json::Value;

/// A request as a fixture describes it.
struct Fixture {
    json: Value,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Vec<u8>,
    now: SystemTime,
}

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn fixture(scheme: &str) -> Fixture {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests/data/schemes",
        scheme,
        "vector.json",
    ]
    .iter()
    .collect();
    let json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let request = json.get("request").unwrap_or(&json);
    let mut headers = HeaderMap::new();
    for (name, value) in request["headers"].as_object().unwrap() {
        headers.insert(
            HeaderName::try_from(name.as_str()).unwrap(),
            HeaderValue::try_from(value.as_str().unwrap()).unwrap(),
        );
    }
    Fixture {
        method: Method::try_from(request["method"].as_str().unwrap_or("POST")).unwrap(),
        uri: Uri::try_from(request["uri"].as_str().unwrap_or("/")).unwrap(),
        body: request["body"].as_str().unwrap().as_bytes().to_vec(),
        now: at(request["now"].as_u64().unwrap()),
        headers,
        json,
    }
}

impl Fixture {
    fn secret(&self) -> Secrets {
        Secrets::new().with_hmac(Secret::new(self.json["secret"].as_str().unwrap()))
    }

    fn check(
        &self,
        scheme: &dyn Scheme,
        secrets: &Secrets,
        now: SystemTime,
    ) -> Result<Proof, SchemeError> {
        self.check_body(scheme, secrets, now, &self.body)
    }

    fn check_body(
        &self,
        scheme: &dyn Scheme,
        secrets: &Secrets,
        now: SystemTime,
        body: &[u8],
    ) -> Result<Proof, SchemeError> {
        let request = SignedRequest {
            method: &self.method,
            uri: &self.uri,
            headers: &self.headers,
            body,
        };
        scheme.verify(Check::new(&request, secrets, now))
    }

    fn tampered(&self) -> Vec<u8> {
        let mut body = self.body.clone();
        body.push(b' ');
        body
    }

    /// The body with one byte added does not verify with the fixture's secret, nor the body
    /// with another secret.
    fn refuses_forgeries(&self, scheme: &dyn Scheme) {
        let changed = self.check_body(scheme, &self.secret(), self.now, &self.tampered());
        assert_eq!(changed, Err(SchemeError::BadSignature), "{scheme:?}");
        let other = self.check(scheme, &wrong_key(), self.now);
        assert_eq!(other, Err(SchemeError::BadSignature), "{scheme:?}");
    }

    /// Verifies with the fixture's secret at its time (with that time as the signing time where
    /// the scheme signs one), refuses forgeries and, where timed, keeps its window.
    fn verifies(&self, scheme: &dyn Scheme) -> Proof {
        let proof = self.check(scheme, &self.secret(), self.now);
        let proof = proof.unwrap_or_else(|e| panic!("{scheme:?}: {e}"));
        let signed_at = scheme.has_timestamp().then_some(self.now);
        assert_eq!(proof.signed_at, signed_at, "{scheme:?}");
        self.refuses_forgeries(scheme);
        if scheme.has_timestamp() {
            self.keeps_its_window(scheme);
        }
        proof
    }

    /// Checked with `secrets` (another sender's, or the key under another id), it is refused as
    /// a bad signature.
    fn refused_with(&self, scheme: &dyn Scheme, secrets: &Secrets) {
        let refused = self.check(scheme, secrets, self.now);
        assert_eq!(refused, Err(SchemeError::BadSignature), "{scheme:?}");
    }

    /// [`verifies`](Self::verifies), the proof carrying the delivery id `id`.
    fn verifies_with_id(&self, scheme: &dyn Scheme, id: &str) -> Proof {
        let proof = self.verifies(scheme);
        assert_eq!(proof.delivery_id.as_deref(), Some(id), "{scheme:?}");
        proof
    }

    /// Checked more than the window after or before it was signed, it is refused as stale, or
    /// as from the future.
    fn keeps_its_window(&self, scheme: &dyn Scheme) {
        let (secret, now) = (self.secret(), self.now);
        let late = self.check(scheme, &secret, now + STALE);
        assert_eq!(late, Err(SchemeError::StaleTimestamp), "{scheme:?}");
        let early = self.check(scheme, &secret, now - STALE);
        assert_eq!(early, Err(SchemeError::FutureTimestamp), "{scheme:?}");
    }
}

fn wrong_key() -> Secrets {
    Secrets::new().with_hmac(Secret::new("not the sender's secret"))
}

const STALE: Duration = Duration::from_secs(301);

/// [`round_trip`] with the HMAC secret `secret`.
fn hmac_round_trip(scheme: &dyn Scheme, secret: &str) {
    let key = SigningKey::Hmac {
        key_id: None,
        secret: HmacKey::from(Secret::new(secret)),
    };
    round_trip(scheme, key, &Secrets::new().with_hmac(Secret::new(secret)));
}

/// Signs with the scheme's own `sign` and checks the result verifies, and a tampered body not.
fn round_trip(scheme: &dyn Scheme, key: SigningKey, secrets: &Secrets) {
    let body = br#"{"event":"ping"}"#;
    let now = at(1_700_000_000);
    let (method, uri) = (Method::POST, Uri::from_static("/hook"));
    let headers = relay_testkit::requests::scheme_headers(
        scheme,
        "/hook",
        body,
        &key,
        now,
        Some("delivery-1"),
    );
    let request = |body: &'static [u8]| SignedRequest {
        method: &method,
        uri: &uri,
        headers: &headers,
        body,
    };
    let proof = scheme
        .verify(Check::new(&request(body), secrets, now))
        .unwrap();
    assert_eq!(
        proof.signed_at.is_some(),
        scheme.has_timestamp(),
        "{scheme:?}"
    );
    assert!(
        scheme
            .verify(Check::new(&request(br#"{"event":"pong"}"#), secrets, now))
            .is_err()
    );
}

/// GitHub, Slack and Stripe each verify their documented example (and refuse it forged, stale or
/// outside the window), and verify what the relay signs for them.
#[test]
fn github_slack_and_stripe_verify_their_documented_examples() {
    assert!(!GITHUB.has_timestamp(), "GitHub signs no timestamp");
    let (slack, stripe) = (Slack::default(), Stripe::default());
    let senders: [(&str, &dyn Scheme); 3] =
        [("github", &GITHUB), ("slack", &slack), ("stripe", &stripe)];
    for (name, scheme) in senders {
        fixture(name).verifies(scheme);
        hmac_round_trip(scheme, "s");
    }
}

#[test]
fn slacks_window_is_configurable() {
    let f = fixture("slack");
    let wide = Slack {
        window: Window(Duration::from_secs(600)),
    };
    assert!(
        f.check(&wide, &f.secret(), f.now + STALE).is_ok(),
        "the window is configurable"
    );
}

#[test]
fn stripe_verifies_its_librarys_rotation_header_and_ignores_v0() {
    let f = fixture("stripe");
    let stripe = Stripe::default();
    // Rotation on the sending side: the header carries the old secret's v1 first, then the new
    // one's, so an endpoint still holding only the old secret verifies too.
    let old = Secret::new(f.json["old_secret"].as_str().unwrap());
    let previous = Secrets::new().with_hmac_id("previous", old);
    assert_eq!(
        f.check(&stripe, &previous, f.now)
            .unwrap()
            .key_id
            .as_deref(),
        Some("previous")
    );
    // Rotation on the receiving side: the old and the new secret, either one verifying.
    let new = Secret::new(f.json["secret"].as_str().unwrap());
    let both = wrong_key().with_hmac_id("current", new);
    assert_eq!(
        f.check(&stripe, &both, f.now).unwrap().key_id.as_deref(),
        Some("current")
    );
    // A `v0` (the value in Stripe's docs' example header) is another scheme, ignored.
    let mut with_v0 = fixture("stripe");
    let header = with_v0.headers["stripe-signature"]
        .to_str()
        .unwrap()
        .to_owned();
    with_v0.headers.insert(
        "stripe-signature",
        HeaderValue::try_from(format!(
            "{header},v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39"
        ))
        .unwrap(),
    );
    assert!(with_v0.check(&stripe, &f.secret(), f.now).is_ok());
}

#[test]
fn shopify_verifies_a_body_signature_its_library_accepts() {
    let f = fixture("shopify");
    let proof = f.verifies_with_id(&SHOPIFY, "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043");
    assert_eq!(proof.event_type.as_deref(), Some("orders/create"));
    assert!(!SHOPIFY.has_timestamp(), "Shopify signs no timestamp");
    hmac_round_trip(&SHOPIFY, "s");
}

/// The Standard Webhooks vector `name`: verified with its message id `id`, and refused under
/// another endpoint's secret.
fn standard_webhooks_vector(name: &str, id: &str) -> Fixture {
    let f = fixture(name);
    f.verifies_with_id(&StandardWebhooks::default(), id);
    let other = Secrets::new().with_hmac(Secret::new("whsec_YW5vdGhlciBlbmRwb2ludA=="));
    f.refused_with(&StandardWebhooks::default(), &other);
    f
}

#[test]
fn standard_webhooks_verifies_the_reference_vector() {
    standard_webhooks_vector("standard_webhooks", "msg_p5jXN8AQM9LWM0D4loKWxJek");
    hmac_round_trip(&StandardWebhooks::default(), "whsec_c2VjcmV0");
}

/// A vector signed by the `standardwebhooks` Python library: a non-ASCII body and two `v1`
/// signatures, a rotated-out secret's first.
#[test]
fn standard_webhooks_verifies_its_librarys_rotation_vector() {
    let f = standard_webhooks_vector(
        "standard_webhooks_python",
        "msg_2zYvVhXG8pTqK4mR1nJcLw6bE0a",
    );
    let sw = StandardWebhooks::default();
    assert!(!f.body.is_ascii(), "the body is signed as its UTF-8 bytes");
    let old = Secret::new(f.json["old_secret"].as_str().unwrap());
    let previous = Secrets::new().with_hmac_id("previous", old);
    assert_eq!(
        f.check(&sw, &previous, f.now).unwrap().key_id.as_deref(),
        Some("previous")
    );
}

#[test]
fn standard_webhooks_v1a_signs_and_verifies_with_ed25519() {
    let (signing, verifying) = ed25519_test_key();
    let key = SigningKey::Ed25519 {
        key_id: None,
        key: signing,
    };
    round_trip(
        &StandardWebhooks::default(),
        key.clone(),
        &Secrets::new().with_ed25519(verifying),
    );
    let other = Ed25519SigningKey::from_bytes(&[7; 32]).verifying_key();
    let body = b"{}";
    let mut headers = HeaderMap::new();
    for (n, v) in StandardWebhooks::default()
        .sign(body, Signer::new(&key, at(100), Some("m")))
        .unwrap()
    {
        headers.insert(n, v);
    }
    let others = Secrets::new().with_ed25519(other);
    assert_eq!(
        posted(
            &StandardWebhooks::default(),
            (&headers, body),
            &others,
            at(100)
        ),
        Err(SchemeError::BadSignature)
    );
}

/// RFC 9421 Appendix B.1.4's `test-key-ed25519`.
fn ed25519_test_key() -> (Ed25519SigningKey, Ed25519VerifyingKey) {
    let f = fixture("rfc9421");
    let d = BASE64URL
        .decode(
            f.json["test_key_ed25519_private_d_base64url"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
    let x = BASE64URL
        .decode(
            f.json["test_key_ed25519_public_x_base64url"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
    let signing = Ed25519SigningKey::from_bytes(&d.try_into().unwrap());
    let verifying = Ed25519VerifyingKey::from_bytes(&x.try_into().unwrap()).unwrap();
    assert_eq!(signing.verifying_key(), verifying);
    (signing, verifying)
}

fn rfc_fixture(case: &str) -> Fixture {
    let mut f = fixture("rfc9421");
    for name in ["signature-input", "signature"] {
        let value = f.json[case][name].as_str().unwrap().to_owned();
        f.headers.insert(
            HeaderName::from_static(name),
            HeaderValue::try_from(value).unwrap(),
        );
    }
    f
}

fn rfc_shared_secret(f: &Fixture) -> HmacKey {
    HmacKey::from_bytes(
        BASE64
            .decode(f.json["test_shared_secret_base64"].as_str().unwrap())
            .unwrap(),
    )
}

/// The Appendix B vectors do not cover `content-digest`, so they verify only with no
/// component required.
fn rfc_vectors_scheme() -> Rfc9421 {
    Rfc9421 {
        required: Vec::new(),
        ..Rfc9421::default()
    }
}

#[test]
fn rfc9421_verifies_appendix_b_2_5_hmac_sha256() {
    let f = rfc_fixture("b25");
    let scheme = rfc_vectors_scheme();
    let secrets = Secrets::new().with_hmac_id("test-shared-secret", rfc_shared_secret(&f));
    let proof = f.check(&scheme, &secrets, f.now).unwrap();
    assert_eq!(proof.key_id.as_deref(), Some("test-shared-secret"));
    assert_eq!(
        f.check(&scheme, &secrets, f.now + STALE),
        Err(SchemeError::StaleTimestamp)
    );
    f.refused_with(&scheme, &wrong_key());
    // An unknown key id answers exactly as a bad signature.
    let elsewhere = Secrets::new().with_hmac_id("another-key", rfc_shared_secret(&f));
    f.refused_with(&scheme, &elsewhere);
    // By default the method, the path and the body (through content-digest) must be
    // covered: B.2.5 covers none of them.
    assert_eq!(
        f.check(&Rfc9421::default(), &secrets, f.now),
        Err(SchemeError::IncompleteCoverage("@method".into()))
    );
    let digest_only = Rfc9421 {
        required: vec!["content-digest".into()],
        ..Rfc9421::default()
    };
    assert_eq!(
        f.check(&digest_only, &secrets, f.now),
        Err(SchemeError::IncompleteCoverage("content-digest".into()))
    );
}

#[test]
fn rfc9421_verifies_appendix_b_2_6_ed25519() {
    let f = rfc_fixture("b26");
    let scheme = rfc_vectors_scheme();
    let (_, public) = ed25519_test_key();
    let secrets = Secrets::new().with_ed25519_id("test-key-ed25519", public);
    let proof = f.check(&scheme, &secrets, f.now).unwrap();
    assert_eq!(proof.key_id.as_deref(), Some("test-key-ed25519"));
    assert_eq!(
        f.check(&scheme, &secrets, f.now + STALE),
        Err(SchemeError::StaleTimestamp)
    );
    let other = Ed25519SigningKey::from_bytes(&[7; 32]).verifying_key();
    f.refused_with(
        &scheme,
        &Secrets::new().with_ed25519_id("test-key-ed25519", other),
    );
    let unknown = Secrets::new().with_ed25519_id("someone-else", public);
    f.refused_with(&scheme, &unknown);
}

#[test]
fn rfc9421_covers_the_body_through_content_digest() {
    let f = fixture("rfc9421");
    // The Appendix B request's own Content-Digest (sha-512) matches its body.
    let (signing, public) = ed25519_test_key();
    let key = SigningKey::Ed25519 {
        key_id: Some("test-key-ed25519".into()),
        key: signing,
    };
    round_trip(
        &Rfc9421::default(),
        key,
        &Secrets::new().with_ed25519_id("test-key-ed25519", public),
    );
    let hkey = SigningKey::Hmac {
        key_id: Some("test-shared-secret".into()),
        secret: rfc_shared_secret(&f),
    };
    let secrets = Secrets::new().with_hmac_id("test-shared-secret", rfc_shared_secret(&f));
    round_trip(&Rfc9421::default(), hkey.clone(), &secrets);
    let body = b"{}";
    let (method, uri) = (Method::POST, Uri::from_static("/"));
    let headers = relay_testkit::requests::scheme_headers(
        &Rfc9421::default(),
        "/",
        body,
        &hkey,
        at(1_000),
        None,
    );
    let request = |body: &'static [u8]| SignedRequest {
        method: &method,
        uri: &uri,
        headers: &headers,
        body,
    };
    assert_eq!(
        Rfc9421::default().verify(Check::new(&request(b"[]"), &secrets, at(1_000))),
        Err(SchemeError::DigestMismatch)
    );
    assert_eq!(
        Rfc9421::default().verify(Check::new(&request(body), &secrets, at(1_301))),
        Err(SchemeError::StaleTimestamp)
    );
}

/// The generic scheme, configured as Slack and as GitHub, verifies their published examples.
#[test]
fn generic_hmac_verifies_slack_and_github_examples() {
    let slack = GenericHmac::new(HmacConfig {
        header: "x-slack-signature".into(),
        prefix: Some("v0=".into()),
        encoding: Encoding::Hex,
        template: "v0:{timestamp}:{body}".into(),
        timestamp_header: Some("x-slack-request-timestamp".into()),
        id_header: None,
        window: Window::default(),
    })
    .unwrap();
    let f = fixture("slack");
    assert!(slack.has_timestamp());
    f.verifies(&slack);

    let github = GenericHmac::new(HmacConfig {
        prefix: Some("sha256=".into()),
        ..HmacConfig::body_only("x-hub-signature-256")
    })
    .unwrap();
    let f = fixture("github");
    assert!(!github.has_timestamp());
    f.verifies(&github);

    let shopify = GenericHmac::new(HmacConfig {
        encoding: Encoding::Base64,
        id_header: Some("x-shopify-webhook-id".into()),
        ..HmacConfig::body_only("x-shopify-hmac-sha256")
    })
    .unwrap();
    let f = fixture("shopify");
    f.verifies(&shopify);
    hmac_round_trip(&slack, "s");
}

/// Malformed headers of every scheme answer a typed error, never a panic.
#[test]
fn malformed_headers_never_panic() {
    let schemes: Vec<(Box<dyn Scheme>, &[&str])> = vec![
        (Box::new(GITHUB), &["x-hub-signature-256"]),
        (Box::new(SHOPIFY), &["x-shopify-hmac-sha256"]),
        (
            Box::new(Slack::default()),
            &["x-slack-signature", "x-slack-request-timestamp"],
        ),
        (Box::new(Stripe::default()), &["stripe-signature"]),
        (
            Box::new(StandardWebhooks::default()),
            &["webhook-signature", "webhook-id", "webhook-timestamp"],
        ),
        (
            Box::new(Rfc9421::default()),
            &["signature", "signature-input", "content-digest"],
        ),
    ];
    let values = [
        "",
        "=",
        ",",
        "sha256=",
        "sha256=zz",
        "v0=",
        "t=,v1=",
        "t=99999999999999999999,v1=00",
        "v1,",
        "v1a,AAAA",
        "sig1=:AAAA:",
        "sig1=(\"@method\");created=1",
        "sig1=(",
        "\"",
        "(((((",
        "sig1=(\"@status\");created=1",
        "sig1=(\"a b\");created=1",
        "sha-256=:AAAA:",
        "sha-1=:AAAA:",
        "t=1,v1=00,v1=00,v1=00",
    ];
    let secrets = Secrets::new().with_hmac(Secret::new("k"));
    for (scheme, names) in &schemes {
        for value in values {
            let mut headers = HeaderMap::new();
            for name in *names {
                headers.insert(
                    HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                );
            }
            let verified = posted(scheme.as_ref(), (&headers, b"x"), &secrets, at(1));
            assert!(verified.is_err(), "{scheme:?} {value:?}");
        }
        let mut headers = HeaderMap::new();
        headers.append(
            HeaderName::from_static(names[0]),
            HeaderValue::from_static("a"),
        );
        headers.append(
            HeaderName::from_static(names[0]),
            HeaderValue::from_static("b"),
        );
        let verified = posted(scheme.as_ref(), (&headers, b"x"), &secrets, at(1));
        assert_eq!(
            verified.unwrap_err().code(),
            "duplicate_header",
            "{scheme:?}"
        );
    }
}

/// What `scheme` answers a `POST /` with `headers` and `body`, checked with `secrets` at `now`.
fn posted(
    scheme: &dyn Scheme,
    (headers, body): (&HeaderMap, &[u8]),
    secrets: &Secrets,
    now: SystemTime,
) -> Result<Proof, SchemeError> {
    let (method, uri) = (Method::POST, Uri::from_static("/"));
    let request = SignedRequest {
        method: &method,
        uri: &uri,
        headers,
        body,
    };
    scheme.verify(Check::new(&request, secrets, now))
}

proptest::proptest! {
    /// Whatever a sender writes in the headers a scheme reads, it answers, never panics.
    #[test]
    fn arbitrary_headers_never_panic(a in "\\PC{0,80}", b in "[ -~]{0,80}", c in "[0-9]{0,14}") {
        let schemes: Vec<Box<dyn Scheme>> = vec![
            Box::new(GITHUB),
            Box::new(SHOPIFY),
            Box::new(Slack::default()),
            Box::new(Stripe::default()),
            Box::new(StandardWebhooks::default()),
            Box::new(Rfc9421::default()),
        ];
        let names = [
            "x-hub-signature-256", "x-shopify-hmac-sha256", "x-slack-signature", "stripe-signature",
            "webhook-signature", "signature", "signature-input", "content-digest",
        ];
        let mut headers = HeaderMap::new();
        for (n, name) in names.iter().enumerate() {
            let value = if n % 2 == 0 { &a } else { &b };
            if let Ok(value) = HeaderValue::try_from(value.as_str()) {
                headers.insert(HeaderName::from_static(name), value);
            }
        }
        for name in ["x-slack-request-timestamp", "webhook-timestamp", "webhook-id"] {
            headers.insert(HeaderName::from_static(name), HeaderValue::try_from(c.as_str()).unwrap());
        }
        let secrets = Secrets::new().with_hmac(Secret::new("k"));
        for scheme in &schemes {
            let _ = posted(scheme.as_ref(), (&headers, b"x"), &secrets, at(1_700_000_000));
        }
    }
}

/// As the reference libraries read `webhook-signature`: an entry that cannot be a signature (not
/// base64, a `v1a` of the wrong length) is skipped and another may verify, and a secret whose
/// base64 lost its padding still works.
#[test]
fn standard_webhooks_reads_entries_and_secrets_as_its_libraries_do() {
    let mut f = fixture("standard_webhooks");
    let sw = StandardWebhooks::default();
    let good = f.headers["webhook-signature"].to_str().unwrap().to_owned();
    f.headers.insert(
        "webhook-signature",
        HeaderValue::try_from(format!("v1a,AAAA v1,not*base64 {good}")).unwrap(),
    );
    assert!(f.check(&sw, &f.secret(), f.now).is_ok());
    // Nothing that can be a signature: malformed.
    f.headers.insert(
        "webhook-signature",
        HeaderValue::from_static("v1a,AAAA v1,not*base64"),
    );
    assert!(matches!(
        f.check(&sw, &f.secret(), f.now),
        Err(SchemeError::MalformedSignature(_))
    ));
    // "secrets" is 7 bytes: its base64 ends with two `=`.
    let key = SigningKey::Hmac {
        key_id: None,
        secret: HmacKey::from(Secret::new("whsec_c2VjcmV0cw==")),
    };
    round_trip(
        &sw,
        key,
        &Secrets::new().with_hmac(Secret::new("whsec_c2VjcmV0cw")),
    );
}
