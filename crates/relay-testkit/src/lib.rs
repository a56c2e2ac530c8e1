//! What the relay's tests share, so that each is written once: the DSS captures by name,
//! configurations from `(variable, value)` pairs or a file, sinks that record, fail or never
//! answer, a [`Relay`](relay_core::Relay) with those sinks and the configured routes, requests
//! signed and encoded as the DSS sent them, and the relay's binaries started as processes.
//!
//! What [`config`](mod@config), [`process`], [`requests`] and [`sinks`] hold is also at the
//! crate's root (`relay_testkit::config`, `relay_testkit::Signer`, `relay_testkit::free_port`).

pub mod archive;
pub mod capture;
pub mod config;
pub mod dynamodb;
pub mod fake_dynamodb;
pub mod fake_firehose;
pub mod fake_sqs;
pub mod fuzz;
pub mod fuzz_schemes;
pub mod ledger;
pub mod loopback;
pub mod metrics;
pub mod process;
pub mod requests;
pub mod sinks;
pub mod stores;

pub use config::{
    ConfigFile, FILES_WITH_A_BROKEN_SECRET_LINE, config, config_errors, file_route, vars,
};
pub use process::{RelayProcess, assert_refuses_without_a_key, built_binary, free_port};
pub use requests::{BOUNDARY, Signer, assert_accepted, status_and_code, v2};
pub use sinks::{FailingSink, RecordingSink, StuckSink, capture_clock, capture_relay, relay};
