//! Webhook signature schemes behind one trait, [`Scheme`]: each checks a request's signature in
//! constant time against the configured [`Secrets`] and returns a [`Proof`], or a
//! [`SchemeError`] with a stable code. A scheme without a timestamp says so
//! ([`Scheme::has_timestamp`]): a captured request can be replayed to it.
//!
//! Every source's requests are checked here, the DSS's among them ([`dss::Dss`], over
//! [`crate::verify`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue};
use subtle::ConstantTimeEq;

use crate::mac::hmac_sha256;
use crate::verify::VerifyError;
pub use crate::verify::{Secret, SignedRequest};

mod body_hmac;
pub use body_hmac::{BodyHmac, GITHUB, SHOPIFY};
pub mod dss;
pub mod hmac;
pub mod rfc9421;
pub mod slack;
pub mod standard_webhooks;
pub mod stripe;

pub use ed25519_dalek::{SigningKey as Ed25519SigningKey, VerifyingKey as Ed25519VerifyingKey};

/// The timestamp window every scheme uses unless configured otherwise: 5 minutes.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(300);

/// The largest accepted distance between a signed timestamp and now, either way:
/// [`DEFAULT_WINDOW`] unless a source's `window_secs` sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window(pub Duration);

impl Default for Window {
    fn default() -> Self {
        Self(DEFAULT_WINDOW)
    }
}

/// One way a sender signs its webhooks.
pub trait Scheme: Send + Sync + std::fmt::Debug {
    /// Verifies a request against the secrets, at the time the check gives.
    fn verify(&self, check: Check<'_>) -> Result<Proof, SchemeError>;
    /// False when the scheme signs no timestamp, so a captured request can be replayed.
    fn has_timestamp(&self) -> bool {
        true
    }
    /// The headers a sender would add to a request with this body.
    fn sign(&self, body: &[u8], signer: Signer<'_>) -> Result<Headers, SchemeError>;
    /// The headers a sender would add to `request` (its method, target, headers and body, as
    /// they will be sent): what a scheme that signs more than the body (RFC 9421's `@method`
    /// and `@path`) needs; the others sign the body alone.
    fn sign_request(
        &self,
        request: &SignedRequest<'_>,
        signer: Signer<'_>,
    ) -> Result<Headers, SchemeError> {
        self.sign(request.body, signer)
    }
}

/// The headers a signer adds to a request.
pub type Headers = Vec<(HeaderName, HeaderValue)>;

/// One request to verify: what arrived, the keys it may be signed with, and the time to check
/// its timestamp against.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    /// The request as received.
    pub request: &'a SignedRequest<'a>,
    /// The keys its source accepts.
    pub secrets: &'a Secrets,
    /// Now, for the timestamp window.
    pub now: SystemTime,
}

impl<'a> Check<'a> {
    /// A check of `request` against `secrets` at `now`.
    pub fn new(request: &'a SignedRequest<'a>, secrets: &'a Secrets, now: SystemTime) -> Self {
        Self {
            request,
            secrets,
            now,
        }
    }

    /// The signature header's one value; a missing one is [`SchemeError::MissingSignature`],
    /// named as the sender writes it (`shown`).
    pub(crate) fn signature(
        &self,
        name: &str,
        shown: &'static str,
    ) -> Result<&'a str, SchemeError> {
        header(self.request.headers, name)?.ok_or(SchemeError::MissingSignature(shown))
    }

    /// Another header the scheme signs (a timestamp, an id); a missing one is
    /// [`SchemeError::MissingHeader`].
    pub(crate) fn needed(&self, name: &str) -> Result<&'a str, SchemeError> {
        header(self.request.headers, name)?.ok_or_else(|| SchemeError::MissingHeader(name.into()))
    }

    /// A signed Unix timestamp, checked within `window` of now.
    pub(crate) fn timestamp(&self, text: &str, window: Window) -> Result<SystemTime, SchemeError> {
        check_timestamp(text, self.now, window.0)
    }

    /// The id of the HMAC secret (any key id) whose HMAC-SHA256 of `parts` is one of the
    /// candidates ([`match_hmac`]).
    pub(crate) fn hmac(
        &self,
        candidates: &[Vec<u8>],
        parts: &[&[u8]],
    ) -> Result<Option<String>, SchemeError> {
        match_hmac(
            self.secrets.hmac_for(None),
            candidates,
            |s| Some(s.expose().to_vec()),
            |key| hmac_sha256(key, parts).to_vec(),
        )
    }
}

