//! The framework-free core of the DSS notification relay.
//!
//! A request enters through [`Relay::handle`], the one entry point: its head is checked and it
//! is let in by `admission.rs`, which reads the body; it is checked by its [`source`]'s scheme
//! ([`schemes`]; the DSS's over [`verify`]), has its payload taken out of the body by [`intake`],
//! is parsed into a [`Notification`], is routed by
//! the `live::RoutingTable` in effect and leaves through every [`Sink`] its routes name.
//! Platform adapters (Lambda, Cloud Run) start through [`bootstrap`], hand their request's head
//! and body to `handle` and copy the [`Outcome`] back. [`config`] reads the variables and the
//! `RELAY_CONFIG` file into the types that [`sink`], [`route`] and [`live`] define.
#![warn(missing_docs)]

mod admission;
pub mod archive;
pub mod bootstrap;
pub mod cloud;
pub mod config;
pub mod error;
#[cfg(any(feature = "pubsub", feature = "gcs", feature = "firestore"))]
mod google;
mod group_commit;
pub mod intake;
mod json;
pub mod ledger;
mod lenient;
pub mod live;
mod mac;
pub mod metrics;
pub mod notification;
pub mod outcome;
pub mod relay;
pub mod route;
pub mod schemes;
#[cfg(feature = "secrets")]
mod secrets;
pub mod sink;
pub mod source;
mod telemetry;
mod text;
pub mod transform;
pub mod verify;

pub use config::Config;
pub use error::Error;
pub use notification::{Notification, Unverified, Verified};
pub use outcome::Outcome;
pub use relay::{Relay, StartError};
pub use sink::{Message, Receipt, Sink, SinkError};
pub use text::{DocumentError, InvalidValue};

/// `Result` with the relay's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
