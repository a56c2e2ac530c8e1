//! RFC 9421 HTTP Message Signatures over a request, with the body covered through RFC 9530
//! `Content-Digest` (`sha-256` or `sha-512`), algorithms `hmac-sha256` and `ed25519`.
//!
//! `Signature-Input` and `Signature` are Structured Field dictionaries (parsed with `sfv`). The
//! components accepted are the derived `@method`, `@authority`, `@path`, `@query` and
//! `@request-target`, and header fields by name, without component parameters. `created` is
//! required and checked within the window; `expires`, when present, must not have passed. The
//! signature must cover the source's required components (by default `@method`, `@path` and
//! `content-digest`, so that a request signed for one path is not taken on another), and
//! `content-digest` is recomputed over the body; an unknown `keyid` answers as a bad signature
//! does.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::{Signature, Signer as _};
use http::{HeaderName, HeaderValue};
use sfv::{BareItem, Dictionary, InnerList, ListEntry, ListSerializer, Parser};
use sha2::{Digest as _, Sha256, Sha512};

use super::{Check, Headers, Proof, Scheme, SchemeError, Signer, Window};
use super::{SignedRequest, SigningKey, ct_eq, header, match_hmac, pair, unix_secs};
use crate::mac::hmac_sha256;

const INPUT: &str = "signature-input";
const SIGNATURE: &str = "signature";
const CONTENT_DIGEST: &str = "content-digest";
/// More signatures in one request than any sender needs are refused rather than each tried.
const MAX_SIGNATURES: usize = 4;
/// More covered components than any sender needs are refused.
const MAX_COMPONENTS: usize = 32;

/// The components a signature must cover unless the source says otherwise.
pub(crate) const DEFAULT_REQUIRED: [&str; 3] = ["@method", "@path", CONTENT_DIGEST];

/// RFC 9421 with RFC 9530 `Content-Digest`.
#[derive(Debug, Clone)]
pub struct Rfc9421 {
    /// Largest accepted distance between `created` and now.
    pub window: Window,
    /// The components a signature must cover, in the order [`sign`](Scheme::sign_request)
    /// covers them; empty accepts any coverage (tests of other rules only).
    pub required: Vec<String>,
    /// Verify only the signature with this label; any label when none.
    pub label: Option<String>,
}

impl Default for Rfc9421 {
    fn default() -> Self {
        Self {
            window: Window::default(),
            required: DEFAULT_REQUIRED.map(str::to_owned).to_vec(),
            label: None,
        }
    }
}

/// Checks a source's `required_components`: known derived components or lower-case header
/// names, each once, `content-digest` among them (else the body is not signed).
pub(crate) fn check_required(required: &[String]) -> Result<(), String> {
    const DERIVED: [&str; 5] = [
        "@method",
        "@authority",
        "@path",
        "@query",
        "@request-target",
    ];
    for (i, name) in required.iter().enumerate() {
        let known = DERIVED.contains(&name.as_str())
            || (!name.starts_with('@')
                && HeaderName::try_from(name.as_str()).is_ok_and(|h| h.as_str() == name));
        if !known {
            return Err(format!(
                "{name:?} is not a component: {} or a lower-case header name",
                DERIVED.join(", ")
            ));
        }
        if required[..i].contains(name) {
            return Err(format!("{name:?} is listed twice"));
        }
    }
    if !required.iter().any(|n| n == CONTENT_DIGEST) {
        return Err("must include \"content-digest\": without it the body is not signed".into());
    }
    Ok(())
}

/// The `Content-Digest` value RFC 9530 gives a body, with `sha-256`.
pub fn content_digest(body: &[u8]) -> String {
    format!("sha-256=:{}:", BASE64.encode(Sha256::digest(body)))
}

fn dictionary(value: &str) -> Result<Dictionary, SchemeError> {
    Parser::new(value)
        .parse::<Dictionary>()
        .map_err(|_| SchemeError::MalformedSignature("not a Structured Field dictionary"))
}