/// How a sender signs: its key, the time it signs at, and the delivery id where the scheme
/// signs one.
#[derive(Debug, Clone, Copy)]
pub struct Signer<'a> {
    /// The key.
    pub key: &'a SigningKey,
    /// When it signs.
    pub at: SystemTime,
    /// The delivery id, for the schemes that sign or send one.
    pub id: Option<&'a str>,
}

impl<'a> Signer<'a> {
    /// A signer with `key` at `at`, with the delivery id `id` where the scheme signs one.
    pub fn new(key: &'a SigningKey, at: SystemTime, id: Option<&'a str>) -> Self {
        Self { key, at, id }
    }

    /// The signing time in Unix seconds, as a sender writes it.
    pub(crate) fn unix(&self) -> String {
        unix_secs(self.at).to_string()
    }

    /// HMAC-SHA256 of the parts with the signer's HMAC secret.
    pub(crate) fn hmac(&self, parts: &[&[u8]]) -> Result<[u8; 32], SchemeError> {
        Ok(hmac_sha256(self.key.hmac_secret()?.expose(), parts))
    }
}

/// What a verified request proved, beyond its signature.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Proof {
    /// The key id that signed, where the scheme has key ids or the secret was named.
    pub key_id: Option<String>,
    /// The sender's delivery id (dedup key), where it sends one.
    pub delivery_id: Option<String>,
    /// The sender's event type, where a header carries it.
    pub event_type: Option<String>,
    /// The signed timestamp, where the scheme signs one.
    pub signed_at: Option<SystemTime>,
}

impl Proof {
    /// What a timestamped signature proved: the key id, and when it was signed.
    pub(crate) fn timed(key_id: Option<String>, signed_at: SystemTime) -> Self {
        Self {
            key_id,
            signed_at: Some(signed_at),
            ..Self::default()
        }
    }
}

/// An HMAC key's bytes (a [`Secret`]'s UTF-8 bytes, or raw bytes where the sender's key is
/// binary). Its `Debug` output never shows them.
#[derive(Clone, PartialEq, Eq)]
pub struct HmacKey(Vec<u8>);

impl HmacKey {
    /// A key from its raw bytes.
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Self {
        Self(bytes.into())
    }

    /// The key bytes.
    pub(crate) fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl From<Secret> for HmacKey {
    fn from(secret: Secret) -> Self {
        Self(secret.expose().to_vec())
    }
}

impl std::fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HmacKey(****)")
    }
}

/// One key and the id it is known by, if any.
#[derive(Debug, Clone)]
pub(crate) struct KeyEntry<K> {
    id: Option<String>,
    key: K,
}

/// The keys a source accepts: several during rotation, optionally by key id; HMAC secrets for
/// the symmetric schemes, ed25519 public keys for the asymmetric ones.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    hmac: Vec<KeyEntry<HmacKey>>,
    ed25519: Vec<KeyEntry<Ed25519VerifyingKey>>,
}

impl Secrets {
    /// No keys at all (every verification fails).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an HMAC secret accepted for any key id.
    pub fn with_hmac(mut self, secret: impl Into<HmacKey>) -> Self {
        self.hmac.push(KeyEntry {
            id: None,
            key: secret.into(),
        });
        self
    }

    /// Adds an HMAC secret known by a key id.
    pub fn with_hmac_id(mut self, id: impl Into<String>, secret: impl Into<HmacKey>) -> Self {
        self.hmac.push(KeyEntry {
            id: Some(id.into()),
            key: secret.into(),
        });
        self
    }

    /// Adds an ed25519 public key accepted for any key id.
    pub fn with_ed25519(mut self, key: Ed25519VerifyingKey) -> Self {
        self.ed25519.push(KeyEntry { id: None, key });
        self
    }

