//! The fault matrix: the relay-gcf binary in front of a fault-injecting SQS endpoint, fed by a
//! sender that retries every non-2xx as the DSS does. For each fault: every notification
//! answered 2xx is in every queue it was routed to; after the retries, every notification is;
//! duplicates are counted. Also SIGTERM in the middle of a burst: nothing acknowledged is lost,
//! and no request that reached the relay is left without an answer; and SIGKILL in the middle of
//! a burst, while the embedded stores' group commits are in flight: nothing acknowledged is lost
//! from the queue or the archive. Every row runs twice: without memory, and with the embedded
//! stores (`RELAY_LEDGER_URL` an SQLite file, `RELAY_ARCHIVE_URL` a folder), which must leave no
//! duplicate but those of sink calls whose outcome the relay could not know, and exactly one
//! archive record per notification.
//!
//! `make faults` sends 10,000 notifications per fault (`FAULT_NOTIFICATIONS`) and prints the
//! table; `make test` runs the same matrix with 1,000. Needs the relay-gcf binary built next to
//! this test (`cargo build --workspace`).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use relay_testkit::fake_sqs::{FakeSqs, Fault, QUEUE};
use relay_testkit::{RelayProcess, Signer, built_binary};
use tokio::sync::Semaphore;

const SECRET: &str = "fault-matrix-secret";
const CONCURRENCY: usize = 32;

fn notifications() -> usize {
    std::env::var("FAULT_NOTIFICATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

/// The second queue of the fan-out row.
const SECOND_QUEUE: &str = "faults-second";

/// How a row's relay runs: with or without memory, to one queue or two.
#[derive(Debug)]
struct Setup {
    /// The folder of the ledger file and the archive (and the configuration), when on.
    ledger: Option<tempfile::TempDir>,
    /// Publish to [`SECOND_QUEUE`] as well.
    fan_out: bool,
}

impl Setup {
    fn new(ledger: bool, fan_out: bool) -> Self {
        Self {
            ledger: ledger.then(|| tempfile::tempdir().expect("a temporary folder")),
            fan_out,
        }
    }

    /// The queues every notification is routed to.
    fn queues(&self) -> Vec<&'static str> {
        match self.fan_out {
            true => vec![QUEUE, SECOND_QUEUE],
            false => vec![QUEUE],
        }
    }

    fn name(&self) -> &'static str {
        match self.ledger {
            Some(_) => "SQLite + folder",
            None => "off",
        }
    }

    /// How many notifications the archive holds a record of (`None` without one): the
    /// distinct dedup keys of its records, whether written alone or as a batch's lines.
    fn archived(&self) -> Option<usize> {
        fn collect(dir: &std::path::Path, keys: &mut std::collections::HashSet<String>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    collect(&entry.path(), keys);
                } else if !entry.file_name().to_string_lossy().starts_with('.') {
                    let object = std::fs::read(entry.path()).unwrap_or_default();
                    for line in object.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                        let record: serde_json::Value =
                            serde_json::from_slice(line).expect("a record per line");
                        keys.insert(record["dedup_key"].as_str().expect("a dedup key").into());
                    }
                }
            }
        }
        let dir = self.ledger.as_ref()?;
        let mut keys = std::collections::HashSet::new();
        collect(&dir.path().join("archive"), &mut keys);
        Some(keys.len())
    }
}