/// Checks `Content-Digest` against the body: every known algorithm listed must match, and at
/// least one must be listed.
fn check_digest(request: &SignedRequest<'_>) -> Result<(), SchemeError> {
    let value = header(request.headers, CONTENT_DIGEST)?
        .ok_or_else(|| SchemeError::MissingHeader("Content-Digest".into()))?;
    let digests = dictionary(value)?;
    let mut known = 0;
    for (name, entry) in &digests {
        let ListEntry::Item(item) = entry else {
            return Err(SchemeError::MalformedSignature(
                "a digest is not a byte sequence",
            ));
        };
        let got = item
            .bare_item
            .as_byte_sequence()
            .ok_or(SchemeError::MalformedSignature(
                "a digest is not a byte sequence",
            ))?;
        let expected = match name.as_str() {
            "sha-256" => Sha256::digest(request.body).to_vec(),
            "sha-512" => Sha512::digest(request.body).to_vec(),
            _ => continue,
        };
        known += 1;
        if !ct_eq(got, &expected) {
            return Err(SchemeError::DigestMismatch);
        }
    }
    match known {
        0 => Err(SchemeError::UnsupportedAlgorithm),
        _ => Ok(()),
    }
}

/// The value of one covered component.
fn component(request: &SignedRequest<'_>, name: &str) -> Result<String, SchemeError> {
    let uri = request.uri;
    Ok(match name {
        "@method" => request.method.as_str().to_owned(),
        "@authority" => match uri.authority() {
            Some(a) => a.as_str().to_ascii_lowercase(),
            None => header(request.headers, "host")?
                .ok_or_else(|| SchemeError::MissingHeader("Host".into()))?
                .to_ascii_lowercase(),
        },
        "@path" => match uri.path() {
            "" => "/".to_owned(),
            p => p.to_owned(),
        },
        "@query" => format!("?{}", uri.query().unwrap_or_default()),
        "@request-target" => uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned()),
        derived if derived.starts_with('@') => {
            return Err(SchemeError::MalformedSignature(
                "an unsupported derived component",
            ));
        }
        field => {
            let mut values = Vec::new();
            for v in request.headers.get_all(field) {
                let v = v
                    .to_str()
                    .map_err(|_| SchemeError::InvalidHeader(field.to_owned()))?;
                values.push(v.trim());
            }
            if values.is_empty() {
                return Err(SchemeError::MissingHeader(field.to_owned()));
            }
            values.join(", ")
        }
    })
}

/// The covered component names of a `Signature-Input` member.
fn components(list: &InnerList) -> Result<Vec<&str>, SchemeError> {
    if list.items.len() > MAX_COMPONENTS {
        return Err(SchemeError::MalformedSignature(
            "too many covered components",
        ));
    }
    let mut names = Vec::with_capacity(list.items.len());
    for item in &list.items {
        let name = item
            .bare_item
            .as_string()
            .ok_or(SchemeError::MalformedSignature(
                "a component is not a string",
            ))?
            .as_str();
        if !item.params.is_empty() {
            return Err(SchemeError::MalformedSignature(
                "component parameters are not supported",
            ));
        }
        if name.is_empty() || name != name.to_ascii_lowercase() || names.contains(&name) {
            return Err(SchemeError::MalformedSignature(
                "a component is empty, upper-case or repeated",
            ));
        }
        names.push(name);
    }
    Ok(names)
}

/// The signature base (RFC 9421 §2.5) of a request for one `Signature-Input` member.
fn signature_base(request: &SignedRequest<'_>, list: &InnerList) -> Result<String, SchemeError> {
    let mut base = String::new();
    for name in components(list)? {
        let value = component(request, name)?;
        base.push_str(&format!("\"{name}\": {value}\n"));
    }
    let mut params = ListSerializer::new();
    params.members([&ListEntry::InnerList(list.clone())]);
    let params = params.finish().ok_or(SchemeError::MalformedSignature(
        "empty signature parameters",
    ))?;
    base.push_str(&format!("\"@signature-params\": {params}"));
    Ok(base)
}

/// The parameters of a `Signature-Input` member this scheme reads.
struct Params<'a> {
    created: i64,
    expires: Option<i64>,
    key_id: Option<&'a str>,
    alg: Option<&'a str>,
}