    /// Adds an ed25519 public key known by a key id.
    pub fn with_ed25519_id(mut self, id: impl Into<String>, key: Ed25519VerifyingKey) -> Self {
        self.ed25519.push(KeyEntry {
            id: Some(id.into()),
            key,
        });
        self
    }

    /// The HMAC secrets for a key id (those named so, and those for any id); all without one.
    fn hmac_for<'s>(&'s self, id: Option<&'s str>) -> impl Iterator<Item = &'s KeyEntry<HmacKey>> {
        self.hmac
            .iter()
            .filter(move |e| id.is_none() || e.id.is_none() || e.id.as_deref() == id)
    }

    /// The ed25519 keys for a key id, as [`Secrets::hmac_for`].
    fn ed25519_for<'s>(
        &'s self,
        id: Option<&'s str>,
    ) -> impl Iterator<Item = &'s KeyEntry<Ed25519VerifyingKey>> {
        self.ed25519
            .iter()
            .filter(move |e| id.is_none() || e.id.is_none() || e.id.as_deref() == id)
    }
}

/// The one key a sender signs with ([`Scheme::sign`]).
#[derive(Debug, Clone)]
pub enum SigningKey {
    /// An HMAC secret, with the key id to announce where the scheme has one.
    Hmac {
        /// The key id, for schemes that send one.
        key_id: Option<String>,
        /// The secret.
        secret: HmacKey,
    },
    /// An ed25519 private key, with the key id to announce where the scheme has one.
    Ed25519 {
        /// The key id, for schemes that send one.
        key_id: Option<String>,
        /// The private key.
        key: Ed25519SigningKey,
    },
}

impl SigningKey {
    fn hmac_secret(&self) -> Result<&HmacKey, SchemeError> {
        match self {
            Self::Hmac { secret, .. } => Ok(secret),
            Self::Ed25519 { .. } => Err(SchemeError::WrongKeyType),
        }
    }
}

/// Why a scheme refused a request. Every variant answers 401, except [`SchemeError::WrongKeyType`]
/// and [`SchemeError::Unsignable`], which are the signer's own mistakes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemeError {
    /// The signature header is absent.
    #[error("the request has no {0} header")]
    MissingSignature(&'static str),
    /// A header the scheme needs (timestamp, id) is absent.
    #[error("the request has no {0} header")]
    MissingHeader(String),
    /// The signature header cannot be parsed.
    #[error("the signature is malformed: {0}")]
    MalformedSignature(&'static str),
    /// A header the scheme reads appears more than once.
    #[error("the header {0} appears more than once")]
    DuplicateHeader(String),
    /// A header the scheme reads is not visible ASCII.
    #[error("the header {0} is not visible ASCII")]
    InvalidHeader(String),
    /// The signed timestamp is not a Unix time in seconds.
    #[error("the signed timestamp is not a Unix time")]
    InvalidTimestamp,
    /// The signed timestamp is older than the window.
    #[error("the signed timestamp is too old")]
    StaleTimestamp,
    /// The signed timestamp is further in the future than the window.
    #[error("the signed timestamp is too far in the future")]
    FutureTimestamp,
    /// No configured key verifies the signature; also an unknown key id, so that the two answer
    /// alike.
    #[error("the signature does not match")]
    BadSignature,
    /// An algorithm the scheme does not accept.
    #[error("unsupported signature algorithm")]
    UnsupportedAlgorithm,
    /// The signature does not cover what the source requires (RFC 9421: its
    /// `required_components`, `content-digest` always among them).
    #[error("the signature must cover {0}")]
    IncompleteCoverage(String),
    /// `Content-Digest` does not match the body received.
    #[error("the Content-Digest header does not match the body")]
    DigestMismatch,
    /// The key given to [`Scheme::sign`] is not of the kind the scheme uses.
    #[error("this scheme signs with another kind of key")]
    WrongKeyType,
    /// [`Scheme::sign`] cannot make the headers (a missing id, a value not fit for a header).
    #[error("cannot sign: {0}")]
    Unsignable(&'static str),
    /// A signed value holds the separator that follows it in the template, so the signed
    /// content could be split another way.
    #[error("the signed value {{{0}}} holds the separator that follows it in the template")]
    AmbiguousValue(String),
    /// The DSS's draft-cavage signature was refused, with the DSS's own codes.
    #[error(transparent)]
    Dss(#[from] VerifyError),
}

impl SchemeError {
    /// The stable error code returned in the response body.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MissingSignature(_) => "missing_signature",
            Self::MissingHeader(_) => "missing_signed_header",
            Self::MalformedSignature(_) => "malformed_signature",
            Self::DuplicateHeader(_) => "duplicate_header",
            Self::InvalidHeader(_) => "invalid_header",
            Self::InvalidTimestamp => "invalid_timestamp",
            Self::StaleTimestamp => "stale_timestamp",
            Self::FutureTimestamp => "future_timestamp",
            Self::BadSignature => "bad_signature",
            Self::UnsupportedAlgorithm => "unsupported_algorithm",
            Self::IncompleteCoverage(_) => "incomplete_signed_headers",
            Self::DigestMismatch => "digest_mismatch",
            Self::WrongKeyType => "wrong_key_type",
            Self::Unsignable(_) => "unsignable",
            Self::AmbiguousValue(_) => "ambiguous_signed_value",
            Self::Dss(e) => e.code(),
        }
    }
}

/// A header's one value as visible ASCII, or none; a repeated or non-ASCII header is refused.
pub(crate) fn header<'h>(
    headers: &'h HeaderMap,
    name: &str,
) -> Result<Option<&'h str>, SchemeError> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(SchemeError::DuplicateHeader(name.to_owned()));
    }
    value
        .to_str()
        .map(Some)
        .map_err(|_| SchemeError::InvalidHeader(name.to_owned()))
}

