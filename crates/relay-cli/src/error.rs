//! Why a `relay` command failed: one type for every command, each variant a kind of cause. A
//! command prints it after `relay <command>: ` and exits non-zero.

use relay_core::archive::ArchiveError;
use relay_core::config::ConfigErrors;
use relay_core::ledger::LedgerError;
use relay_core::live::RoutesError;
use relay_core::live::store::{StoreError, WriteError};

/// A command's failure.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// What was given (an argument, a flag's value, a file, a document) cannot be used; the
    /// message says what and why.
    #[error("{0}")]
    Invalid(String),
    /// The relay configuration is refused.
    #[error(transparent)]
    Config(#[from] ConfigErrors),
    /// The stored routes could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stored routes could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// The relay's checks refuse the routes a change would leave.
    #[error(transparent)]
    Routes(#[from] RoutesError),
    /// The delivery ledger failed.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The archive failed.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// The command reads the archive, and none is configured.
    #[error(
        "no archive is configured: set RELAY_ARCHIVE_URL and RELAY_ARCHIVE_KEY (or [relay] archive_url and archive_key) as the relays have them"
    )]
    NoArchive,
    /// A replay cannot run as asked.
    #[error(transparent)]
    Replay(#[from] relay_core::relay::ReplayError),
    /// The relay's own parts (its ledger, archive and destinations) could not be opened.
    #[error(transparent)]
    Start(#[from] relay_core::StartError),
    /// An archived payload is not a notification.
    #[error(transparent)]
    Payload(#[from] relay_core::notification::PayloadError),
    /// A request could not be signed as the DSS signs.
    #[error(transparent)]
    Sign(#[from] relay_core::verify::SignError),
    /// A duration given is not one (`90s`, `2h`, `7d`).
    #[error(transparent)]
    Duration(#[from] humantime::DurationError),
    /// A document could not be written as TOML.
    #[error(transparent)]
    Toml(#[from] toml::ser::Error),
    /// A document could not be written or read as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A local file.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The command's runtime could not start.
    #[error("cannot start: {0}")]
    Runtime(#[source] std::io::Error),
    /// The relay's destinations could not be opened for a replay.
    #[error("cannot start the relay's destinations: {0}")]
    Destinations(#[source] relay_core::StartError),
    /// A cloud's API refused or failed a call (a split's queue, topic or subscription); the
    /// message names the call.
    #[error("{0}")]
    Cloud(String),
    /// A failure at a named place: a store's URL, a file, a step of the command.
    #[error("{at}: {source}")]
    At {
        /// Where: a URL, a path, or the step (`backfill`).
        at: String,
        /// What failed there.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A file given could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file, as given.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The system gave no randomness for a new name or run id.
    #[error("no randomness available: {0}")]
    Randomness(#[source] getrandom::Error),
    /// The command ran and left part of what it was asked undone; the message says what, and
    /// how to finish it.
    #[error("{0}")]
    Incomplete(String),
}

impl CliError {
    /// `source` failed at `at` (a URL, a path, a step).
    pub(crate) fn at(
        at: impl std::fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::At {
            at: at.to_string(),
            source: Box::new(source),
        }
    }

    /// What was given cannot be used: `message` says what and why.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid(message.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_prints_its_cause_with_its_place() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let cases = [
            (CliError::invalid("--ttl: too long"), "--ttl: too long"),
            (CliError::at("s3://b/k", io()), "s3://b/k: no such file"),
            (
                CliError::Read {
                    path: "n.json".into(),
                    source: io(),
                },
                "cannot read n.json: no such file",
            ),
            (CliError::Runtime(io()), "cannot start: no such file"),
        ];
        for (error, shown) in cases {
            assert_eq!(error.to_string(), shown);
        }
        assert!(
            CliError::NoArchive
                .to_string()
                .starts_with("no archive is configured")
        );
        let at = CliError::at("backfill", io());
        let source = std::error::Error::source(&at).expect("the cause is kept");
        assert_eq!(source.to_string(), "no such file");
    }
}