fn params(list: &InnerList) -> Result<Params<'_>, SchemeError> {
    let int = |item: &BareItem| {
        item.as_integer()
            .map(i64::from)
            .ok_or(SchemeError::MalformedSignature(
                "created and expires are integers",
            ))
    };
    let string = |item: &'_ BareItem| {
        item.as_string()
            .map(|s| s.as_str().to_owned())
            .ok_or(SchemeError::MalformedSignature("keyid and alg are strings"))
    };
    let mut p = Params {
        created: -1,
        expires: None,
        key_id: None,
        alg: None,
    };
    for (name, value) in &list.params {
        match name.as_str() {
            "created" => p.created = int(value)?,
            "expires" => p.expires = Some(int(value)?),
            "keyid" => {
                string(value)?;
                p.key_id = value.as_string().map(|s| s.as_str());
            }
            "alg" => {
                string(value)?;
                p.alg = value.as_string().map(|s| s.as_str());
            }
            _ => {}
        }
    }
    if p.created < 0 {
        return Err(SchemeError::MissingHeader("the created parameter".into()));
    }
    Ok(p)
}

impl Rfc9421 {
    fn verify_one(
        &self,
        check: Check<'_>,
        list: &InnerList,
        signature: &[u8],
    ) -> Result<Proof, SchemeError> {
        let (request, secrets, now) = (check.request, check.secrets, check.now);
        let p = params(list)?;
        let names = components(list)?;
        let covers_digest = names.contains(&CONTENT_DIGEST);
        if let Some(missing) = self.required.iter().find(|r| !names.contains(&r.as_str())) {
            return Err(SchemeError::IncompleteCoverage(missing.clone()));
        }
        let signed_at = check.timestamp(&p.created.to_string(), self.window)?;
        if let Some(expires) = p.expires
            && unix_secs(now) > u64::try_from(expires).unwrap_or(0)
        {
            return Err(SchemeError::StaleTimestamp);
        }
        let base = signature_base(request, list)?;
        let (hmac, ed25519) = match p.alg {
            None => (true, true),
            Some("hmac-sha256") => (true, false),
            Some("ed25519") => (false, true),
            Some(_) => return Err(SchemeError::UnsupportedAlgorithm),
        };
        let mut key_id = Err(SchemeError::BadSignature);
        if hmac {
            key_id = match_hmac(
                secrets.hmac_for(p.key_id),
                &[signature.to_vec()],
                |s| Some(s.expose().to_vec()),
                |key| hmac_sha256(key, &[base.as_bytes()]).to_vec(),
            );
        }
        if ed25519
            && key_id.is_err()
            && let Ok(sig) = Signature::from_slice(signature)
            && let Some(e) = secrets
                .ed25519_for(p.key_id)
                .find(|e| e.key.verify_strict(base.as_bytes(), &sig).is_ok())
        {
            key_id = Ok(e.id.clone());
        }
        let key_id = key_id?;
        if covers_digest {
            check_digest(request)?;
        }
        Ok(Proof {
            key_id: key_id.or(p.key_id.map(str::to_owned)),
            delivery_id: None,
            event_type: None,
            signed_at: Some(signed_at),
        })
    }
}

