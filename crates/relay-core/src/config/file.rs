//! The configuration file named by `RELAY_CONFIG`: relay settings, named sinks and routes.
//!
//! ```toml
//! [relay]                      # the settings a file may hold; variables override them
//! max_clock_skew_secs = 300
//! hmac_keys = { "hca-dss:…" = "…" }
//!
//! [sinks.indexer]
//! type = "sqs"
//! queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/indexer.fifo"
//! message_group_id = "{match.bundle_uuid}"
//!
//! [[routes]]
//! name = "creates"
//! match = { event_type = ["CREATE"] }
//! to = ["indexer"]
//!
//! [sources.github]             # optional: other senders, each on its own paths
//! scheme = "github"
//! paths = ["/github"]
//! secret_env = "GITHUB_WEBHOOK_SECRET"
//! ```
//!
//! The same types read the variables, so a value is accepted or refused the same way in both.
//! An error gives the file, the line and column, and the parser's message, never the text of
//! the line, which may hold a secret.

use serde::Deserialize;

use super::settings::Settings;
use crate::route::RouteSpec;
use crate::sink::SinkSpecs;
use crate::text::{DocumentError, parse_document};

/// The file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Relay settings.
    #[serde(default)]
    pub relay: Settings,
    /// Named sinks.
    #[serde(default)]
    pub sinks: SinkSpecs,
    /// Ordered routes.
    #[serde(default)]
    pub routes: Vec<RouteSpec>,
    /// Named sources: who may send, on which paths, signed how.
    #[serde(default)]
    pub sources: std::collections::BTreeMap<String, crate::source::SourceSpec>,
}

impl FileConfig {
    /// Reads and parses the file at `path`.
    /// A Secrets Manager secret's ARN instead of a path takes the document read from it at
    /// start ([`fetch_config_file`](crate::bootstrap::fetch_config_file)).
    pub fn load(path: &str) -> Result<Self, FileError> {
        let text = if super::remote::is_secret_arn(path) {
            super::remote::fetched(path).ok_or_else(|| FileError::NotFetched {
                arn: path.to_owned(),
            })?
        } else {
            std::fs::read_to_string(path).map_err(|source| FileError::Read {
                path: path.to_owned(),
                source,
            })?
        };
        Self::parse(&text).map_err(|error| FileError::Parse {
            path: path.to_owned(),
            error,
        })
    }

    /// Parses a configuration document.
    pub fn parse(text: &str) -> Result<Self, DocumentError> {
        parse_document(text)
    }
}

/// Why the `RELAY_CONFIG` file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// It cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// It names a Secrets Manager secret that was not read at start.
    #[error("{arn}: a Secrets Manager secret not read at start")]
    NotFetched {
        /// The secret.
        arn: String,
    },
    /// It does not parse.
    #[error("{path}:{error}")]
    Parse {
        /// The file.
        path: String,
        /// Where and why.
        error: DocumentError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_give_the_location_and_never_the_line() {
        let cases = [
            ("[relay]\nhmac_secret = \"s3cret\n", "2:"),
            ("[relay]\nhmac_keys = { a = \"s3cret\", b = }\n", "2:"),
            (
                "[relay]\nhmac_secret = \"s3cret\"\nlisten_port = 1\n",
                "unknown key \"listen_port\"",
            ),
            (
                "[relay]\nhmac_secret = \"s3cret\"\nmax_body_bytes = 0\n",
                "positive number of bytes",
            ),
            (
                "[sinks.q]\ntype = \"sqs\"\nqueue = \"s3cret\"\n",
                "unknown field `queue`",
            ),
            (
                "[[routes]]\nname = \"s3cret\"\nto = []\nstops = true\n",
                "unknown field `stops`",
            ),
        ];
        for (text, expected) in cases {
            let e = FileConfig::parse(text).unwrap_err().to_string();
            assert!(e.contains(expected), "expected {expected:?} in {e}");
            assert!(
                e.chars().next().is_some_and(|c| c.is_ascii_digit()),
                "a location first: {e}"
            );
            assert!(!e.contains("s3cret"), "the secret is echoed: {e}");
        }
    }
}
