//! How a command runs and ends: its async work on a runtime of its own, and its exit status,
//! with a failure printed once, the same way for every command.

use std::process::ExitCode;

use crate::error::CliError;
use crate::terminal::safe;

/// Runs `work` on a runtime on this thread (a store's or a ledger's few calls).
pub(crate) fn on_this_thread<T>(
    work: impl Future<Output = Result<T, CliError>>,
) -> Result<T, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Runtime)?
        .block_on(work)
}

/// Runs `work` on a runtime of two workers (the archive's reads and the destinations'
/// publishes in flight at once).
pub(crate) fn on_two_workers<T>(
    work: impl Future<Output = Result<T, CliError>>,
) -> Result<T, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(CliError::Runtime)?
        .block_on(work)
}

/// The exit status of `relay <command>`: `done` gives it from what the command found; a
/// failure is printed as `relay <command>: …` (made safe for a terminal) and exits `failed`.
pub(crate) fn finish<T>(
    command: &str,
    answer: Result<T, CliError>,
    failed: u8,
    done: impl FnOnce(T) -> ExitCode,
) -> ExitCode {
    match answer {
        Ok(found) => done(found),
        Err(error) => {
            eprintln!("relay {command}: {}", safe(&error.to_string()));
            ExitCode::from(failed)
        }
    }
}
