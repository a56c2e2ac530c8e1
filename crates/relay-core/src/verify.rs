//! Draft-cavage HTTP Signatures (`hmac-sha256` over `date digest`), exactly as the DSS signed.
//!
//! The DSS signed with `requests-http-signature` 0.0.3/0.1.0: the signing string is the listed
//! headers as `name: value` lines joined by `\n`, the key is the UTF-8 bytes of the subscription's
//! `hmac_secret_key`, and `Digest: SHA-256=<base64>` covers the raw body. Verification here is
//! stricter than the library's own `verify()`: `date` and `digest` must both be signed, the digest
//! is recomputed over the bytes received, the `Date` must be fresh, and the signature is compared
//! in constant time.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, KeyInit, Mac};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri, header};
use sha2::{Digest as _, Sha256};

/// The only algorithm the DSS used and the relay accepts.
pub(crate) const ALGORITHM: &str = "hmac-sha256";
/// The header list the DSS signed; both entries are required.
pub(crate) const SIGNED_HEADERS: &str = "date digest";
/// The draft-cavage `Digest` header.
pub(crate) const DIGEST: HeaderName = HeaderName::from_static("digest");
const SCHEME: &str = "Signature ";
const DIGEST_PREFIX: &str = "SHA-256=";

type HmacSha256 = Hmac<Sha256>;

/// A shared secret. Its `Debug` output never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret string; the HMAC key is its UTF-8 bytes, never base64-decoded.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The raw key bytes.
    pub(crate) fn expose(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl std::str::FromStr for Secret {
    type Err = crate::text::InvalidValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.is_empty() {
            true => Err("is set but empty".into()),
            false => Ok(Self::new(s)),
        }
    }
}

crate::text::deserialize_from_text!(Secret, "a non-empty secret");

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(****)")
    }
}

/// The keys the relay accepts: named keys for rotation, and optionally one key for any `keyId`.
#[derive(Clone, Debug, Default)]
pub struct KeyRing {
    named: BTreeMap<String, Secret>,
    any: Option<Secret>,
}

impl KeyRing {
    /// Builds a key ring from `keyId → secret` pairs and an optional catch-all secret.
    pub fn new(named: BTreeMap<String, Secret>, any: Option<Secret>) -> Self {
        Self { named, any }
    }

    /// True when no key at all is configured.
    pub fn is_empty(&self) -> bool {
        self.named.is_empty() && self.any.is_none()
    }

    /// The key ids with a dedicated secret, in sorted order.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.named.keys().map(String::as_str)
    }

    /// True when a single secret is accepted for any key id.
    pub fn has_catch_all(&self) -> bool {
        self.any.is_some()
    }

    /// Adds keys (from a secret store); a named key already present keeps its secret.
    pub fn extend(&mut self, named: BTreeMap<String, Secret>, any: Option<Secret>) {
        for (id, secret) in named {
            self.named.entry(id).or_insert(secret);
        }
        if self.any.is_none() {
            self.any = any;
        }
    }

    fn lookup(&self, key_id: &str) -> Option<&Secret> {
        self.named.get(key_id).or(self.any.as_ref())
    }
}

/// The relay's notion of "now", injectable so fixed-date captures can be verified.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock pinned to one instant (tests, and replaying captures).
#[derive(Clone, Copy, Debug)]
pub struct FixedClock(pub SystemTime);

impl Clock for FixedClock {
    fn now(&self) -> SystemTime {
        self.0
    }
}

/// What verification needs to know beyond the keys.
#[derive(Clone, Debug)]
pub struct Policy {
    /// Largest accepted distance between `Date` and the relay's clock; `None` turns it off.
    pub max_clock_skew: Option<Duration>,
    /// Accept requests that carry no `Authorization` header at all.
    pub allow_unsigned: bool,
}

