//! `relay send`: build the request the DSS would have sent for a notification, and send it.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use relay_core::Notification;
use relay_core::schemes::{Signer, SigningKey};
use relay_core::source::{SchemeName, SourceSpec};
use relay_core::verify::{Secret, sign};

use crate::error::CliError;
use crate::{Encoding, HttpMethod, SendArgs};

pub(crate) fn run(args: &SendArgs) -> Result<ExitCode, CliError> {
    let payload = std::fs::read(&args.file)
        .map_err(|e| CliError::Invalid(format!("cannot read {}: {e}", args.file.display())))?;
    if let Some(sender) = Sender::of(args)? {
        let mut headers = vec![("Content-Type".to_owned(), args.content_type.clone())];
        headers.extend(args.headers.iter().cloned());
        if !args.unsigned {
            let signed = sender.sign(args, &headers, &payload)?;
            headers.extend(signed);
        }
        return deliver(args, &headers, &payload);
    }
    let (content_type, body) = match args.encoding {
        Encoding::Json => ("application/json".to_owned(), payload.clone()),
        Encoding::Multipart => {
            let boundary = random_boundary()?;
            let body = relay_core::intake::dss_multipart_body(
                &boundary,
                &args.form_fields,
                &args.payload_field,
                &payload,
            );
            (format!("multipart/form-data; boundary={boundary}"), body)
        }
    };

    let mut headers: Vec<(String, String)> = vec![("Content-Type".into(), content_type)];
    if !args.unsigned {
        let secret = secret(args)?;
        let key_id = match &args.key_id {
            Some(id) => id.clone(),
            None => {
                let notification = Notification::parse(Bytes::from(payload)).map_err(|e| {
                    CliError::Invalid(format!("{e}; pass --key-id to send it anyway"))
                })?;
                format!(
                    "hca-dss:{}",
                    notification.subscription_id().unwrap_or_default()
                )
            }
        };
        let signature = sign(&key_id, &secret, SystemTime::now(), &body).map_err(CliError::from)?;
        for (name, value) in [
            ("Date", signature.date),
            ("Digest", signature.digest),
            ("Authorization", signature.authorization),
        ] {
            headers.push((name.into(), value.to_str().expect("ASCII").to_owned()));
        }
    }
    headers.extend(args.headers.iter().cloned());
    deliver(args, &headers, &body)
}

