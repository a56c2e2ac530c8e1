//! Sealed records: an HMAC-SHA256 over a record's exact bytes, under the archive's key
//! (`RELAY_ARCHIVE_KEY`), so that a reader of the archive can tell a relay's record from an
//! object anyone with write access put there.
//!
//! A record's JSON document `{…}` is sealed as `{…,"mac":"<64 hex>"}`: the MAC is over the
//! document as written before the field was added, so opening a record needs no
//! canonical form: strip the last field, check the MAC over what is left, then parse.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::RecordError;

/// What the last field of a sealed record starts with.
const MAC_FIELD: &[u8] = b",\"mac\":\"";
/// The hex digits of the MAC.
const MAC_HEX: usize = 64;
/// The bytes a seal adds: the field, the digits, its closing quote (the brace was there).
pub(super) const SEAL_BYTES: usize = MAC_FIELD.len() + MAC_HEX + 1;
/// The shortest key taken: 128 bits, as hex or text.
pub(crate) const MIN_KEY_BYTES: usize = 16;

/// The key records are sealed with: the UTF-8 bytes of `RELAY_ARCHIVE_KEY`.
#[derive(Clone)]
pub struct ArchiveKey(Hmac<Sha256>);

impl std::fmt::Debug for ArchiveKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ArchiveKey(…)")
    }
}

impl ArchiveKey {
    /// The key of `secret`'s bytes; `None` when it is shorter than `MIN_KEY_BYTES`.
    pub fn new(secret: &[u8]) -> Option<Self> {
        (secret.len() >= MIN_KEY_BYTES)
            .then(|| Self(Hmac::new_from_slice(secret).expect("HMAC takes a key of any length")))
    }

    fn mac(&self, document: &[u8]) -> Hmac<Sha256> {
        let mut mac = self.0.clone();
        mac.update(document);
        mac
    }

    /// A name for `dedup_key` only a holder of the key can tell: 16 hex digits of its MAC
    /// (apart from any record's, which all begin with `{`).
    pub(crate) fn name_of(&self, dedup_key: &str) -> String {
        let tag = self.mac(format!("name:{dedup_key}").as_bytes()).finalize();
        hex::encode(&tag.into_bytes()[..8])
    }

    /// `document` (a JSON object, compact, as [`Record::to_bytes`](super::Record::to_bytes)
    /// writes it) sealed: its `mac` added as the last field.
    pub fn seal(&self, document: &[u8]) -> Vec<u8> {
        let tag = hex::encode(self.mac(document).finalize().into_bytes());
        let body = document
            .strip_suffix(b"}")
            .expect("a record is a JSON object");
        let mut sealed = Vec::with_capacity(document.len() + SEAL_BYTES);
        sealed.extend_from_slice(body);
        // `{}` has no field before the MAC's, so no comma either.
        match body == b"{" {
            true => sealed.extend_from_slice(&MAC_FIELD[1..]),
            false => sealed.extend_from_slice(MAC_FIELD),
        }
        sealed.extend_from_slice(tag.as_bytes());
        sealed.extend_from_slice(b"\"}");
        sealed
    }

    /// The document `sealed` was made from, when this key sealed it: what a relay with this
    /// key wrote, byte for byte. A record without a seal, or whose seal does not match, is
    /// refused.
    pub fn open(&self, sealed: &[u8]) -> Result<Vec<u8>, RecordError> {
        let unsealed = || RecordError::Unsealed;
        let body = sealed.strip_suffix(b"\"}").ok_or_else(unsealed)?;
        let split = body.len().checked_sub(MAC_HEX).ok_or_else(unsealed)?;
        let (head, tag) = body.split_at(split);
        let head = match head.strip_suffix(MAC_FIELD) {
            Some(head) => head,
            // `{}` sealed: the MAC's field is its only one.
            None if head == b"{\"mac\":\"" => &b"{"[..],
            None => return Err(unsealed()),
        };
        // Lower-case digits, as written: a record is its bytes, and no other spelling opens.
        if !tag
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
        {
            return Err(unsealed());
        }
        let tag = hex::decode(tag).map_err(|_| unsealed())?;
        let mut document = Vec::with_capacity(head.len() + 1);
        document.extend_from_slice(head);
        document.push(b'}');
        match self.mac(&document).verify_slice(&tag) {
            Ok(()) => Ok(document),
            Err(_) => Err(RecordError::Forged),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str) -> ArchiveKey {
        ArchiveKey::new(text.as_bytes()).unwrap()
    }

    #[test]
    fn a_sealed_document_opens_to_its_bytes_under_its_key_alone() {
        let document = br#"{"format":"dss-relay-archive/1","payload":"{\"a\":1}"}"#;
        let sealed = key("0123456789abcdef").seal(document);
        let text = std::str::from_utf8(&sealed).unwrap();
        assert!(
            text.starts_with(r#"{"format":"dss-relay-archive/1","payload":"{\"a\":1}","mac":""#)
        );
        let parsed: serde_json::Value = serde_json::from_slice(&sealed).unwrap();
        assert_eq!(parsed["mac"].as_str().unwrap().len(), 64);
        assert_eq!(key("0123456789abcdef").open(&sealed).unwrap(), document);
        assert!(matches!(
            key("another key, as long").open(&sealed),
            Err(RecordError::Forged)
        ));
        assert_eq!(
            key("0123456789abcdef")
                .open(&key("0123456789abcdef").seal(b"{}"))
                .unwrap(),
            b"{}"
        );
    }

    #[test]
    fn a_changed_byte_or_a_missing_seal_is_refused() {
        let k = key("0123456789abcdef");
        let sealed = k.seal(br#"{"dedup_key":"k1","payload":"x"}"#);
        // 0x20 turns a hex digit upper-case: another spelling of the same MAC is no seal either.
        for bit in [0x01, 0x20] {
            for i in 0..sealed.len() {
                let mut changed = sealed.clone();
                changed[i] ^= bit;
                assert!(
                    k.open(&changed).is_err(),
                    "byte {i} ^ {bit:#x} still opened"
                );
            }
        }
        for unsealed in [
            &br#"{"dedup_key":"k1","payload":"x"}"#[..],
            b"",
            b"}",
            b"\"}",
            &sealed[1..],
            &sealed[..sealed.len() - 1],
        ] {
            assert!(k.open(unsealed).is_err(), "{unsealed:?} opened");
        }
        assert!(ArchiveKey::new(b"short").is_none());
    }
}
