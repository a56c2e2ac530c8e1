//! Log setup shared by every binary: `tracing` events with fields, to stderr (stdout may carry
//! the file sink), as JSON on the platforms and as text elsewhere. `RUST_LOG` filters.

use std::io::IsTerminal as _;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the global subscriber once; later calls are ignored.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
        LogFormat::Text => builder
            .with_target(false)
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
    };
}

/// The log format to use before the configuration is read (for reporting that it is invalid).
pub fn format_from_env() -> LogFormat {
    let on_platform = std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some()
        || std::env::var_os("K_SERVICE").is_some();
    match std::env::var("RELAY_LOG_FORMAT").as_deref() {
        Ok("json") => LogFormat::Json,
        Ok("text") => LogFormat::Text,
        _ if on_platform => LogFormat::Json,
        _ => LogFormat::Text,
    }
}
