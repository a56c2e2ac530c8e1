//! `BENCH_ONLY=warm`: what memory adds to a warm invocation of relay-lambda's bootstrap.
//!
//! One process per row, started as the cold rows start it (full CPU, no quota), handed
//! [`INVOCATIONS`] events one at a time, each a distinct DSS-signed notification; the first, a
//! cold one, is not counted. Every loopback endpoint answers after [`ENDPOINT_MS`], as a nearby
//! AWS endpoint might: SQS (the destination), and with memory the DynamoDB ledger and the
//! archive's Firehose stream (the memory table's variables for its DynamoDB rows). A claim and a
//! settlement are a round trip each; the archive's record is published beside the SQS message,
//! so the ledger and the archive together should add what the ledger alone adds: two round
//! trips, not three.
//! Every invocation must be answered 202 `published`, and SQS must hold each notification once.

use std::time::Duration;

use relay_testkit::fake_dynamodb::FakeDynamoDb;
use relay_testkit::fake_firehose::FakeFirehose;
use relay_testkit::fake_sqs::{FakeSqs, Fault};

use super::events::events;
use super::runtime_api::RuntimeApi;
use super::{Bench, FULL_VCPU_MB, fail, ms, quantile, until_idle};
use crate::memory::Memory;

/// Events handed to each process, the first (cold) one not counted.
const INVOCATIONS: usize = 101;
/// How long every endpoint takes to answer.
const ENDPOINT_MS: u64 = 5;

/// What one row measured.
struct Row {
    /// Each warm invocation, from the event handed out to its response posted.
    invocations: Vec<Duration>,
    /// Ledger calls and Firehose calls per invocation.
    ledger_calls: f64,
    stream_calls: f64,
}

/// The table: without memory, with the ledger, with the ledger and the archive.
pub(crate) async fn table() {
    let mut bench = Bench::new(super::bootstrap(), Some(0));
    let rows = [
        Memory::None,
        Memory::DynamoDb(ENDPOINT_MS),
        Memory::DynamoDbAndFirehose,
    ];
    let mut measured = Vec::with_capacity(rows.len());
    for memory in rows {
        measured.push(bench.warm(memory).await);
    }
    println!(
        "| relay-lambda warm invocation, endpoints answering in {ENDPOINT_MS} ms | invocations | p50 (ms) | p90 (ms) | added to no memory, p50 (ms) | ledger calls | stream calls |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let p50 = |row: &Row| ms(quantile(&row.invocations, 0.5));
    for (memory, row) in rows.iter().zip(&measured) {
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} |",
            memory.name(),
            row.invocations.len(),
            p50(row),
            ms(quantile(&row.invocations, 0.9)),
            p50(row) - p50(&measured[0]),
            row.ledger_calls,
            row.stream_calls,
        );
    }
}

impl Bench {
    /// One process with `memory`, through [`INVOCATIONS`] events.
    async fn warm(&mut self, memory: Memory) -> Row {
        self.starts += 1;
        let n = self.starts;
        let latency = Duration::from_millis(ENDPOINT_MS);
        let sqs = FakeSqs::start(Fault::Latency(latency)).await;
        let (dynamodb, firehose) = (FakeDynamoDb::start().await, FakeFirehose::start().await);
        dynamodb.set_latency(latency);
        firehose.set_latency(latency);
        let (events, payloads) = events(n, INVOCATIONS);
        let api = RuntimeApi::start(events, None).await;
        let output = self.scratch.join(format!("warm-{n}.log"));
        let mut command = self.process(&api, FULL_VCPU_MB, &output);
        command
            .env("RELAY_SQS_QUEUE_URL", sqs.queue_url())
            .env("AWS_ENDPOINT_URL_SQS", &sqs.endpoint)
            .envs(memory.env(&self.scratch, Some(&dynamodb), Some(&firehose)));
        let (mut child, _) = (self.spawner.spawn(command, None))
            .unwrap_or_else(|e| panic!("{} does not run: {e}", self.binary.display()));
        api.set_pid(child.id());
        let what = format!("warm invocations with {}", memory.name());
        until_idle(&mut child, &api, &output, &what).await;
        child.kill().expect("the process is ended");
        child.wait().expect("the process is reaped");
        let log = api.log();
        if let Err(why) = answered(&log.responses, sqs.distinct(), payloads.len()) {
            fail(&output, &what, why);
        }
        let handed = log.handed.iter().map(|(_, at)| at);
        let answered = log.responses.iter().map(|(_, at, _)| at);
        let per = |calls: u64| calls as f64 / INVOCATIONS as f64;
        Row {
            invocations: handed.zip(answered).skip(1).map(|(h, a)| *a - *h).collect(),
            ledger_calls: per(dynamodb.calls().total()),
            stream_calls: per(firehose.calls()),
        }
    }
}

/// Why the exchange is not the expected one: every event answered 202 `published`, and the
/// queue holding each of the `sent` notifications (`distinct` of them) once.
fn answered(
    responses: &[super::runtime_api::Posted],
    distinct: usize,
    sent: usize,
) -> Result<(), String> {
    if responses.len() != sent || distinct != sent {
        return Err(format!(
            "{} answers and {distinct} notifications in the queue, for {sent} events",
            responses.len()
        ));
    }
    super::all_published(responses)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The row's machinery against the debug relay-lambda: every invocation answered 202 and
    /// published once (the row panics otherwise), each with one claim and one settlement, and
    /// the archive's records through the stream.
    #[test]
    fn warm_invocations_with_memory_against_the_debug_relay_lambda() {
        super::super::tests::with_debug_bench(async |bench| {
            let row = bench.warm(Memory::DynamoDbAndFirehose).await;
            assert_eq!(row.invocations.len(), INVOCATIONS - 1);
            let minimum = Duration::from_millis(3 * ENDPOINT_MS);
            assert!(
                row.invocations.iter().all(|d| *d >= minimum),
                "three round trips each"
            );
            assert!(
                (2.0..2.05).contains(&row.ledger_calls),
                "{}",
                row.ledger_calls
            );
            assert!(
                (1.0..1.05).contains(&row.stream_calls),
                "{}",
                row.stream_calls
            );
        });
    }
}