/// Why a request's signature was rejected. Every variant answers 401.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// No `Authorization` header.
    #[error("the request has no Authorization header")]
    MissingAuthorization,
    /// `Authorization` does not use the `Signature` scheme exactly as the DSS sends it.
    #[error("the Authorization header does not use the \"Signature\" scheme")]
    UnsupportedScheme,
    /// The signature parameters cannot be parsed.
    #[error("the Signature parameters are malformed: {0}")]
    MalformedSignature(&'static str),
    /// An algorithm other than `hmac-sha256`.
    #[error("unsupported signature algorithm; only hmac-sha256 is accepted")]
    UnsupportedAlgorithm,
    /// The signed header list lacks `date` or `digest`.
    #[error("the signed headers must include both date and digest")]
    IncompleteSignedHeaders,
    /// A header named in the signed list is absent.
    #[error("the signed header {0} is missing")]
    MissingSignedHeader(String),
    /// A header used for verification appears more than once.
    #[error("the header {0} appears more than once")]
    DuplicateHeader(String),
    /// A header used for verification is not visible ASCII.
    #[error("the header {0} is not visible ASCII")]
    InvalidHeader(String),
    /// No key is configured for the `keyId`.
    #[error("unknown keyId")]
    UnknownKeyId,
    /// The HMAC does not match.
    #[error("the signature does not match")]
    BadSignature,
    /// `Digest` is not a `SHA-256=` digest.
    #[error("the Digest header must be SHA-256=<base64>")]
    UnsupportedDigest,
    /// `Digest` does not match the body received.
    #[error("the Digest header does not match the body")]
    DigestMismatch,
    /// `Date` is not an HTTP date.
    #[error("the Date header is not a valid HTTP date")]
    InvalidDate,
    /// `Date` is older than the allowed skew.
    #[error("the Date header is too old")]
    StaleDate,
    /// `Date` is further in the future than the allowed skew.
    #[error("the Date header is too far in the future")]
    FutureDate,
}

impl VerifyError {
    /// The stable error code returned in the response body.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MissingAuthorization => "missing_authorization",
            Self::UnsupportedScheme => "unsupported_scheme",
            Self::MalformedSignature(_) => "malformed_signature",
            Self::UnsupportedAlgorithm => "unsupported_algorithm",
            Self::IncompleteSignedHeaders => "incomplete_signed_headers",
            Self::MissingSignedHeader(_) => "missing_signed_header",
            Self::DuplicateHeader(_) => "duplicate_header",
            Self::InvalidHeader(_) => "invalid_header",
            Self::UnknownKeyId => "unknown_key_id",
            Self::BadSignature => "bad_signature",
            Self::UnsupportedDigest => "unsupported_digest",
            Self::DigestMismatch => "digest_mismatch",
            Self::InvalidDate => "invalid_date",
            Self::StaleDate => "stale_date",
            Self::FutureDate => "future_date",
        }
    }
}

/// The parsed `Authorization: Signature …` parameters.
#[derive(Debug, PartialEq, Eq)]
struct SignatureParams<'a> {
    key_id: &'a str,
    algorithm: &'a str,
    headers: &'a str,
    signature: &'a str,
}

impl<'a> SignatureParams<'a> {
    /// Parses `keyId="…",algorithm="…",headers="…",signature="…"`: comma-separated `name="value"`
    /// pairs, values double-quoted without escapes. Unknown parameters are ignored; a repeated
    /// parameter is rejected, since it would make the signature ambiguous.
    fn parse(value: &'a str) -> Result<Self, VerifyError> {
        let rest = value
            .strip_prefix(SCHEME)
            .ok_or(VerifyError::UnsupportedScheme)?;
        let (mut key_id, mut algorithm, mut headers, mut signature) = (None, None, None, None);
        let mut rest = rest.trim_start();
        while !rest.is_empty() {
            let (name, after) = rest
                .split_once('=')
                .ok_or(VerifyError::MalformedSignature("a parameter has no value"))?;
            let after = after
                .strip_prefix('"')
                .ok_or(VerifyError::MalformedSignature(
                    "a parameter value is not quoted",
                ))?;
            let (val, after) = after
                .split_once('"')
                .ok_or(VerifyError::MalformedSignature(
                    "a quoted value is not closed",
                ))?;
            let slot = match name.trim() {
                "keyId" => &mut key_id,
                "algorithm" => &mut algorithm,
                "headers" => &mut headers,
                "signature" => &mut signature,
                _ => &mut None,
            };
            if slot.replace(val).is_some() {
                return Err(VerifyError::MalformedSignature("a parameter is repeated"));
            }
            let after = after.trim_start();
            rest = match after.strip_prefix(',') {
                Some(next) => next.trim_start(),
                None if after.is_empty() => after,
                None => {
                    return Err(VerifyError::MalformedSignature(
                        "parameters must be separated by commas",
                    ));
                }
            };
        }
        Ok(Self {
            key_id: key_id
                .filter(|id| !id.is_empty())
                .ok_or(VerifyError::MalformedSignature("keyId is missing or empty"))?,
            algorithm: algorithm.ok_or(VerifyError::MalformedSignature("algorithm is missing"))?,
            // The signing library's default when no list is given.
            headers: headers.unwrap_or("date"),
            signature: signature.ok_or(VerifyError::MalformedSignature("signature is missing"))?,
        })
    }
}