impl Scheme for Rfc9421 {
    fn verify(&self, check: Check<'_>) -> Result<Proof, SchemeError> {
        let signatures = check.signature(SIGNATURE, "Signature")?;
        let inputs = check.signature(INPUT, "Signature-Input")?;
        let (signatures, inputs) = (dictionary(signatures)?, dictionary(inputs)?);
        if inputs.len() > MAX_SIGNATURES {
            return Err(SchemeError::MalformedSignature("too many signatures"));
        }
        let mut first_error = None;
        for (label, entry) in &inputs {
            if self.label.as_deref().is_some_and(|l| l != label.as_str()) {
                continue;
            }
            let ListEntry::InnerList(list) = entry else {
                return Err(SchemeError::MalformedSignature(
                    "a Signature-Input member is not a list",
                ));
            };
            let signature = match signatures.get(label.as_str()) {
                Some(ListEntry::Item(item)) => item.bare_item.as_byte_sequence(),
                _ => None,
            }
            .ok_or(SchemeError::MalformedSignature(
                "no byte-sequence Signature for a label",
            ))?;
            match self.verify_one(check, list, signature) {
                Ok(proof) => return Ok(proof),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.unwrap_or(SchemeError::MissingSignature("Signature-Input")))
    }

    /// Signs the body alone: RFC 9421 signs the request's method and path too, which
    /// [`sign_request`](Scheme::sign_request) knows; this covers only what needs no request
    /// (the headers of `required`, `content-digest` among them).
    fn sign(&self, body: &[u8], signer: Signer<'_>) -> Result<Headers, SchemeError> {
        if self.required.iter().any(|r| r.starts_with('@')) {
            return Err(SchemeError::Unsignable(
                "RFC 9421 covers the request's method and path: sign the request",
            ));
        }
        let uri = http::Uri::from_static("/");
        let request = SignedRequest {
            method: &http::Method::POST,
            uri: &uri,
            headers: &http::HeaderMap::new(),
            body,
        };
        self.sign_request(&request, signer)
    }

    /// Signs `request` as `sig1`, covering the source's required components (or
    /// `content-digest` alone when none are), with `created`, `keyid` when the key has one, and
    /// `alg`; adds `Content-Digest`.
    fn sign_request(
        &self,
        request: &SignedRequest<'_>,
        signer: Signer<'_>,
    ) -> Result<Headers, SchemeError> {
        let (key, at) = (signer.key, signer.at);
        let (key_id, alg) = match key {
            SigningKey::Hmac { key_id, .. } => (key_id, "hmac-sha256"),
            SigningKey::Ed25519 { key_id, .. } => (key_id, "ed25519"),
        };
        let digest = content_digest(request.body);
        let mut headers = request.headers.clone();
        headers.insert(
            HeaderName::from_static(CONTENT_DIGEST),
            HeaderValue::from_str(&digest).map_err(|_| SchemeError::Unsignable("the digest"))?,
        );
        let with_digest = SignedRequest {
            headers: &headers,
            ..*request
        };
        let covered: Vec<&str> = match self.required.is_empty() {
            true => vec![CONTENT_DIGEST],
            false => self.required.iter().map(String::as_str).collect(),
        };
        let mut base = String::new();
        for name in &covered {
            let value = component(&with_digest, name)?;
            base.push_str(&format!("\"{name}\": {value}\n"));
        }
        let quoted: Vec<String> = covered.iter().map(|n| format!("\"{n}\"")).collect();
        let mut params = format!("({});created={}", quoted.join(" "), unix_secs(at));
        if let Some(id) = key_id {
            if !id
                .bytes()
                .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
            {
                return Err(SchemeError::Unsignable("the key id is not a plain string"));
            }
            params.push_str(&format!(";keyid=\"{id}\""));
        }
        params.push_str(&format!(";alg=\"{alg}\""));
        base.push_str(&format!("\"@signature-params\": {params}"));
        let signature = match key {
            SigningKey::Hmac { secret, .. } => {
                hmac_sha256(secret.expose(), &[base.as_bytes()]).to_vec()
            }
            SigningKey::Ed25519 { key, .. } => key.sign(base.as_bytes()).to_bytes().to_vec(),
        };
        Ok(vec![
            pair(CONTENT_DIGEST, digest)?,
            pair(INPUT, format!("sig1={params}"))?,
            pair(SIGNATURE, format!("sig1=:{}:", BASE64.encode(signature)))?,
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_inputs_are_refused_without_panicking() {
        for bad in [
            "sig1=(",
            "sig1=(\"a\";",
            "sig1=:::",
            "=",
            "sig1=(\"a\")x",
            "\u{0}",
        ] {
            assert!(dictionary(bad).is_err(), "{bad:?}");
        }
        // An empty header is an empty dictionary: no signature to verify.
        assert!(dictionary("").unwrap().is_empty());
        let list = |v: &str| match dictionary(v).unwrap().into_iter().next().unwrap().1 {
            ListEntry::InnerList(l) => l,
            ListEntry::Item(_) => panic!("not a list"),
        };
        for bad in [
            "s=(\"a\" \"a\");created=1",
            "s=(\"A\");created=1",
            "s=(a);created=1",
            "s=(\"a\";sf);created=1",
            "s=(\"\");created=1",
        ] {
            assert!(components(&list(bad)).is_err(), "{bad}");
        }
        for bad in [
            "s=();created=x",
            "s=();keyid=1;created=1",
            "s=()",
            "s=();created=-1",
        ] {
            assert!(params(&list(bad)).is_err(), "{bad}");
        }
    }
}
