//! Verified, then refused: a request whose signature checks out and that the relay then cannot
//! take (400 or 415: a subscription registered with another `payload_form_field`, a body the
//! configuration does not read). Only a holder of the key can send one, and the sender drops it
//! when it gives up retrying, so the relay writes it to the archive as refused, with its code,
//! before it answers ([`Relay::keep_refused`]); `relay replay --refused` opens it again with the
//! configuration in effect then ([`Relay::reopen_refused`]) and sends it through the one attempt
//! pipeline, like any archived notification.

use std::time::SystemTime;

use bytes::Bytes;
use http::request::Parts;

use super::Relay;
use super::replay::ReplayError;
use crate::archive::{Record, Refused};
use crate::error::Error;
use crate::notification::{Notification, Origin, Verified};
use crate::route::request_document;
use crate::schemes::Proof;
use crate::sink::Message;
use crate::source::{Refusal, Source};

/// The attributes a refused request's record keeps: its source and what its signature proved.
const PROVED: [&str; 4] = [
    "relay.source",
    "relay.key_id",
    "relay.delivery_id",
    "relay.event_type",
];

impl Relay {
    /// Counts and logs a request `source` verified and then refused, and writes it to the
    /// archive as refused. The answer: the refusal once the record is written (or without an
    /// archive), 503 `sink_unavailable` when it could not be, so that the sender retries.
    pub(super) async fn keep_refused(
        &self,
        parts: &Parts,
        body: Bytes,
        source: &Source,
        refusal: Refusal,
        received_at: SystemTime,
    ) -> Error {
        let Refusal { error, proof } = refusal;
        let code = error.code();
        let Some(archive) = &self.archive else {
            self.metrics.verified_refused(code, false);
            tracing::warn!(source = source.name(), code, error = %error, "A verified request was refused; without an archive it is not kept.");
            return error;
        };
        let values = [
            Some(source.name()),
            proof.key_id.as_deref(),
            proof.delivery_id.as_deref(),
            proof.event_type.as_deref(),
        ];
        let attributes = PROVED
            .iter()
            .zip(values)
            .filter_map(|(name, value)| Some(((*name).to_owned(), value?.to_owned())))
            .collect();
        let refused = Refused {
            status: error.status().as_u16(),
            code: code.to_owned(),
            message: error.to_string(),
        };
        let request = request_document(parts.uri.path(), parts.uri.query(), &parts.headers);
        let named = self.table.load().request_headers().clone();
        let record = Record::refused(received_at, body, attributes, request, &named, refused);
        let message = record.message();
        let written =
            tokio::time::timeout(self.config.sink_timeout, archive.sink.publish(&message)).await;
        let failure = match written {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some("the archive did not answer in time".to_owned()),
        };
        self.metrics.verified_refused(code, failure.is_none());
        match failure {
            None => {
                tracing::warn!(source = source.name(), code, error = %error, key = %record.dedup_key, "A verified request was refused; it is kept in the archive for relay replay --refused.");
                error
            }
            Some(reason) => {
                tracing::error!(source = source.name(), code, error = %reason, "A verified request was refused and could not be kept in the archive; the sender is asked to retry.");
                Error::SinkRetryable {
                    sink: archive.name.clone(),
                }
            }
        }
    }

    /// A refused request's record opened with the configuration in effect now: its source by
    /// its path, read with what its signature proved on arrival; its notification and its
    /// unshaped message. Still refused: [`ReplayError::Refused`].
    pub(super) async fn reopen_refused(
        &self,
        record: &Record,
    ) -> Result<(Notification<Verified>, Message), ReplayError> {
        let path = record.request["path"].as_str().unwrap_or("/");
        let mut request = http::Request::post(path);
        if let Some(headers) = record.request["headers"].as_object() {
            for (name, values) in headers {
                for value in values.as_array().into_iter().flatten() {
                    request = request.header(name.as_str(), value.as_str().unwrap_or_default());
                }
            }
        }
        let (parts, ()) = request
            .body(())
            .map_err(|e| ReplayError::Malformed(e.to_string()))?
            .into_parts();
        let source = self
            .sources
            .for_path(path)
            .ok_or(ReplayError::Refused(Error::UnknownPath))?;
        let proof = Proof {
            key_id: record.attribute("relay.key_id").map(str::to_owned),
            delivery_id: record.attribute("relay.delivery_id").map(str::to_owned),
            event_type: record.attribute("relay.event_type").map(str::to_owned),
            signed_at: None,
        };
        let verified = Verified::new(&proof, Origin::Archive);
        let payload_field = &self.config.payload_field;
        let notification = source
            .read(
                &parts,
                record.payload.clone(),
                payload_field,
                &proof,
                verified,
            )
            .await
            .map_err(ReplayError::Refused)?;
        let message = Message::new(&notification, &parts.headers, record.received_at);
        Ok((notification, message))
    }
}
