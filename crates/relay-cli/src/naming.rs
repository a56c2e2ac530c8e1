//! The names `relay split start --create` gives what it makes, shared by the SQS and the
//! Pub/Sub side: `<prefix><split>-<6 hex digits>`.

use crate::error::CliError;

/// The name of what `--create` makes for split `split`: `<prefix><split>-<6 hex digits>`. The
/// random suffix matters: SQS refuses a deleted queue's name for 60 seconds.
pub(crate) fn split_id(prefix: &str, split: &str) -> Result<String, CliError> {
    let mut suffix = [0u8; 3];
    getrandom::fill(&mut suffix).map_err(CliError::Randomness)?;
    Ok(format!("{prefix}{split}-{}", hex::encode(suffix)))
}