/// Parses a Unix time in seconds and checks it lies within `window` of `now`.
pub(crate) fn check_timestamp(
    text: &str,
    now: SystemTime,
    window: Duration,
) -> Result<SystemTime, SchemeError> {
    if text.is_empty() || text.len() > 12 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SchemeError::InvalidTimestamp);
    }
    let secs: u64 = text.parse().map_err(|_| SchemeError::InvalidTimestamp)?;
    let at = UNIX_EPOCH + Duration::from_secs(secs);
    match now.duration_since(at) {
        Ok(age) if age > window => Err(SchemeError::StaleTimestamp),
        Err(ahead) if ahead.duration() > window => Err(SchemeError::FutureTimestamp),
        _ => Ok(at),
    }
}

/// Seconds since the Unix epoch, as a sender writes them.
pub(crate) fn unix_secs(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Constant-time equality of two byte strings (their lengths are not secret).
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// Tries every secret against every candidate signature, in constant time per comparison; the
/// matching secret's id. With no secret at all, one MAC is still computed, so that an unknown
/// key id costs what a bad signature does.
pub(crate) fn match_hmac<'s, I>(
    secrets: I,
    candidates: &[Vec<u8>],
    key_bytes: impl Fn(&HmacKey) -> Option<Vec<u8>>,
    mac: impl Fn(&[u8]) -> Vec<u8>,
) -> Result<Option<String>, SchemeError>
where
    I: Iterator<Item = &'s KeyEntry<HmacKey>>,
{
    let mut found: Option<Option<String>> = None;
    let mut tried = false;
    for entry in secrets {
        let Some(key) = key_bytes(&entry.key) else {
            continue;
        };
        tried = true;
        let expected = mac(&key);
        let mut hit = false;
        for candidate in candidates {
            hit |= ct_eq(&expected, candidate);
        }
        if hit && found.is_none() {
            found = Some(entry.id.clone());
        }
    }
    if !tried {
        let _ = mac(b"");
    }
    found.ok_or(SchemeError::BadSignature)
}

/// A header pair for [`Scheme::sign`].
pub(crate) fn pair(
    name: &'static str,
    value: String,
) -> Result<(HeaderName, HeaderValue), SchemeError> {
    let value =
        HeaderValue::try_from(value).map_err(|_| SchemeError::Unsignable("not a header value"))?;
    Ok((HeaderName::from_static(name), value))
}

/// An owned copy of an optional header, for a [`Proof`].
pub(crate) fn owned(headers: &HeaderMap, name: &str) -> Result<Option<String>, SchemeError> {
    Ok(header(headers, name)?.map(str::to_owned))
}
