//! `relay send`: build the request the DSS would have sent for a notification, and send it.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use relay_core::Notification;
use relay_core::verify::{Secret, sign};

use crate::{Encoding, HttpMethod, SendArgs};

pub(crate) fn run(args: &SendArgs) -> Result<ExitCode, String> {
    let payload = std::fs::read(&args.file)
        .map_err(|e| format!("cannot read {}: {e}", args.file.display()))?;
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
                let notification = Notification::parse(Bytes::from(payload))
                    .map_err(|e| format!("{e}; pass --key-id to send it anyway"))?;
                format!(
                    "hca-dss:{}",
                    notification.subscription_id().unwrap_or_default()
                )
            }
        };
        let signature =
            sign(&key_id, &secret, SystemTime::now(), &body).map_err(|e| e.to_string())?;
        for (name, value) in [
            ("Date", signature.date),
            ("Digest", signature.digest),
            ("Authorization", signature.authorization),
        ] {
            headers.push((name.into(), value.to_str().expect("ASCII").to_owned()));
        }
    }
    headers.extend(args.headers.iter().cloned());

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
    for (name, value) in &headers {
        request = request.header(name, value);
    }
    let mut response = request
        .send(&body[..])
        .map_err(|e| format!("request to {} failed: {e}", args.url))?;
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

fn secret(args: &SendArgs) -> Result<Secret, String> {
    let value = match (&args.secret, &args.secret_file) {
        (Some(s), _) => s.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?
            .trim()
            .to_owned(),
        (None, None) => {
            return Err(
                "no HMAC secret: set RELAY_SEND_SECRET, or pass --secret-file, or --unsigned"
                    .into(),
            );
        }
    };
    if value.is_empty() {
        return Err("the HMAC secret is empty".into());
    }
    Ok(Secret::new(value))
}

/// 32 lowercase hex characters, like urllib3's `choose_boundary()`.
fn random_boundary() -> Result<String, String> {
    let mut raw = [0u8; 16];
    getrandom::fill(&mut raw).map_err(|e| format!("no randomness available: {e}"))?;
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
