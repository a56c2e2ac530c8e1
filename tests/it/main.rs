//! Integration tests against real emulators: moto for SQS and SNS, Google's emulator for
//! Pub/Sub. Start them with `infra/local/emulators.sh start`, `source infra/local/env.sh`, then
//! `cargo test -p relay-tests --features integration-tests` (`make test` does all of it).
#![cfg(feature = "integration-tests")]

mod common;
mod failures;
mod fanout;
mod lambda;
mod ledger_dynamodb;
mod ledger_firestore;
mod pubsub;
mod routes;
mod routing;
mod secrets;
mod sns;
mod sqs;
