//! A configuration file kept in AWS Secrets Manager: `RELAY_CONFIG` set to a secret's ARN
//! (what the aws-relay module's `relay_config` deploys) names a document read once at start,
//! by [`fetch_config_file`](crate::bootstrap::fetch_config_file), before the configuration is
//! read. [`FileConfig::load`] then takes that
//! document wherever `RELAY_CONFIG` names the ARN, as it takes a file's text from its path.
//!
//! [`FileConfig::load`]: super::FileConfig::load

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

/// The documents read from their secrets, by ARN: read once, kept for the process.
static FETCHED: OnceLock<Mutex<BTreeMap<String, String>>> = OnceLock::new();

/// Whether `value` names a Secrets Manager secret rather than a file.
pub fn is_secret_arn(value: &str) -> bool {
    let mut parts = value.split(':');
    parts.next() == Some("arn") && parts.nth(1) == Some("secretsmanager")
}

/// The document read from the secret `arn` at start, if it was.
pub(super) fn fetched(arn: &str) -> Option<String> {
    let documents = FETCHED.get()?.lock().unwrap_or_else(|e| e.into_inner());
    documents.get(arn).cloned()
}

/// Keeps the document read from the secret `arn` for [`FileConfig::load`](super::FileConfig::load).
pub(crate) fn keep(arn: &str, document: String) {
    let documents = FETCHED.get_or_init(Mutex::default);
    let mut documents = documents.lock().unwrap_or_else(|e| e.into_inner());
    documents.insert(arn.to_owned(), document);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FileConfig;

    #[test]
    fn only_a_secrets_manager_arn_names_a_secret() {
        for (path, secret) in [
            (
                "arn:aws:secretsmanager:eu-west-1:123456789012:secret:relay-config-AbCdEf",
                true,
            ),
            (
                "arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:c",
                true,
            ),
            ("relay.toml", false),
            ("/etc/relay/relay.toml", false),
            ("arn:aws:s3:::bucket/relay.toml", false),
            ("arn.toml", false),
        ] {
            assert_eq!(is_secret_arn(path), secret, "{path}");
        }
    }

    #[test]
    fn a_document_not_read_at_start_is_refused_and_one_read_is_parsed() {
        let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:unit-config";
        let error = FileConfig::load(arn).expect_err("not read yet");
        assert!(error.to_string().contains("not read at start"), "{error}");
        keep(arn, "[relay]\nmax_body_bytes = 4096\n".into());
        let file = FileConfig::load(arn).expect("read");
        assert_eq!(file.relay.max_body_bytes.map(|b| b.get()), Some(4096));
    }
}