/// Checks the syntax of an `Authorization: Signature …` value, as [`verify`] does first, and
/// returns its `keyId`. The fuzz targets call it alone.
pub fn parse_authorization(value: &str) -> Result<&str, VerifyError> {
    SignatureParams::parse(value).map(|p| p.key_id)
}

/// The parts of a request that verification reads.
#[derive(Debug, Clone, Copy)]
pub struct SignedRequest<'a> {
    /// The request method, for `(request-target)`.
    pub method: &'a Method,
    /// The request URI, for `(request-target)`.
    pub uri: &'a Uri,
    /// All request headers as received.
    pub headers: &'a HeaderMap,
    /// The raw body bytes as received.
    pub body: &'a [u8],
}

/// Verifies a request: the `keyId` that signed it, or none for an unsigned request that the
/// policy accepts.
pub fn verify(
    req: SignedRequest<'_>,
    keys: &KeyRing,
    policy: &Policy,
    clock: &dyn Clock,
) -> Result<Option<String>, VerifyError> {
    let unsigned = None;
    let Some(authorization) = single(req.headers, &header::AUTHORIZATION)? else {
        return if policy.allow_unsigned {
            Ok(unsigned)
        } else {
            Err(VerifyError::MissingAuthorization)
        };
    };
    if keys.is_empty() && policy.allow_unsigned {
        // Verification is switched off; the relay said so loudly at start.
        return Ok(unsigned);
    }
    let params = SignatureParams::parse(authorization)?;
    if params.algorithm != ALGORITHM {
        return Err(VerifyError::UnsupportedAlgorithm);
    }
    let names: Vec<String> = params
        .headers
        .split_ascii_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    if !names.iter().any(|n| n == "date") || !names.iter().any(|n| n == "digest") {
        return Err(VerifyError::IncompleteSignedHeaders);
    }
    let secret = keys
        .lookup(params.key_id)
        .ok_or(VerifyError::UnknownKeyId)?;

    let signing_string = signing_string(&req, &names)?;
    let expected = BASE64
        .decode(params.signature)
        .map_err(|_| VerifyError::BadSignature)?;
    let mut mac = HmacSha256::new_from_slice(secret.expose()).expect("HMAC accepts any key size");
    mac.update(signing_string.as_bytes());
    mac.verify_slice(&expected)
        .map_err(|_| VerifyError::BadSignature)?;

    let digest = single(req.headers, &DIGEST)?
        .ok_or_else(|| VerifyError::MissingSignedHeader("digest".into()))?;
    if !digest.starts_with(DIGEST_PREFIX) {
        return Err(VerifyError::UnsupportedDigest);
    }
    if !constant_time_eq(digest.as_bytes(), digest_header(req.body).as_bytes()) {
        return Err(VerifyError::DigestMismatch);
    }

    if let Some(window) = policy.max_clock_skew {
        let date = single(req.headers, &header::DATE)?
            .ok_or_else(|| VerifyError::MissingSignedHeader("date".into()))?;
        let date = httpdate::parse_http_date(date).map_err(|_| VerifyError::InvalidDate)?;
        let now = clock.now();
        match now.duration_since(date) {
            Ok(age) if age > window => return Err(VerifyError::StaleDate),
            Err(ahead) if ahead.duration() > window => return Err(VerifyError::FutureDate),
            _ => {}
        }
    }
    Ok(Some(params.key_id.to_owned()))
}

