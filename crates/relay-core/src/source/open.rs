//! Opening a request: verified by its source's scheme and keys, then read as the DSS's
//! notification or as another sender's event. A request that verifies and is then refused
//! (400 or 415) comes back with what its signature proved, so that the relay can keep it.

use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use super::{DedupRule, Source};
use crate::error::Error;
use crate::intake::extract_payload;
use crate::notification::{Event, Notification, Origin, PayloadError, Verified};
use crate::schemes::{self, Check, Proof, SignedRequest};
use crate::verify::Clock;

/// Why a request was not opened.
#[derive(Debug)]
pub(crate) enum Opened {
    /// It did not verify, or cannot be answered (nothing is kept).
    Unverified(Error),
    /// It verified, and was then refused (400 or 415).
    Refused(Refusal),
}

/// A verified request refused after verification: the answer, and what its signature proved.
#[derive(Debug)]
pub(crate) struct Refusal {
    /// The 400 or 415 it is answered.
    pub(crate) error: Error,
    /// What its signature proved: the key id, and another sender's delivery id and event type.
    pub(crate) proof: Proof,
}

impl Source {
    /// The source's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Verifies a request with this source's scheme and keys, and opens it ([`read`]). A
    /// request that verifies and is then refused is [`Opened::Refused`], with what its
    /// signature proved: only a holder of the key can send one, so the relay keeps it.
    ///
    /// [`read`]: Self::read
    pub(crate) async fn open(
        &self,
        parts: &Parts,
        body: Bytes,
        payload_field: &str,
        clock: &dyn Clock,
    ) -> Result<Notification<Verified>, Opened> {
        let signed = SignedRequest {
            method: &parts.method,
            uri: &parts.uri,
            headers: &parts.headers,
            body: &body,
        };
        let check = Check::new(&signed, &self.secrets, clock.now());
        let proof = (self.scheme.verify(check)).map_err(|e| Opened::Unverified(e.into()))?;
        let verified = Verified::new(&proof, Origin::Request);
        match self
            .read(parts, body, payload_field, &proof, verified)
            .await
        {
            Ok(notification) => Ok(notification),
            Err(error @ (Error::Intake(_) | Error::Payload(_))) => {
                Err(Opened::Refused(Refusal { error, proof }))
            }
            Err(error) => Err(Opened::Unverified(error)),
        }
    }

    /// Opens a verified request (`proof` what its signature proved): the DSS's payload parsed
    /// as a notification, another source's body as its event. Nothing here allocates a copy of
    /// the body. `relay replay --refused` comes here with an archived request's proof.
    pub(crate) async fn read(
        &self,
        parts: &Parts,
        body: Bytes,
        payload_field: &str,
        proof: &Proof,
        verified: Verified,
    ) -> Result<Notification<Verified>, Error> {
        match &self.dedup {
            DedupRule::Dss => {
                let payload = extract_payload(&parts.headers, body, payload_field).await?;
                let notification = Notification::parse(payload)?;
                let notification = match self.configured {
                    true => notification.through(Arc::clone(&self.name)),
                    false => notification,
                };
                Ok(notification.into_verified(verified))
            }
            _ => {
                let document = document(&parts.headers, &body)?;
                let event = self.event(parts, body, document, proof)?;
                Ok(Notification::event(event, verified))
            }
        }
    }

    /// The event of a verified request: its type and delivery id, and its id by the source's
    /// dedup rule.
    fn event(
        &self,
        parts: &Parts,
        payload: Bytes,
        document: Value,
        proof: &Proof,
    ) -> Result<Event, Error> {
        let missing = |what: String| Error::Payload(PayloadError::MissingDedupKey(what));
        let event_id = match &self.dedup {
            // A DSS source never comes here (its notification is parsed); its rule would be the
            // body's bytes.
            DedupRule::Dss | DedupRule::Body => hex::encode(Sha256::digest(&payload)),
            DedupRule::DeliveryId => proof
                .delivery_id
                .clone()
                .ok_or_else(|| missing("delivery id".into()))?,
            DedupRule::Header(name) => schemes::header(&parts.headers, name.as_str())?
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
                .ok_or_else(|| missing(format!("{name} header")))?,
            DedupRule::Field(path) => field_text(&document, path)
                .ok_or_else(|| missing(format!("field {}", path.join("."))))?,
        };
        let event_type = match (&self.event_type_header, &self.event_type_field) {
            (Some(header), _) => {
                schemes::header(&parts.headers, header.as_str())?.map(str::to_owned)
            }
            (None, Some(path)) => field_text(&document, path),
            (None, None) => None,
        }
        .or_else(|| proof.event_type.clone());
        Ok(Event {
            payload,
            document,
            source: Arc::clone(&self.name),
            event_type,
            delivery_id: proof.delivery_id.clone(),
            event_id,
        })
    }
}

/// A field's value as text: a string as it is, a number or boolean as JSON writes it; absent
/// for other values and empty strings.
fn field_text(document: &Value, path: &[String]) -> Option<String> {
    let value = path
        .iter()
        .try_fold(document, |value, name| value.get(name.as_str()))?;
    match value {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// What routes read of another source's body: its JSON (any `application/json` or `+json`
/// type), its form fields as an object of strings (a repeated name: a list), or an empty object
/// for any other body. A JSON body that does not parse is refused (400 `invalid_json`).
pub(crate) fn document(headers: &http::HeaderMap, body: &[u8]) -> Result<Value, PayloadError> {
    let media = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.parse::<mime::Mime>().ok());
    let Some(media) = media else {
        return Ok(Value::Object(Map::new()));
    };
    let json = media.subtype() == mime::JSON || media.suffix() == Some(mime::JSON);
    if json {
        return serde_json::from_slice(body).map_err(|e| PayloadError::InvalidJson(e.to_string()));
    }
    if media.essence_str() == mime::APPLICATION_WWW_FORM_URLENCODED.essence_str() {
        let mut fields = Map::new();
        for (name, value) in form_urlencoded::parse(body) {
            let value = Value::String(value.into_owned());
            match fields.get_mut(name.as_ref()) {
                None => {
                    fields.insert(name.into_owned(), value);
                }
                Some(Value::Array(values)) => values.push(value),
                Some(first) => *first = Value::Array(vec![first.take(), value]),
            }
        }
        return Ok(Value::Object(fields));
    }
    Ok(Value::Object(Map::new()))
}