/// Sends the request and prints the answer; success when it is a 2xx.
fn deliver(
    args: &SendArgs,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<ExitCode, CliError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0) // the DSS never followed redirects
        .timeout_global(Some(Duration::from_secs(args.timeout)))
        .build()
        .into();
    let mut request = match args.method {
        HttpMethod::Post => agent.post(&args.url),
        HttpMethod::Put => agent.put(&args.url),
    };
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let mut response = request
        .send(body)
        .map_err(|e| CliError::Invalid(format!("request to {} failed: {e}", args.url)))?;
    let status = response.status();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    println!("{status}");
    println!("{text}");
    Ok(if status.is_success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn secret(args: &SendArgs) -> Result<Secret, CliError> {
    secret_text(args, None).map(Secret::new)
}

/// The secret given with --secret or --secret-file, else the variable `fallback` names.
fn secret_text(args: &SendArgs, fallback: Option<&str>) -> Result<String, CliError> {
    let value = match (&args.secret, &args.secret_file, fallback) {
        (Some(s), _, _) => s.clone(),
        (None, Some(path), _) => std::fs::read_to_string(path)
            .map_err(|e| CliError::Invalid(format!("cannot read {}: {e}", path.display())))?
            .trim()
            .to_owned(),
        (None, None, Some(var)) => std::env::var(var).map_err(|_| {
            CliError::Invalid(format!(
                "no secret: pass --secret or --secret-file, or set {var}"
            ))
        })?,
        (None, None, None) => {
            return Err(CliError::invalid(
                "no HMAC secret: set RELAY_SEND_SECRET, or pass --secret-file, or --unsigned",
            ));
        }
    };
    if value.trim().is_empty() {
        return Err(CliError::invalid("the secret is empty"));
    }
    Ok(value.trim().to_owned())
}

/// How a sender other than the DSS signs: `--scheme`, or the scheme and options of the
/// configured `--source`.
struct Sender {
    scheme: Box<dyn relay_core::schemes::Scheme>,
    name: SchemeName,
    /// The source's `secret_env`, read when no secret is given.
    secret_env: Option<String>,
    /// Whether the scheme sends a delivery id.
    sends_id: bool,
}

impl Sender {
    /// `None`: sign as the DSS.
    fn of(args: &SendArgs) -> Result<Option<Self>, CliError> {
        let (name, spec, secret_env) = match (&args.scheme, &args.source) {
            (Some(SchemeName::Dss), _) | (None, None) => return Ok(None),
            (Some(name), _) => (*name, SourceSpec::default(), None),
            (None, Some(source)) => {
                let config =
                    relay_core::Config::from_vars(crate::env_with_config(args.config.as_deref()))
                        .map_err(CliError::from)?;
                let source = config
                    .sources
                    .iter()
                    .find(|s| &s.name == source)
                    .ok_or_else(|| {
                        let names: Vec<&str> =
                            config.sources.iter().map(|s| s.name.as_str()).collect();
                        CliError::Invalid(format!(
                            "no source {source:?} in the configuration; its sources: {names:?}"
                        ))
                    })?;
                if source.scheme == SchemeName::Dss {
                    return Ok(None);
                }
                (
                    source.scheme,
                    source.spec.clone(),
                    source.secret_env.clone(),
                )
            }
        };
        let scheme = name
            .scheme(&spec)
            .map_err(CliError::Invalid)?
            .expect("every scheme but the DSS's is one");
        let sends_id = matches!(
            name,
            SchemeName::GitHub | SchemeName::Shopify | SchemeName::StandardWebhooks
        ) || (name == SchemeName::Hmac && spec.id_header.is_some());
        Ok(Some(Self {
            scheme,
            name,
            secret_env,
            sends_id,
        }))
    }

    /// The headers that sign the request now: its method, URL, `headers` and `body`, where
    /// the scheme signs more than the body.
    fn sign(
        &self,
        args: &SendArgs,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Result<Vec<(String, String)>, CliError> {
        let text = secret_text(args, self.secret_env.as_deref())?;
        let key = signing_key(&text, args.key_id.as_deref())?;
        let id = match (&args.id, self.sends_id) {
            (Some(id), _) => Some(id.clone()),
            (None, true) => Some(random_boundary()?),
            (None, false) => None,
        };
        let uri: http::Uri = args
            .url
            .parse()
            .map_err(|e| CliError::Invalid(format!("--url {}: {e}", args.url)))?;
        let method = match args.method {
            crate::HttpMethod::Post => http::Method::POST,
            crate::HttpMethod::Put => http::Method::PUT,
        };
        let mut sent = http::HeaderMap::new();
        for (name, value) in headers {
            let name = http::HeaderName::try_from(name.as_str())
                .map_err(|_| CliError::Invalid(format!("{name:?} is not a header name")))?;
            let value = http::HeaderValue::try_from(value.as_str())
                .map_err(|_| CliError::Invalid(format!("{name}: not a header value")))?;
            sent.append(name, value);
        }
        let request = relay_core::schemes::SignedRequest {
            method: &method,
            uri: &uri,
            headers: &sent,
            body,
        };
        let headers = self
            .scheme
            .sign_request(
                &request,
                Signer::new(&key, SystemTime::now(), id.as_deref()),
            )
            .map_err(|e| CliError::Invalid(format!("{}: {e}", self.name)))?;
        Ok(headers
            .into_iter()
            .map(|(name, value)| {
                let value = value.to_str().expect("the schemes write ASCII").to_owned();
                (name.as_str().to_owned(), value)
            })
            .collect())
    }
}

/// The key a secret's text gives: one secret, or the entry `key_id` names in a JSON object of
/// key ids to secrets; `ed25519-seed:<base64 of 32 bytes>` is an ed25519 private key.
fn signing_key(text: &str, key_id: Option<&str>) -> Result<SigningKey, CliError> {
    use base64::Engine as _;
    let (key_id, secret) = match text.starts_with('{') {
        true => {
            let map: std::collections::BTreeMap<String, String> = serde_json::from_str(text)
                .map_err(|_| {
                    CliError::invalid("the secret is not a JSON object of key ids to secrets")
                })?;
            let (id, secret) = match key_id {
                Some(id) => map.get_key_value(id).ok_or_else(|| {
                    CliError::Invalid(format!("no key {id:?} among {:?}", map.keys()))
                })?,
                None if map.len() == 1 => map.iter().next().expect("one"),
                None => {
                    return Err(CliError::Invalid(format!(
                        "pass --key-id, one of {:?}",
                        map.keys()
                    )));
                }
            };
            (Some(id.clone()), secret.clone())
        }
        false => (key_id.map(str::to_owned), text.to_owned()),
    };
    match secret.strip_prefix("ed25519-seed:") {
        Some(seed) => {
            let seed: [u8; 32] = base64::engine::general_purpose::STANDARD
                .decode(seed)
                .ok()
                .and_then(|b| b.try_into().ok())
                .ok_or(CliError::invalid("an ed25519 seed is 32 bytes of base64"))?;
            Ok(SigningKey::Ed25519 {
                key_id,
                key: relay_core::schemes::Ed25519SigningKey::from_bytes(&seed),
            })
        }
        None => Ok(SigningKey::Hmac {
            key_id,
            secret: Secret::new(secret).into(),
        }),
    }
}

/// 32 lowercase hex characters, like urllib3's `choose_boundary()`.
fn random_boundary() -> Result<String, CliError> {
    let mut raw = [0u8; 16];
    getrandom::fill(&mut raw).map_err(CliError::Randomness)?;
    Ok(raw.iter().map(|b| format!("{b:02x}")).collect())
}

/// The multipart body urllib3's `encode_multipart_formdata` produced for the DSS: the static
/// fields in order, the payload last (or in place of a field with its name), one
/// `Content-Disposition` header per part, no per-part Content-Type.
#[cfg(test)]
mod tests {
    use super::*;

    const V2_JSON: &[u8] = include_bytes!("../../relay-core/tests/data/dss/v2-json-post.http");
    const V2_MULTIPART: &[u8] =
        include_bytes!("../../relay-core/tests/data/dss/v2-multipart-put.http");

    fn body_of(raw: &[u8]) -> &[u8] {
        &raw[raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4..]
    }

    #[test]
    fn multipart_matches_the_dss_capture_byte_for_byte() {
        let fields = [("foo".to_owned(), "bar".to_owned())];
        let body = relay_core::intake::dss_multipart_body(
            "2769baffc4f24cbc83ced26aa0c2f712",
            &fields,
            "payload",
            body_of(V2_JSON),
        );
        assert_eq!(body, body_of(V2_MULTIPART));
    }

    #[test]
    fn payload_replaces_a_form_field_of_the_same_name_in_place() {
        let fields = [
            ("payload".to_owned(), "x".to_owned()),
            ("foo".to_owned(), "bar".to_owned()),
        ];
        let body = relay_core::intake::dss_multipart_body("b", &fields, "payload", b"{}");
        assert_eq!(
            String::from_utf8(body).unwrap(),
            "--b\r\nContent-Disposition: form-data; name=\"payload\"\r\n\r\n{}\r\n--b\r\nContent-Disposition: form-data; name=\"foo\"\r\n\r\nbar\r\n--b--\r\n"
        );
    }

    #[test]
    fn boundaries_are_32_hex_characters() {
        let b = random_boundary().unwrap();
        assert_eq!(b.len(), 32);
        assert!(
            b.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(b, random_boundary().unwrap());
    }
}