/// relay-gcf, the binary built next to this test, publishing to `sqs` on `listen` (a free port
/// when `None`), once it listens.
fn relay_gcf(sqs: &FakeSqs, setup: &Setup, listen: Option<SocketAddr>) -> RelayProcess {
    let mut command = Command::new(built_binary("relay-gcf"));
    command
        .env_clear()
        .env("RELAY_HMAC_KEYS", format!(r#"{{"dss": "{SECRET}"}}"#))
        .env("RELAY_SINK_TIMEOUT_MS", "1000")
        .env("RELAY_LOG_FORMAT", "json")
        // Errors, and the warning of each publish that got no answer before the deadline: a
        // call whose outcome the relay cannot know.
        .env("RUST_LOG", "error,relay_core::relay::publish=warn")
        .env("AWS_ENDPOINT_URL_SQS", &sqs.endpoint)
        .env("AWS_ACCESS_KEY_ID", "fault")
        .env("AWS_SECRET_ACCESS_KEY", "fault")
        .env("AWS_REGION", "us-east-1");
    if setup.fan_out {
        let dir = setup
            .ledger
            .as_ref()
            .map_or_else(std::env::temp_dir, |d| d.path().into());
        let file = dir.join(format!("fan-out-{}.toml", std::process::id()));
        let sinks: String = setup
            .queues()
            .iter()
            .map(|q| {
                format!(
                    "[sinks.{}]\ntype = \"sqs\"\nqueue_url = \"{}\"\n\n",
                    q.replace('-', "_"),
                    sqs.queue_url_of(q)
                )
            })
            .collect();
        let names: Vec<String> = setup
            .queues()
            .iter()
            .map(|q| format!("\"{}\"", q.replace('-', "_")))
            .collect();
        let routes = format!("[[routes]]\nname = \"all\"\nto = [{}]\n", names.join(", "));
        std::fs::write(&file, sinks + &routes).expect("the configuration is written");
        command.env("RELAY_CONFIG", file);
    } else {
        command.env("RELAY_SQS_QUEUE_URL", sqs.queue_url());
    }
    if let Some(dir) = &setup.ledger {
        command
            .env("RELAY_LEDGER_URL", dir.path().join("ledger.db"))
            .env("RELAY_ARCHIVE_URL", dir.path().join("archive"))
            .env("RELAY_ARCHIVE_KEY", "fault-matrix-archive-key");
    }
    if let Some(addr) = listen {
        command.env("RELAY_LISTEN", addr.to_string());
    }
    // The wait for the port blocks; the fake SQS endpoint keeps running on the other workers.
    tokio::task::block_in_place(|| RelayProcess::spawn(command))
}

fn notification(i: usize) -> String {
    format!(
        r#"{{"subscription_id": "faults", "event_type": "CREATE", "match": {{"bundle_uuid": "b-{i:06}", "bundle_version": "v"}}, "pad": "{}"}}"#,
        "x".repeat(3000)
    )
}

/// What the sender saw.
#[derive(Debug, Default)]
struct Sent {
    acknowledged: HashSet<String>,
    lost_answers: AtomicU64,
    attempts: AtomicU64,
    refused: AtomicU64,
    unanswered: AtomicU64,
}

/// Sends every body until it gets a 2xx, retrying non-2xx answers and refused connections with
/// a short backoff; a request that reached the relay but got no answer is counted. With
/// `lose_answers`, that share of 2xx answers is taken as lost (a connection broken after the
/// relay answered): the body is sent again, as a sender that never saw the 202 would.
async fn send_all(url: &str, bodies: &[String], lose_answers: f64) -> Sent {
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build_http();
    let uri: http::Uri = format!("{url}/dss").parse().unwrap();
    let sent = Arc::new(Sent::default());
    let slots = Arc::new(Semaphore::new(CONCURRENCY));
    let mut tasks = Vec::new();
    let answers = Arc::new(AtomicU64::new(0));
    for body in bodies.iter().cloned() {
        let answers = Arc::clone(&answers);
        let (client, uri, sent, slot) = (
            client.clone(),
            uri.clone(),
            Arc::clone(&sent),
            Arc::clone(&slots).acquire_owned().await,
        );
        tasks.push(tokio::spawn(async move {
            let _slot = slot;
            for attempt in 0u64..400 {
                sent.attempts.fetch_add(1, Ordering::Relaxed);
                let signer = Signer {
                    key_id: "dss".into(),
                    secret: SECRET.into(),
                    at: SystemTime::now(),
                };
                let (mut parts, bytes) = signer.json(&body).into_parts();
                parts.uri = uri.clone();
                match client
                    .request(http::Request::from_parts(parts, Full::new(bytes)))
                    .await
                {
                    Ok(response) if response.status().is_success() => {
                        let n = answers.fetch_add(1, Ordering::Relaxed);
                        if lost(n, lose_answers) {
                            sent.lost_answers.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        return Some(body);
                    }
                    Ok(_) => {}
                    Err(e) if e.is_connect() => _ = sent.refused.fetch_add(1, Ordering::Relaxed),
                    Err(_) => _ = sent.unanswered.fetch_add(1, Ordering::Relaxed),
                }
                tokio::time::sleep(Duration::from_millis((10 * attempt).min(200))).await;
            }
            None
        }));
    }
    let mut acknowledged = HashSet::new();
    for task in tasks {
        acknowledged.extend(task.await.unwrap());
    }
    let mut sent = Arc::try_unwrap(sent).expect("every task ended");
    sent.acknowledged = acknowledged;
    sent
}

/// Whether the `n`th 2xx answer is lost, for a share `share` of them (a fixed spread).
fn lost(n: u64, share: f64) -> bool {
    share > 0.0 && ((n as f64 + 0.5) * share).fract() < share
}

/// How many publishes of `relay` got no answer before the deadline (taken or not, the relay
/// cannot know), from its log. The endpoint counts the others: messages taken by calls it then
/// never answered, which the SDK itself sends again.
fn unknown_outcomes(relay: &RelayProcess) -> usize {
    relay
        .stderr()
        .lines()
        .filter(|l| l.contains("no acknowledgement before the deadline"))
        .count()
}

/// One row of the table.
#[derive(Debug)]
struct Row {
    fault: &'static str,
    ledger: &'static str,
    /// Messages whose sink call ended without the relay knowing whether it was taken: no answer
    /// before the deadline (from the relay's log), or taken by a call the endpoint never
    /// answered.
    unknown_outcomes: usize,
    sent: usize,
    acknowledged_but_lost: usize,
    missing_after_retries: usize,
    duplicates: u32,
    attempts: u64,
    unanswered: u64,
    calls: u64,
    seconds: f64,
    /// Records in the archive at the end (`None` without one).
    archived: Option<usize>,
    /// The relay was killed mid-burst: requests in flight then were left without an answer.
    killed: bool,
}

impl Row {
    fn print(&self) {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.2} | {} | {} | {} | {:.1} |",
            self.fault,
            self.ledger,
            self.sent,
            self.acknowledged_but_lost,
            self.missing_after_retries,
            self.duplicates,
            self.unknown_outcomes,
            self.attempts as f64 / self.sent as f64,
            self.unanswered,
            self.archived.map_or("–".to_owned(), |n| n.to_string()),
            self.calls,
            self.seconds
        );
    }
}

fn row(
    fault: &'static str,
    unknown_outcomes: usize,
    setup: &Setup,
    bodies: &[String],
    sent: &Sent,
    sqs: &FakeSqs,
    started: Instant,
) -> Row {
    let queues: Vec<_> = setup.queues().iter().map(|q| sqs.accepted_in(q)).collect();
    let everywhere = |b: &String| queues.iter().all(|accepted| accepted.contains_key(b));
    Row {
        fault,
        ledger: setup.name(),
        unknown_outcomes: unknown_outcomes + sqs.taken_unanswered() as usize,
        sent: bodies.len(),
        acknowledged_but_lost: sent.acknowledged.iter().filter(|b| !everywhere(b)).count(),
        missing_after_retries: bodies.iter().filter(|b| !everywhere(b)).count(),
        duplicates: queues
            .iter()
            .flat_map(|accepted| accepted.values())
            .map(|n| n - 1)
            .sum(),
        attempts: sent.attempts.load(Ordering::Relaxed),
        unanswered: sent.unanswered.load(Ordering::Relaxed),
        calls: sqs.calls(),
        seconds: started.elapsed().as_secs_f64(),
        archived: setup.archived(),
        killed: false,
    }
}

/// One fault, as `case` describes it, with the ledger on or off.
async fn run(case: &Case, ledger: bool) -> Row {
    let setup = Setup::new(ledger, case.fan_out);
    let faulty = case.fan_out.then_some(SECOND_QUEUE);
    let sqs = FakeSqs::start_for(case.fault, faulty).await;
    let relay = relay_gcf(&sqs, &setup, None);
    let bodies: Vec<String> = (0..notifications()).map(notification).collect();
    let started = Instant::now();
    let sent = send_all(&relay.url(), &bodies, case.lose_answers).await;
    let unknown = unknown_outcomes(&relay);
    drop(relay);
    row(case.name, unknown, &setup, &bodies, &sent, &sqs, started)
}

/// A burst with SIGTERM (or SIGKILL, `kill`) in its middle; a second relay on the same port
/// (and the same ledger and archive) takes the retries.
async fn stopped_mid_burst(ledger: bool, kill: bool) -> Row {
    let setup = Arc::new(Setup::new(ledger, false));
    let sqs = FakeSqs::start(Fault::Latency(Duration::from_millis(20))).await;
    let mut first = relay_gcf(&sqs, &setup, None);
    let (addr, url) = (first.addr(), first.url());
    let bodies: Vec<String> = (0..notifications()).map(notification).collect();
    let started = Instant::now();
    let watcher = {
        let sqs = sqs.clone();
        let setup = Arc::clone(&setup);
        let half = bodies.len() / 2;
        tokio::spawn(async move {
            while sqs.accepted().len() < half {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let first_unknown = unknown_outcomes(&first);
            if kill {
                first.kill();
            } else {
                first.terminate();
                let exited = tokio::task::spawn_blocking(move || {
                    first.exits_within(relay_gcf::DRAIN + Duration::from_secs(10))
                })
                .await
                .unwrap();
                assert!(
                    exited.success(),
                    "the relay exits cleanly after draining: {exited}"
                );
            }
            (first_unknown, relay_gcf(&sqs, &setup, Some(addr)))
        })
    };
    let sent = send_all(&url, &bodies, 0.0).await;
    let (first_unknown, second) = watcher.await.unwrap();
    let unknown = first_unknown + unknown_outcomes(&second);
    drop(second);
    let name = match kill {
        true => "SIGKILL mid-burst, then a new instance",
        false => "SIGTERM mid-burst, then a new instance",
    };
    Row {
        killed: kill,
        ..row(name, unknown, &setup, &bodies, &sent, &sqs, started)
    }
}

/// One row's fault.
#[derive(Debug)]
struct Case {
    name: &'static str,
    fault: Fault,
    /// Publish to a second queue too; the fault applies to that one only.
    fan_out: bool,
    /// The share of 2xx answers the sender loses (and so retries).
    lose_answers: f64,
}

const fn case(name: &'static str, fault: Fault) -> Case {
    Case {
        name,
        fault,
        fan_out: false,
        lose_answers: 0.0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_acknowledged_notification_is_lost_under_any_fault() {
    let cases = [
        case("none", Fault::None),
        case("latency 20 ms", Fault::Latency(Duration::from_millis(20))),
        case("10 % of batch entries Failed", Fault::EntryFailures(0.1)),
        case(
            "503 storms (300 ms of every 1 s)",
            Fault::Storms {
                on: Duration::from_millis(300),
                off: Duration::from_millis(700),
            },
        ),
        case("5 % of calls reset", Fault::Resets(0.05)),
        case("1 % of calls hang", Fault::Hangs(0.01)),
        Case {
            fan_out: true,
            ..case(
                "two queues, the second failing 20 % of calls",
                Fault::Failures(0.2),
            )
        },
        Case {
            lose_answers: 0.1,
            ..case("the sender loses 10 % of 202s", Fault::None)
        },
    ];
    let mut rows = Vec::new();
    for case in &cases {
        for ledger in [false, true] {
            rows.push(run(case, ledger).await);
        }
    }
    for kill in [false, true] {
        for ledger in [false, true] {
            rows.push(stopped_mid_burst(ledger, kill).await);
        }
    }
    println!(
        "| fault | ledger | notifications | acknowledged but lost | missing after retries | duplicates | sink calls of unknown outcome | attempts per notification | sent, no answer | archive records | SQS calls | seconds |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for row in &rows {
        row.print();
    }
    for row in &rows {
        assert_eq!(row.acknowledged_but_lost, 0, "{row:?}");
        assert_eq!(row.missing_after_retries, 0, "{row:?}");
        if let Some(archived) = row.archived {
            assert_eq!(
                archived, row.sent,
                "a record of every notification in the archive: {row:?}"
            );
        }
        if row.killed {
            // A killed relay answers none of the requests it held, and may have published some
            // of them before its ledger recorded it: the retries publish those again.
            if row.ledger != "off" {
                assert!(
                    row.duplicates as u64 <= row.unanswered,
                    "no duplicate but those of requests in flight at the kill: {row:?}"
                );
            }
            continue;
        }
        assert_eq!(row.unanswered, 0, "{row:?}");
        // With the ledger, a message is published again only where a call's outcome was
        // unknown: no answer by the deadline, or taken without an answer.
        if row.ledger != "off" {
            assert!(
                row.duplicates as usize <= row.unknown_outcomes,
                "the ledger leaves no duplicate but those of unknown outcomes: {row:?}"
            );
        }
    }
}
