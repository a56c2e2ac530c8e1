//! Integration tests against real emulators: moto for SQS, SNS, S3 and DynamoDB,
//! fake-gcs-server for Cloud Storage, Google's emulators for Pub/Sub and Firestore. Start them with `infra/local/emulators.sh start`, `source infra/local/env.sh`, then
//! `cargo test -p relay-tests --features integration-tests` (`make test` does all of it).
#![cfg(feature = "integration-tests")]

mod archive;
mod archive_stream;
mod cloudevents;
mod common;
mod deployed;
mod failures;
mod fanout;
mod identity;
mod lambda;
mod ledger_dynamodb;
mod ledger_firestore;
mod ledger_relays;
mod ledger_upgrade;
mod pubsub;
mod routes;
mod routing;
mod secrets;
mod sns;
mod sqs;
mod trace_context;
mod transform;
