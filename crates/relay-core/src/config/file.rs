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
//! ```
//!
//! The same types read the variables, so a value is accepted or refused the same way in both.
//! An error gives the file, the line and column, and the parser's message, never the text of
//! the line, which may hold a secret.

use serde::Deserialize;

use super::settings::Settings;
use crate::route::RouteSpec;
use crate::sink::SinkTables;

/// The file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Relay settings.
    #[serde(default)]
    pub relay: Settings,
    /// Named sinks.
    #[serde(default)]
    pub sinks: SinkTables,
    /// Ordered routes.
    #[serde(default)]
    pub routes: Vec<RouteSpec>,
}

impl FileConfig {
    /// Reads and parses the file at `path`.
    pub fn load(path: &str) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        Self::parse(&text).map_err(|e| format!("{path}:{e}"))
    }

    /// Parses a configuration document; the error starts with `line:column: `.
    pub fn parse(text: &str) -> Result<Self, String> {
        parse_document(text)
    }
}

/// Parses a TOML document into `T`; the error is `line:column: ` and the parser's message,
/// never the text of the line. The stored routes document is read this way too.
pub fn parse_document<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map_or((1, 1), |span| position(text, span.start));
        format!("{line}:{column}: {}", e.message().trim_end())
    })
}

/// The 1-based line and column of byte `offset` in `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
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
            let e = FileConfig::parse(text).unwrap_err();
            assert!(e.contains(expected), "expected {expected:?} in {e}");
            assert!(
                e.chars().next().is_some_and(|c| c.is_ascii_digit()),
                "a location first: {e}"
            );
            assert!(!e.contains("s3cret"), "the secret is echoed: {e}");
        }
    }

    #[test]
    fn position_counts_lines_and_columns() {
        assert_eq!(position("ab\ncd", 4), (2, 2));
        assert_eq!(position("ab", 0), (1, 1));
    }
}
