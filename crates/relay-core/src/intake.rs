//! Where a verified request body becomes the notification payload: `application/json` bodies are
//! the payload, `multipart/form-data` bodies carry it in one named form field.

use std::convert::Infallible;

use bytes::Bytes;
use http::{HeaderMap, header};

/// Why the body could not yield a payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntakeError {
    /// No `Content-Type` header (415).
    #[error("the request has no Content-Type; send application/json or multipart/form-data")]
    MissingContentType,
    /// A media type other than JSON or multipart form data (415).
    #[error("unsupported Content-Type {0:?}; send application/json or multipart/form-data")]
    UnsupportedMediaType(String),
    /// `Content-Type` appears more than once (400).
    #[error("the header content-type appears more than once")]
    DuplicateContentType,
    /// The multipart body or its boundary is malformed or truncated (400).
    #[error("the multipart body is malformed: {0}")]
    InvalidMultipart(String),
    /// The multipart body has no field with the payload's name (400).
    #[error("the multipart body has no form field named {0:?}")]
    MissingPayloadField(String),
    /// The payload field appears more than once (400).
    #[error("the multipart body has more than one form field named {0:?}")]
    DuplicatePayloadField(String),
}

impl IntakeError {
    /// The stable error code returned in the response body.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MissingContentType => "missing_content_type",
            Self::UnsupportedMediaType(_) => "unsupported_media_type",
            Self::DuplicateContentType => "duplicate_header",
            Self::InvalidMultipart(_) => "invalid_multipart",
            Self::MissingPayloadField(_) => "missing_payload_field",
            Self::DuplicatePayloadField(_) => "duplicate_payload_field",
        }
    }

    /// 415 for a media type the relay does not take, 400 for a malformed body.
    pub fn status(&self) -> http::StatusCode {
        match self {
            Self::MissingContentType | Self::UnsupportedMediaType(_) => {
                http::StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            _ => http::StatusCode::BAD_REQUEST,
        }
    }
}

/// A `multipart/form-data` body laid out as the DSS sent it (urllib3's layout): each of
/// `form_fields` in order, then the payload in `payload_field` (or in place of a form field of
/// that name). `relay send` and the tests build their requests with it.
pub fn dss_multipart_body(
    boundary: &str,
    form_fields: &[(String, String)],
    payload_field: &str,
    payload: &[u8],
) -> Vec<u8> {
    let mut parts: Vec<(&str, &[u8])> = form_fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_bytes()))
        .collect();
    match parts.iter_mut().find(|(name, _)| *name == payload_field) {
        Some(part) => part.1 = payload,
        None => parts.push((payload_field, payload)),
    }
    let mut body = Vec::with_capacity(payload.len() + 256);
    for (name, value) in parts {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n")
                .as_bytes(),
        );
        body.extend_from_slice(value);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    body
}

/// Returns the payload bytes of a request body: the body itself for JSON, the named field for
/// multipart form data. The bytes are never copied or re-encoded.
pub async fn extract_payload(
    headers: &HeaderMap,
    body: Bytes,
    payload_field: &str,
) -> Result<Bytes, IntakeError> {
    let mut values = headers.get_all(header::CONTENT_TYPE).iter();
    let value = values.next().ok_or(IntakeError::MissingContentType)?;
    if values.next().is_some() {
        return Err(IntakeError::DuplicateContentType);
    }
    let text = value.to_str().map_err(|_| {
        IntakeError::UnsupportedMediaType(String::from_utf8_lossy(value.as_bytes()).into())
    })?;
    let media: mime::Mime = text
        .parse()
        .map_err(|_| IntakeError::UnsupportedMediaType(text.to_owned()))?;
    match (media.type_(), media.subtype()) {
        (mime::APPLICATION, mime::JSON) => Ok(body),
        (mime::MULTIPART, mime::FORM_DATA) => multipart_field(text, body, payload_field).await,
        _ => Err(IntakeError::UnsupportedMediaType(
            media.essence_str().to_owned(),
        )),
    }
}

async fn multipart_field(
    content_type: &str,
    body: Bytes,
    payload_field: &str,
) -> Result<Bytes, IntakeError> {
    let invalid = |e: multer::Error| IntakeError::InvalidMultipart(e.to_string());
    let boundary = multer::parse_boundary(content_type).map_err(invalid)?;
    let stream = futures_util::stream::once(async move { Ok::<_, Infallible>(body) });
    let mut form = multer::Multipart::new(stream, boundary);
    let mut payload = None;
    // Read every part, not just up to the payload: a truncated or repeated field must not slip
    // through unnoticed.
    while let Some(field) = form.next_field().await.map_err(invalid)? {
        let is_payload = field.name() == Some(payload_field);
        let bytes = field.bytes().await.map_err(invalid)?;
        if is_payload && payload.replace(bytes).is_some() {
            return Err(IntakeError::DuplicatePayloadField(payload_field.to_owned()));
        }
    }
    payload.ok_or_else(|| IntakeError::MissingPayloadField(payload_field.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(content_type: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_str(content_type).unwrap(),
        );
        h
    }

    const FORM: &str = "--b0\r\nContent-Disposition: form-data; name=\"foo\"\r\n\r\nbar\r\n--b0\r\nContent-Disposition: form-data; name=\"payload\"\r\n\r\n{\"a\": 1}\r\n--b0--\r\n";

    #[tokio::test]
    async fn json_body_is_the_payload() {
        let body = Bytes::from_static(b"{\"a\": 1}");
        for ct in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON;charset=UTF-8",
        ] {
            assert_eq!(
                extract_payload(&headers(ct), body.clone(), "payload").await,
                Ok(body.clone())
            );
        }
    }

    #[tokio::test]
    async fn multipart_field_is_the_payload() {
        let form = headers("multipart/form-data; boundary=b0");
        let field = |name: &'static str| extract_payload(&form, Bytes::from(FORM), name);
        assert_eq!(
            field("payload").await,
            Ok(Bytes::from_static(b"{\"a\": 1}"))
        );
        assert_eq!(field("foo").await, Ok(Bytes::from_static(b"bar")));
        assert_eq!(
            field("file").await,
            Err(IntakeError::MissingPayloadField("file".into()))
        );
    }

    #[tokio::test]
    async fn other_media_types_are_refused() {
        for ct in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "application/jsonx",
            "nonsense",
        ] {
            let err = extract_payload(&headers(ct), Bytes::new(), "payload")
                .await
                .unwrap_err();
            assert_eq!(
                err.status(),
                http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{ct}"
            );
        }
    }
}
