//! The one Google credential the relay's Google clients share (the Pub/Sub sink and archive
//! stream, the Firestore ledger, the Cloud Storage archive and stored routes): the platform's
//! default credentials, built once per process, so that one token is fetched and refreshed for
//! all of them; none against an emulator, whose endpoint its variable gives.

use std::sync::OnceLock;

use google_cloud_auth::build_errors::Error;
use google_cloud_auth::credentials::{Builder, Credentials, anonymous};

/// The platform's default credentials, built at the first call and shared after it.
pub(crate) fn credentials() -> Result<Credentials, Error> {
    static SHARED: OnceLock<Credentials> = OnceLock::new();
    if let Some(shared) = SHARED.get() {
        return Ok(shared.clone());
    }
    let built = Builder::default().build()?;
    Ok(SHARED.get_or_init(|| built).clone())
}

/// Credentials that send nothing, for an emulator.
pub(crate) fn anonymous() -> Credentials {
    anonymous::Builder::new().build()
}

/// The endpoint of the emulator `variable` names (`host:port`, or a URL), when it is set: an
/// `http://` URL without a trailing slash.
#[cfg_attr(not(any(feature = "gcs", feature = "firestore")), allow(dead_code))]
pub(crate) fn emulator(variable: &str) -> Option<String> {
    let host = std::env::var(variable).ok().filter(|h| !h.is_empty())?;
    Some(match host.contains("://") {
        true => host.trim_end_matches('/').to_owned(),
        false => format!("http://{host}"),
    })
}
