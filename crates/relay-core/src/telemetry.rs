//! Log setup shared by every binary: `tracing` events with fields, to stderr (stdout may carry
//! the file sink), as JSON on the platforms and as text elsewhere. `RUST_LOG` filters: a level
//! (`warn`), `target=level` directives (`relay_core::sink=debug`), or both, separated by commas.

use std::io::IsTerminal as _;

use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::config::LogFormat;

/// What is logged without `RUST_LOG`, or when it does not parse.
const DEFAULT_FILTER: &str = "info";

/// Installs the global subscriber once; later calls are ignored.
pub(crate) fn init(format: LogFormat) {
    let (filter, refused) = filter_from(std::env::var("RUST_LOG").ok().as_deref());
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Json => tracing_subscriber::registry()
            .with(
                fmt.json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_filter(filter),
            )
            .try_init(),
        LogFormat::Text => tracing_subscriber::registry()
            .with(
                fmt.with_target(false)
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_filter(filter),
            )
            .try_init(),
    };
    if let (Ok(()), Some(error)) = (installed, refused) {
        tracing::warn!(%error, default = DEFAULT_FILTER, "RUST_LOG does not parse; logging at the default");
    }
}

/// The filter `RUST_LOG` (when set and not empty) asks for, else [`DEFAULT_FILTER`] with why
/// the variable was refused.
fn filter_from(rust_log: Option<&str>) -> (Targets, Option<String>) {
    let default = || DEFAULT_FILTER.parse().expect("the default filter parses");
    match rust_log.map(str::trim).filter(|s| !s.is_empty()) {
        None => (default(), None),
        Some(text) => match text.parse::<Targets>() {
            Ok(filter) => (filter, None),
            Err(e) => (default(), Some(e.to_string())),
        },
    }
}

/// The log format to use before the configuration is read (for reporting that it is invalid).
pub(crate) fn format_from_env() -> LogFormat {
    let on_platform = std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some()
        || std::env::var_os("K_SERVICE").is_some();
    match std::env::var("RELAY_LOG_FORMAT").as_deref() {
        Ok("json") => LogFormat::Json,
        Ok("text") => LogFormat::Text,
        _ if on_platform => LogFormat::Json,
        _ => LogFormat::Text,
    }
}

#[cfg(test)]
mod tests {
    use tracing::Level;

    use super::*;

    #[test]
    fn rust_log_sets_levels_per_target() {
        let (filter, refused) = filter_from(Some("error,relay_core::relay::publish=warn"));
        assert_eq!(refused, None);
        assert!(filter.would_enable("relay_core::relay::publish", &Level::WARN));
        assert!(!filter.would_enable("relay_core::relay::publish", &Level::INFO));
        assert!(filter.would_enable("relay_core::sink", &Level::ERROR));
        assert!(!filter.would_enable("relay_core::sink", &Level::WARN));
    }

    #[test]
    fn without_rust_log_info_and_above_are_logged() {
        for unset in [None, Some(""), Some("  ")] {
            let (filter, refused) = filter_from(unset);
            assert_eq!(refused, None);
            assert!(filter.would_enable("relay_core", &Level::INFO));
            assert!(!filter.would_enable("relay_core", &Level::DEBUG));
        }
    }

    #[test]
    fn a_rust_log_that_does_not_parse_falls_back_to_info_and_says_why() {
        let (filter, refused) = filter_from(Some("relay_core=loud"));
        assert!(refused.is_some_and(|e| !e.is_empty()));
        assert!(filter.would_enable("relay_core", &Level::INFO));
        assert!(!filter.would_enable("relay_core", &Level::DEBUG));
    }
}