/// Builds the draft-cavage signing string from the listed (lower-cased) header names.
fn signing_string(req: &SignedRequest<'_>, names: &[String]) -> Result<String, VerifyError> {
    let mut lines = Vec::with_capacity(names.len());
    for name in names {
        let value = if name == "(request-target)" {
            let target = req.uri.path_and_query().map_or("/", |pq| pq.as_str());
            format!("{} {target}", req.method.as_str().to_ascii_lowercase())
        } else {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| VerifyError::MalformedSignature("a signed header name is invalid"))?;
            single(req.headers, &header)?
                .ok_or_else(|| VerifyError::MissingSignedHeader(name.clone()))?
                .to_owned()
        };
        lines.push(format!("{name}: {value}"));
    }
    Ok(lines.join("\n"))
}

/// The one value of a header, `None` when absent; a repeated or non-ASCII header is an error.
fn single<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Result<Option<&'h str>, VerifyError> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(VerifyError::DuplicateHeader(name.as_str().to_owned()));
    }
    first
        .to_str()
        .map(Some)
        .map_err(|_| VerifyError::InvalidHeader(name.as_str().to_owned()))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `SHA-256=<base64(sha256(body))>`, the `Digest` header value the DSS sent.
pub fn digest_header(body: &[u8]) -> String {
    format!("{DIGEST_PREFIX}{}", BASE64.encode(Sha256::digest(body)))
}

/// The three headers the DSS added to a signed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// `Date`, IMF-fixdate.
    pub date: HeaderValue,
    /// `Digest: SHA-256=…`.
    pub digest: HeaderValue,
    /// `Authorization: Signature keyId=…,algorithm="hmac-sha256",headers="date digest",signature=…`.
    pub authorization: HeaderValue,
}

/// Why a request could not be signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The key id contains a double quote or a character not allowed in a header.
    #[error("the key id cannot be placed in an Authorization header")]
    InvalidKeyId,
}

/// Signs a body exactly as the DSS did (`requests-http-signature` 0.1.0 defaults plus a
/// `Digest`): `headers="date digest"`, parameters in the library's fixed order.
pub fn sign(
    key_id: &str,
    secret: &Secret,
    date: SystemTime,
    body: &[u8],
) -> Result<Signature, SignError> {
    sign_with(key_id, secret.expose(), date, body)
}

/// [`sign`] with the secret's bytes.
pub(crate) fn sign_with(
    key_id: &str,
    secret: &[u8],
    date: SystemTime,
    body: &[u8],
) -> Result<Signature, SignError> {
    if key_id.contains('"') {
        return Err(SignError::InvalidKeyId);
    }
    let date = httpdate::fmt_http_date(date);
    let digest = digest_header(body);
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC accepts any key size");
    mac.update(format!("date: {date}\ndigest: {digest}").as_bytes());
    let signature = BASE64.encode(mac.finalize().into_bytes());
    let authorization = format!(
        "{SCHEME}keyId=\"{key_id}\",algorithm=\"{ALGORITHM}\",headers=\"{SIGNED_HEADERS}\",signature=\"{signature}\""
    );
    Ok(Signature {
        date: HeaderValue::from_str(&date).expect("HTTP dates are ASCII"),
        digest: HeaderValue::from_str(&digest).expect("base64 is ASCII"),
        authorization: HeaderValue::from_str(&authorization)
            .map_err(|_| SignError::InvalidKeyId)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &[u8] =
        br#"{"subscription_id": "s", "match": {"bundle_uuid": "u", "bundle_version": "v"}}"#;

    fn at(date: &str) -> SystemTime {
        httpdate::parse_http_date(date).unwrap()
    }

    fn keys() -> KeyRing {
        KeyRing::new([("k1".to_owned(), Secret::new("ribos0me"))].into(), None)
    }

    fn policy() -> Policy {
        Policy {
            max_clock_skew: Some(Duration::from_secs(300)),
            allow_unsigned: false,
        }
    }

    fn signed_headers(key_id: &str, secret: &str, date: &str) -> HeaderMap {
        let sig = sign(key_id, &Secret::new(secret), at(date), BODY).unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(header::DATE, sig.date);
        headers.insert(DIGEST, sig.digest);
        headers.insert(header::AUTHORIZATION, sig.authorization);
        headers
    }

    fn check(
        headers: &HeaderMap,
        keys: &KeyRing,
        policy: &Policy,
        now: &str,
    ) -> Result<Option<String>, VerifyError> {
        let uri = Uri::from_static("/dss/notify?x=1");
        let req = SignedRequest {
            method: &Method::POST,
            uri: &uri,
            headers,
            body: BODY,
        };
        verify(req, keys, policy, &FixedClock(at(now)))
    }

    const DATE: &str = "Fri, 15 Nov 2019 20:24:11 GMT";

    #[test]
    fn sign_then_verify_round_trips() {
        let headers = signed_headers("k1", "ribos0me", DATE);
        assert_eq!(
            check(&headers, &keys(), &policy(), DATE),
            Ok(Some("k1".into()))
        );
    }

    #[test]
    fn sign_reproduces_the_documented_vector() {
        // dss-protocol §4.4, vector A: the capture's body, key and Date give its Digest and
        // signature.
        let capture = include_bytes!("../tests/data/dss/v2-json-post.http");
        let split = capture.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let date = httpdate::parse_http_date(DATE).unwrap();
        let key_id = "hca-dss:8a6a7e5c-2f0b-4c39-9c9e-2d1c7c0e7b11";
        let signed = sign(key_id, &Secret::new("ribos0me"), date, &capture[split..]).unwrap();
        assert_eq!(
            signed.digest,
            "SHA-256=KESAAPcGYkyGr4iP/KOLhdD7DuBiLdCdg4/iHRsyQJM="
        );
        let authorization = signed.authorization.to_str().unwrap();
        assert!(
            authorization.contains(r#"signature="PSCSXXmBvGhdwcyPbf2Yozu4dg0aj8JxJuU5uPZshkE=""#),
            "{authorization}"
        );
    }

    #[test]
    fn catch_all_secret_accepts_any_key_id() {
        let headers = signed_headers("hca-dss:anything", "ribos0me", DATE);
        let ring = KeyRing::new(BTreeMap::new(), Some(Secret::new("ribos0me")));
        assert_eq!(
            check(&headers, &ring, &policy(), DATE),
            Ok(Some("hca-dss:anything".into()))
        );
    }

    #[test]
    fn named_key_wins_over_catch_all() {
        let headers = signed_headers("k1", "ribos0me", DATE);
        let ring = KeyRing::new(
            [("k1".to_owned(), Secret::new("ribos0me"))].into(),
            Some(Secret::new("other")),
        );
        assert!(check(&headers, &ring, &policy(), DATE).is_ok());
        let headers = signed_headers("k2", "ribos0me", DATE);
        assert_eq!(
            check(&headers, &ring, &policy(), DATE),
            Err(VerifyError::BadSignature)
        );
    }

    #[test]
    fn rejects_the_reversed_key_and_unknown_ids() {
        for (key_id, secret, expected) in [
            ("k1", "em0sobir", VerifyError::BadSignature),
            ("k9", "ribos0me", VerifyError::UnknownKeyId),
        ] {
            let headers = signed_headers(key_id, secret, DATE);
            assert_eq!(
                check(&headers, &keys(), &policy(), DATE),
                Err(expected),
                "{key_id}"
            );
        }
    }

    #[test]
    fn skew_window_is_symmetric_and_can_be_switched_off() {
        let headers = signed_headers("k1", "ribos0me", DATE);
        for (now, expected) in [
            ("Fri, 15 Nov 2019 20:29:11 GMT", Ok(Some("k1".to_owned()))), // exactly 300 s
            ("Fri, 15 Nov 2019 20:29:12 GMT", Err(VerifyError::StaleDate)),
            (
                "Fri, 15 Nov 2019 20:19:10 GMT",
                Err(VerifyError::FutureDate),
            ),
        ] {
            assert_eq!(check(&headers, &keys(), &policy(), now), expected, "{now}");
        }
        let off = Policy {
            max_clock_skew: None,
            ..policy()
        };
        assert!(check(&headers, &keys(), &off, "Sun, 29 Nov 2026 00:00:00 GMT").is_ok());
    }

    #[test]
    fn unsigned_requests_need_the_explicit_opt_in() {
        let empty = HeaderMap::new();
        assert_eq!(
            check(&empty, &keys(), &policy(), DATE),
            Err(VerifyError::MissingAuthorization)
        );
        let open = Policy {
            allow_unsigned: true,
            ..policy()
        };
        assert_eq!(check(&empty, &keys(), &open, DATE), Ok(None));
        // With keys configured, a signature that is present is still checked.
        let bad = signed_headers("k1", "wrong", DATE);
        assert_eq!(
            check(&bad, &keys(), &open, DATE),
            Err(VerifyError::BadSignature)
        );
    }

    #[test]
    fn parses_parameters_in_any_order_and_ignores_unknown_ones() {
        let p = SignatureParams::parse(
            r#"Signature signature="c2ln", headers="date digest", created="1", keyId="a,b",algorithm="hmac-sha256""#,
        )
        .unwrap();
        assert_eq!(
            p,
            SignatureParams {
                key_id: "a,b",
                algorithm: "hmac-sha256",
                headers: "date digest",
                signature: "c2ln"
            }
        );
    }

    #[test]
    fn malformed_parameters_are_rejected() {
        for bad in [
            r#"Signature keyId="k""#,
            r#"Signature keyId=k,algorithm="hmac-sha256",signature="x""#,
            r#"Signature keyId="k,algorithm="hmac-sha256",signature="x"#,
            r#"Signature keyId="k" algorithm="hmac-sha256",signature="x""#,
            r#"Signature keyId="k",keyId="j",algorithm="hmac-sha256",signature="x""#,
            r#"Signature keyId"#,
        ] {
            assert!(
                matches!(
                    SignatureParams::parse(bad),
                    Err(VerifyError::MalformedSignature(_))
                ),
                "{bad}"
            );
        }
        assert_eq!(
            SignatureParams::parse(r#"signature keyId="k""#),
            Err(VerifyError::UnsupportedScheme)
        );
    }

    #[test]
    fn request_target_and_host_can_be_signed() {
        let uri = Uri::from_static("/dss/notify?x=1");
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("relay.example"));
        headers.insert(header::DATE, HeaderValue::from_static(DATE));
        headers.insert(DIGEST, HeaderValue::from_str(&digest_header(BODY)).unwrap());
        let names: Vec<String> = ["(request-target)", "host", "date", "digest"]
            .map(String::from)
            .to_vec();
        let req = SignedRequest {
            method: &Method::PUT,
            uri: &uri,
            headers: &headers,
            body: BODY,
        };
        let s = signing_string(&req, &names).unwrap();
        assert!(
            s.starts_with("(request-target): put /dss/notify?x=1\nhost: relay.example\ndate: ")
        );
        let mut mac = HmacSha256::new_from_slice(b"ribos0me").unwrap();
        mac.update(s.as_bytes());
        let sig = BASE64.encode(mac.finalize().into_bytes());
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!(
                r#"Signature keyId="k1",algorithm="hmac-sha256",headers="(request-target) host date digest",signature="{sig}""#
            ))
            .unwrap(),
        );
        let req = SignedRequest {
            method: &Method::PUT,
            uri: &uri,
            headers: &headers,
            body: BODY,
        };
        assert_eq!(
            verify(req, &keys(), &policy(), &FixedClock(at(DATE))),
            Ok(Some("k1".into()))
        );
    }

    #[test]
    fn secret_debug_is_masked() {
        assert_eq!(format!("{:?}", Secret::new("ribos0me")), "Secret(****)");
    }
}
