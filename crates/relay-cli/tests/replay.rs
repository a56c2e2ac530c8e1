//! `relay replay` and `relay split start --backfill` against what running relays archived
//! (`RELAY_ARCHIVE_URL`, a folder) and recorded (`RELAY_LEDGER_URL`, an SQLite file): the
//! outage the DSS gave up on delivered once, a second run delivering nothing, dry runs, the
//! progress lines, and a split that gets the last hour before the live stream.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use relay_core::archive::{Archive, DirArchive};
use relay_core::ledger::{Ledger, SqliteLedger};
use relay_core::sink::{Clients, SinkConfig, SqsConfig, Target};
use relay_core::{Config, Relay};
use relay_testkit::fake_sqs::FakeSqs;
use relay_testkit::ledger::ManualClock;
use relay_testkit::requests::{Signer, status_and_code};

use common::{output, relay_cmd, succeeded, text};

const SECRET: &str = "a-replay-secret";

/// Runs `cmd` (the command `args` describe) and asserts it was refused: exit 2, with `says` in
/// its standard error.
async fn assert_refused(cmd: Command, args: &[&str], says: &str) {
    let out = output(cmd).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(says), "{args:?}: {stderr}");
}

fn notification(bundle: &str) -> String {
    serde_json::json!({
        "transaction_id": relay_core::ledger::attempt_id(),
        "subscription_id": "sub-1",
        "event_type": "CREATE",
        "match": {"bundle_uuid": bundle, "bundle_version": "2026-12-01T000000.000000Z"},
    })
    .to_string()
}

/// The folder's archive, ledger and the relay's variables, shared by the relay in this process
/// and the `relay` commands.
struct Deployment {
    dir: tempfile::TempDir,
    vars: Vec<(&'static str, String)>,
}

impl Deployment {
    fn new(extra: &[(&'static str, String)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
        let mut vars = vec![
            ("RELAY_HMAC_SECRET", SECRET.to_owned()),
            ("RELAY_LEDGER_URL", path("ledger.db")),
            ("RELAY_ARCHIVE_URL", path("archive")),
            ("RELAY_ARCHIVE_KEY", relay_testkit::archive::KEY.to_owned()),
        ];
        vars.extend_from_slice(extra);
        Self { dir, vars }
    }

    /// A deployment whose one sink is the file `out.jsonl` in its folder, with `extra`; the
    /// file's path.
    fn with_file_sink(extra: &[(&'static str, &str)]) -> (Self, std::path::PathBuf) {
        let mut deployment = Self::new(&[]);
        let sink = deployment.path("out.jsonl");
        deployment
            .vars
            .push(("RELAY_FILE_SINK", sink.to_str().unwrap().to_owned()));
        for (name, value) in extra {
            deployment.vars.push((*name, (*value).to_owned()));
        }
        (deployment, sink)
    }

    fn config(&self) -> Config {
        Config::from_vars(|n| {
            self.vars
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.clone())
        })
        .expect("a valid configuration")
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = relay_cmd();
        cmd.args(args)
            .envs(self.vars.iter().map(|(k, v)| (*k, v.as_str())));
        cmd
    }
}

/// An AWS configuration addressing `endpoint`, with test credentials.
async fn sdk(endpoint: &str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(relay_core::cloud::aws_http_client())
        .endpoint_url(endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .test_credentials()
        .load()
        .await
}

/// Every accepted body, with how many times.
fn counts(sqs: &FakeSqs) -> (usize, u32, u32) {
    let accepted = sqs.accepted();
    let (min, max) = accepted
        .values()
        .fold((u32::MAX, 0), |(lo, hi), &n| (lo.min(n), hi.max(n)));
    (accepted.len(), min, max)
}

/// The DSS v2 schedule: inline, 15 minutes later, then every 6 hours until about 72 hours.
fn v2_schedule() -> Vec<Duration> {
    let mut offsets = vec![Duration::ZERO, Duration::from_secs(15 * 60)];
    offsets.extend((1..=11).map(|k| Duration::from_secs(15 * 60 + k * 6 * 3600)));
    offsets
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_the_dss_gave_up_on_is_replayed_once() {
    let sqs = FakeSqs::start(relay_testkit::fake_sqs::Fault::None).await;
    let deployment = Deployment::new(&[
        ("RELAY_SQS_QUEUE_URL", sqs.queue_url()),
        ("AWS_ENDPOINT_URL_SQS", sqs.endpoint.clone()),
        ("AWS_ACCESS_KEY_ID", "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
    ]);
    // The relay of the outage, on a clock the test moves: four days ago, the queue deleted.
    let start = SystemTime::now() - Duration::from_secs(4 * 24 * 3600);
    let clock = ManualClock::at(start);
    let config = deployment.config();
    let queue = SinkConfig {
        name: "sqs".into(),
        target: Target::Sqs(SqsConfig::new(sqs.queue_url().parse().unwrap())),
        selection: Default::default(),
    };
    let sink = queue
        .target
        .build(Clients::with_aws(
            &sdk(&sqs.endpoint).await,
            config.batch_wait,
        ))
        .await
        .unwrap();
    let ledger: Arc<dyn Ledger> =
        Arc::new(SqliteLedger::open(&deployment.path("ledger.db")).unwrap());
    let archive: Arc<dyn Archive> =
        Arc::new(DirArchive::open(&deployment.path("archive")).unwrap());
    let lines = Arc::new(relay_testkit::metrics::Lines::default());
    let relay = relay_testkit::sinks::relay(config, &[("sqs", sink)], Arc::clone(&clock) as _)
        .with_ledger(ledger)
        .with_archive(archive, relay_testkit::archive::key())
        .with_metrics(Arc::clone(&lines) as _);

    sqs.refuse(true);
    const N: usize = 1000;
    let payloads: Vec<String> = (0..N)
        .map(|i| notification(&format!("bundle-{i:04}")))
        .collect();
    let mut answers = std::collections::BTreeMap::<(u16, String), usize>::new();
    let mut undelivered = Vec::new();
    for offset in v2_schedule() {
        clock.set(start + offset);
        let signer = Signer {
            key_id: "dss".into(),
            secret: SECRET.into(),
            at: start + offset,
        };
        let sends = payloads.iter().map(|p| relay.accept(signer.json(p)));
        for outcome in futures_util::future::join_all(sends).await {
            *answers.entry(status_and_code(&outcome)).or_default() += 1;
        }
        undelivered.push(lines.sum("Undelivered", &[]) as usize);
    }
    // Counted from the first attempt over an hour after the first (6 h 15 min), each attempt.
    let expected: Vec<usize> = (0..13usize).map(|i| N * i.saturating_sub(1)).collect();
    assert_eq!(undelivered, expected);
    // Every one of the 13 attempts refused: the DSS gives up on all 1,000.
    assert_eq!(
        answers.into_iter().collect::<Vec<_>>(),
        [((502, "sink_failed".to_owned()), 13 * N)]
    );
    assert_eq!(counts(&sqs).0, 0);

    // The queue is back. A dry run says what it would send, and sends nothing.
    sqs.refuse(false);
    let since = humantime::format_rfc3339_seconds(start - Duration::from_secs(60)).to_string();
    let dry =
        output(deployment.cmd(&["replay", "--undelivered", "--since", &since, "--dry-run"])).await;
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    let stdout = text(&dry.stdout);
    // Archived as the DSS sent it: every payload is in the archive once.
    assert!(
        stdout.contains(&format!("{N} archived in the window")),
        "{stdout}"
    );
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.starts_with("would send "))
            .count(),
        N
    );
    assert!(
        stdout.contains(&format!(
            "{N} archived in the window: {N} would send, 0 delivered before"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("  sqs: {N} would send")),
        "{stdout}"
    );
    assert_eq!(counts(&sqs).0, 0, "a dry run sends nothing");
    // Not on a terminal, the progress is a plain line; on one (script(1) gives it a pseudo
    // terminal), a bar with the rate and the time left, cleared at the end.
    // The progress counts the archive's objects read (records written together share one).
    let stderr = text(&dry.stderr);
    let progress = stderr
        .lines()
        .rfind(|l| l.starts_with("replay: "))
        .unwrap_or_else(|| panic!("no progress line: {stderr}"));
    let read = progress["replay: ".len()..]
        .split(" objects read")
        .next()
        .unwrap();
    let (done, total) = read.split_once('/').expect("done/total");
    assert!(
        done == total && done.parse::<usize>().unwrap() <= N,
        "{progress}"
    );
    assert!(
        progress.contains(&format!(" objects read, {N} to send, ")),
        "{progress}"
    );
    let mut on_a_terminal = Command::new("script");
    let line = format!(
        "{} replay --undelivered --since {since} --dry-run",
        env!("CARGO_BIN_EXE_relay")
    );
    on_a_terminal
        .args(["-qec", &line, "/dev/null"])
        .envs(deployment.vars.iter().map(|(k, v)| (*k, v.as_str())));
    let shown = output(on_a_terminal).await;
    let screen = text(&shown.stdout);
    assert!(shown.status.success(), "{screen}");
    assert!(screen.contains(" objects read, "), "{screen}");
    assert!(
        screen.contains(" to send, ") && screen.contains(" left"),
        "{screen}"
    );
    assert!(
        !screen.contains("replay: "),
        "no plain lines on a terminal: {screen}"
    );

    // relay events finds and counts them, by status and destination, before anything is sent.
    let events = |args: &[&str]| {
        let mut all = vec!["events", "--since", since.as_str()];
        all.extend_from_slice(args);
        deployment.cmd(&all)
    };
    let found = output(events(&["--status", "undelivered", "--count", "--json"])).await;
    assert!(found.status.success(), "{}", text(&found.stderr));
    let found: serde_json::Value = serde_json::from_slice(&found.stdout).unwrap();
    assert_eq!(found["count"], N);
    assert_eq!(found["statuses"], serde_json::json!({"undelivered": N}));
    assert_eq!(
        found["destinations"],
        serde_json::json!({"sqs": {"undelivered": N}})
    );
    assert!(found.get("events").is_none(), "--count lists none");
    let one = output(events(&["--bundle", "bundle-0001", "--json"])).await;
    let one: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
    let event = &one["events"][0];
    assert_eq!(
        (&event["status"], &event["destinations"], &event["source"]),
        (
            &serde_json::json!("undelivered"),
            &serde_json::json!({"sqs": "undelivered"}),
            &serde_json::json!("dss")
        ),
        "{one}"
    );
    assert_eq!(one["count"], 1);
    let none = output(events(&["--status", "delivered"])).await;
    assert_eq!(none.status.code(), Some(1), "nothing delivered yet");
    assert!(text(&none.stdout).contains("0 notifications"));
    let unknown = output(events(&["--destination", "nowhere"])).await;
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        text(&unknown.stderr)
            .contains("--destination nowhere: no such destination; the routes in effect have sqs")
    );

    // On a terminal, a replay of more than 100 says how many, to where, and asks; "n" sends
    // nothing.
    let declined = {
        let line = format!(
            "{} replay --undelivered --since {since}",
            env!("CARGO_BIN_EXE_relay")
        );
        let envs: Vec<(&str, String)> = deployment
            .vars
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        tokio::task::spawn_blocking(move || {
            let mut script = Command::new("script")
                .args(["-qec", &line, "/dev/null"])
                .envs(envs)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write as _;
            script.stdin.take().unwrap().write_all(b"n\n").unwrap();
            script.wait_with_output().unwrap()
        })
        .await
        .unwrap()
    };
    let screen = text(&declined.stdout);
    assert!(
        screen.contains(&format!(
            "{N} notifications would be sent ({N} to sqs). Send them? [y/N]"
        )) && screen.contains("not confirmed: nothing sent"),
        "{screen}"
    );
    assert_eq!(declined.status.code(), Some(2), "{screen}");
    assert_eq!(counts(&sqs).0, 0, "declined: nothing sent");

    // The replay delivers each notification once, and says how far it got.
    let undelivered = ["replay", "--undelivered", "--since", &since];
    let (stdout, stderr) = succeeded(deployment.cmd(&undelivered)).await;
    assert!(
        stdout.contains(&format!("{N} sent, 0 delivered before")),
        "{stdout}"
    );
    let read = format!(" objects read, {N} sent, ");
    assert!(
        (stderr.lines()).any(|l| l.starts_with("replay: ") && l.contains(&read)),
        "{stderr}"
    );
    assert_eq!(counts(&sqs), (N, 1, 1));

    // And relay events counts them delivered.
    let found = output(events(&["--count", "--json"])).await;
    let found: serde_json::Value = serde_json::from_slice(&found.stdout).unwrap();
    assert_eq!(
        (&found["statuses"], &found["destinations"]),
        (
            &serde_json::json!({"delivered": N}),
            &serde_json::json!({"sqs": {"delivered": N}})
        )
    );

    // relay trace tells where the notification is in the archive, and that it is there.
    let trace = output(deployment.cmd(&["trace", "bundle-0001"])).await;
    let shown = text(&trace.stdout);
    let archive_dir = deployment.path("archive");
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with(&format!("in the archive: {}/", archive_dir.display()))),
        "{shown}"
    );

    // A second run delivers none.
    let (stdout, _) = succeeded(deployment.cmd(&undelivered)).await;
    let none = format!("0 sent, {N} delivered before");
    assert!(stdout.contains(&none), "{stdout}");
    assert_eq!(counts(&sqs), (N, 1, 1));

    // A replay of one bundle to the routes, not only what is undelivered: once per run,
    // however often the same command runs; --again publishes it once more.
    let one = ["replay", "--since", &since, "--bundle", "bundle-0007"];
    for _ in 0..2 {
        succeeded(deployment.cmd(&one)).await;
    }
    let body = &payloads[7];
    assert_eq!(sqs.accepted()[body], 2);
    let mut again = one.to_vec();
    again.push("--again");
    assert!(output(deployment.cmd(&again)).await.status.success());
    assert_eq!(sqs.accepted()[body], 3);
    assert_eq!(counts(&sqs).0, N);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_refuses_what_it_cannot_do_precisely() {
    let deployment = Deployment::new(&[("RELAY_FILE_SINK", "-".to_owned())]);
    let cases: [(&[&str], &str); 5] = [
        (
            &["replay", "--since", "yesterday"],
            "--since: expected a time",
        ),
        (
            &["replay", "--since", "1h", "--until", "2h"],
            "--until is before --since",
        ),
        (
            &["replay", "--since", "1h", "--to", "nowhere"],
            "--to nowhere: no such destination",
        ),
        (
            &["replay", "--since", "1h", "--match", "{\"a\": 1}"],
            "--match",
        ),
        (
            &["replay", "--since", "1h", "--rate", "0"],
            "positive number",
        ),
    ];
    for (args, expected) in cases {
        assert_refused(deployment.cmd(args), args, expected).await;
    }
    let mut no_archive = deployment.cmd(&["replay", "--since", "1h"]);
    no_archive.env_remove("RELAY_ARCHIVE_URL");
    let out = output(no_archive).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no archive is configured"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_with_a_backfill_gets_the_last_hour_once_then_the_live_stream() {
    let deployment = Deployment::new(&[]);
    let routes = deployment.path("routes.toml");
    let (main_file, split_file) = (
        deployment.path("main.jsonl"),
        deployment.path("alice.jsonl"),
    );
    std::fs::write(&routes, "").unwrap();
    let mut deployment = deployment;
    deployment.vars.extend([
        ("RELAY_FILE_SINK", main_file.to_str().unwrap().to_owned()),
        ("RELAY_ROUTES_URL", routes.to_str().unwrap().to_owned()),
        ("RELAY_ROUTES_REFRESH_SECS", "1".to_owned()),
    ]);
    let relay = Relay::from_config(deployment.config()).await.unwrap();
    let send = |payload: &String| {
        let signer = Signer {
            key_id: "dss".into(),
            secret: SECRET.into(),
            at: SystemTime::now(),
        };
        relay.accept(signer.json(payload))
    };
    // Two hours ago, three notifications the split would match: outside the backfill.
    let archive = DirArchive::open(&deployment.path("archive")).unwrap();
    let old_at = SystemTime::now() - Duration::from_secs(2 * 3600);
    for i in 0..3 {
        let payload = notification(&format!("aa-old-{i}"));
        let record = archived(&payload, old_at);
        archive
            .put(
                &relay_core::archive::object_key(old_at, &record.dedup_key),
                relay_testkit::archive::sealed(&record),
            )
            .await
            .unwrap();
    }
    // In the last hour: ten it matches, ten it does not.
    let matching: Vec<String> = (0..10).map(|i| notification(&format!("aa-{i}"))).collect();
    let others: Vec<String> = (0..10).map(|i| notification(&format!("bb-{i}"))).collect();
    for payload in matching.iter().chain(&others) {
        assert_eq!(send(payload).await.status, 202);
    }

    let start = deployment.cmd(&[
        "split",
        "start",
        "alice",
        "--match",
        r#"{"match":{"bundle_uuid":[{"prefix":"aa"}]}}"#,
        "--file",
        split_file.to_str().unwrap(),
        "--ttl",
        "1h",
        "--backfill",
        "1h",
        "--routes",
        routes.to_str().unwrap(),
    ]);
    let out = output(start).await;
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("backfill: 10 sent"),
        "{}",
        text(&out.stdout)
    );

    // The relay takes the split; five new matching notifications go to it live, and a DSS
    // retry of one the backfill sent is a duplicate.
    relay.refresh().await;
    let live: Vec<String> = (0..5)
        .map(|i| notification(&format!("aa-live-{i}")))
        .collect();
    for payload in &live {
        let outcome = send(payload).await;
        assert_eq!(outcome.status, 202);
    }
    let retry = send(&matching[3]).await;
    let body: serde_json::Value = serde_json::from_slice(&retry.body).unwrap();
    assert_eq!(body["status"], "duplicate", "{body}");

    let lines = |path: &Path| -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["payload"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    let mut got = lines(&split_file);
    got.sort();
    let mut want: Vec<String> = matching.iter().chain(&live).cloned().collect();
    want.sort();
    assert_eq!(
        got, want,
        "the split has the last hour's matching notifications and the live ones, once each"
    );
    let main = lines(&main_file);
    assert_eq!(main.len(), 20, "before the split, the routes had them all");
    assert!(
        live.iter().all(|p| !main.contains(p)),
        "the split takes the live ones instead of the routes"
    );
}

/// An archive record of `payload` received at `at`, as the relay writes it.
fn archived(payload: &str, at: SystemTime) -> relay_core::archive::Record {
    let notification =
        relay_core::Notification::parse(bytes::Bytes::from(payload.to_owned())).unwrap();
    relay_core::archive::Record {
        received_at: at,
        dedup_key: notification.dedup_key().to_owned(),
        attributes: vec![
            (
                "relay.dedup_key".into(),
                notification.dedup_key().to_owned(),
            ),
            (
                "dss.bundle_uuid".into(),
                notification.bundle_uuid().unwrap_or_default().to_owned(),
            ),
        ],
        request: serde_json::json!({"path": "/", "query": {}, "headers": {}}),
        dropped_headers: Vec::new(),
        payload: bytes::Bytes::from(payload.to_owned()),
        refused: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_replay_run_again_continues_where_it_stopped() {
    let (deployment, sink) = Deployment::with_file_sink(&[]);
    let archive = DirArchive::open(&deployment.path("archive")).unwrap();
    const N: usize = 300;
    let at = SystemTime::now() - Duration::from_secs(600);
    let mut payloads = Vec::new();
    for i in 0..N {
        let payload = notification(&format!("resumed-{i:03}"));
        let record = archived(&payload, at);
        let key = relay_core::archive::object_key(at, &record.dedup_key);
        archive
            .put(&key, relay_testkit::archive::sealed(&record))
            .await
            .unwrap();
        payloads.push(payload);
    }
    let command = ["replay", "--since", "1h", "--rate", "100"];
    let child = deployment
        .cmd(&command)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let terminated = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(terminated.success());
    let first = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert_eq!(first.status.code(), Some(1));
    assert!(
        text(&first.stdout).contains("interrupted with"),
        "{}",
        text(&first.stdout)
    );
    let lines = || delivered(&sink);
    let sent_before = lines().len();
    assert!(
        0 < sent_before && sent_before < N,
        "{sent_before} sent before the signal"
    );

    let rest = output(deployment.cmd(&command)).await;
    assert!(rest.status.success(), "{}", text(&rest.stderr));
    assert!(
        text(&rest.stdout).contains(&format!(
            "{} sent, {sent_before} delivered before",
            N - sent_before
        )),
        "{}",
        text(&rest.stdout)
    );
    let mut got = lines();
    got.sort();
    payloads.sort();
    assert_eq!(got, payloads, "each once, across the two runs");
}

/// Objects in the archive that a relay did not seal: one carrying a real notification's dedup
/// key with another payload (sealed with another key), and an unsealed record of another
/// notification. Neither is sent, neither marks the real notification delivered, and each is
/// named; the real record is sent once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_the_archive_key_did_not_seal_are_refused() {
    let (deployment, sink) = Deployment::with_file_sink(&[]);
    let archive = DirArchive::open(&deployment.path("archive")).unwrap();
    let at = SystemTime::now() - Duration::from_secs(600);
    let real = archived(&notification("real"), at);
    let key = relay_core::archive::object_key(at, &real.dedup_key);
    archive
        .put(&key, relay_testkit::archive::sealed(&real))
        .await
        .unwrap();
    let mut forged = real.clone();
    forged.payload = bytes::Bytes::from(notification("forged"));
    let other_key = relay_core::archive::ArchiveKey::new(b"not the relay's archive key").unwrap();
    let forged_key = format!("{key}.forged");
    archive
        .put(&forged_key, other_key.seal(&forged.to_bytes()).into())
        .await
        .unwrap();
    let unsealed = archived(&notification("unsealed"), at);
    let unsealed_key = relay_core::archive::object_key(at, &unsealed.dedup_key);
    archive
        .put(&unsealed_key, unsealed.to_bytes().into())
        .await
        .unwrap();

    for run in ["first", "second"] {
        let out = output(deployment.cmd(&["replay", "--since", "1h"])).await;
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(2), "{run}: {stdout}{stderr}");
        assert!(stdout.contains("2 refused"), "{run}: {stdout}");
        assert!(
            stderr.contains(&format!("{forged_key}: not sent: its seal does not match")),
            "{run}: {stderr}"
        );
        assert!(
            stderr.contains(&format!("{unsealed_key}: not sent: not sealed")),
            "{run}: {stderr}"
        );
        let sent = delivered(&sink);
        assert_eq!(
            sent.len(),
            1,
            "{run}: the real notification, once: {sent:?}"
        );
        assert!(
            sent[0].contains("real") && !sent[0].contains("forged"),
            "{run}: {sent:?}"
        );
    }
}

/// Hostile arguments fail cleanly, exit 2, before anything is listed: a rate of 1e-300 (and
/// 1e300), a window from 1970 to 9999, one reaching a century back, one past the archive's
/// retention; a window inside the retention is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_replay_arguments_are_refused_before_anything_is_listed() {
    let (deployment, _) = Deployment::with_file_sink(&[("RELAY_ARCHIVE_RETENTION_DAYS", "7")]);
    let cases: [(&[&str], &str); 6] = [
        (
            &["--since", "1h", "--rate", "1e-300"],
            "expected between 0.01 and 100000",
        ),
        (
            &["--since", "1h", "--rate", "1e300"],
            "expected between 0.01 and 100000",
        ),
        (&["--since", "1h", "--rate", "NaN"], "a positive number"),
        (
            &[
                "--since",
                "1970-01-01T00:00:00Z",
                "--until",
                "9999-12-31T23:59:59Z",
            ],
            "further back than the archive keeps records (7 days",
        ),
        (&["--since", "100y"], "use --since 7d or later"),
        (
            &["--since", "8d"],
            "further back than the archive keeps records",
        ),
    ];
    for (args, expected) in cases {
        let started = Instant::now();
        let out = output(deployment.cmd(&[&["replay"], args].concat())).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{args:?}: slow"
        );
    }
    succeeded(deployment.cmd(&["replay", "--since", "6d", "--dry-run"])).await;
}

/// An object larger than any the relay or its stream writes (here, with 1 KiB bodies: a record
/// of 6 KiB escaped and 256 KiB for the rest, and 16 MiB for an engine's object) is refused as it is read, never loaded whole, and named; the run
/// exits 2, as running it again would not send it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_larger_than_any_record_is_refused_as_it_is_read() {
    let (deployment, _) = Deployment::with_file_sink(&[("RELAY_MAX_BODY_BYTES", "1024")]);
    let archive = DirArchive::open(&deployment.path("archive")).unwrap();
    let at = SystemTime::now() - Duration::from_secs(600);
    let record = archived(&notification("huge"), at);
    let key = format!(
        "{}.huge",
        relay_core::archive::object_key(at, &record.dedup_key)
    );
    archive
        .put(&key, bytes::Bytes::from(vec![b' '; 20 * 1024 * 1024]))
        .await
        .unwrap();
    let out = output(deployment.cmd(&["replay", "--since", "1h"])).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stdout.contains("1 refused"), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "{key}: not sent: {key}: larger than 17045504 bytes"
        )),
        "{stderr}"
    );
}

/// A multipart subscription whose field the relay is configured to read under another name:
/// each attempt verifies and is refused 400 `missing_payload_field`, and is kept as refused
/// (one record per notification, whatever the retries). Before the configuration is fixed,
/// `relay replay --refused` says it is still refused and a plain replay leaves it alone; once it
/// is, the dry run lists it, the run delivers each notification once, byte for byte, and a
/// second run sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_request_refused_on_arrival_is_sent_once_the_configuration_takes_it() {
    let (mut deployment, sink) = Deployment::with_file_sink(&[("RELAY_PAYLOAD_FIELD", "body")]);
    let lines = Arc::new(relay_testkit::metrics::Lines::default());
    let relay = Relay::from_config(deployment.config())
        .await
        .unwrap()
        .with_metrics(Arc::clone(&lines) as _);
    let payloads: Vec<String> = (0..3).map(|i| notification(&format!("form-{i}"))).collect();
    for _attempt in 0..3 {
        let signer = Signer {
            key_id: "dss".into(),
            secret: SECRET.into(),
            at: SystemTime::now(),
        };
        for payload in &payloads {
            let outcome = relay.accept(signer.multipart(payload)).await;
            assert_eq!(
                status_and_code(&outcome),
                (400, "missing_payload_field".to_owned())
            );
        }
    }
    assert_eq!(lines.sum("VerifiedRefused", &[]), 9.0);
    drop(relay);
    assert_eq!(delivered(&sink), [""; 0], "nothing delivered");
    let archive = DirArchive::open(&deployment.path("archive")).unwrap();
    let now = SystemTime::now();
    let mut keys = Vec::new();
    for hour in relay_core::archive::hours(now - Duration::from_secs(60), now) {
        keys.extend(archive.list(&hour).await.unwrap());
    }
    assert_eq!(keys.len(), 3, "one record per notification: {keys:?}");
    for key in &keys {
        let bytes = archive.read(key, 1 << 20).await.unwrap().unwrap();
        let record =
            relay_core::archive::Record::open(&relay_testkit::archive::key(), &bytes).unwrap();
        let refused = record.refused.as_ref().expect("recorded as refused");
        assert_eq!(
            (refused.status, refused.code.as_str()),
            (400, "missing_payload_field")
        );
        assert!(
            record
                .dedup_key
                .starts_with(relay_core::archive::REFUSED_PREFIX)
        );
        assert_eq!(record.attribute("relay.key_id"), Some("dss"));
        assert!(
            !String::from_utf8_lossy(&bytes).contains("Signature"),
            "no signature kept"
        );
    }

    let traced = output(deployment.cmd(&["trace", "--refused", "--since", "1h", "--json"])).await;
    assert_eq!(traced.status.code(), Some(0), "{}", text(&traced.stderr));
    let traced: Vec<serde_json::Value> = serde_json::from_slice(&traced.stdout).unwrap();
    assert_eq!(traced.len(), 3);
    for one in &traced {
        assert_eq!(
            (&one["status"], &one["code"]),
            (&400.into(), &"missing_payload_field".into())
        );
        assert!(
            one["content_type"]
                .as_str()
                .unwrap()
                .starts_with("multipart/form-data"),
            "{one}"
        );
    }
    let table = output(deployment.cmd(&["trace", "--refused"])).await;
    let stdout = text(&table.stdout);
    assert_eq!(
        stdout
            .matches("400 missing_payload_field  source dss  key dss")
            .count(),
        3,
        "{stdout}"
    );

    let refused_count = |deployment: &Deployment| {
        let cmd = deployment.cmd(&["events", "--status", "refused", "--count", "--json"]);
        async move {
            let out = output(cmd).await;
            let found: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
            found["count"].clone()
        }
    };
    assert_eq!(refused_count(&deployment).await, 3);
    let listed = output(deployment.cmd(&["events"])).await;
    let stdout = text(&listed.stdout);
    assert_eq!(
        stdout
            .matches("refused on arrival: missing_payload_field")
            .count(),
        3,
        "{stdout}"
    );
    assert!(stdout.contains("3 notifications: 3 refused"), "{stdout}");

    let still = output(deployment.cmd(&["replay", "--refused", "--since", "1h"])).await;
    let (stdout, stderr) = (text(&still.stdout), text(&still.stderr));
    assert_eq!(still.status.code(), Some(1), "{stdout}{stderr}");
    assert_eq!(
        stderr
            .matches("still refused (missing_payload_field)")
            .count(),
        3,
        "{stderr}"
    );
    let no_window = output(deployment.cmd(&["replay"])).await;
    assert_eq!(no_window.status.code(), Some(2));
    assert!(text(&no_window.stderr).contains("--since is required"));
    let plain = output(deployment.cmd(&["replay", "--since", "1h"])).await;
    let stdout = text(&plain.stdout);
    assert_eq!(plain.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("3 refused on arrival"), "{stdout}");
    assert_eq!(
        delivered(&sink),
        [""; 0],
        "a plain replay sends none of them"
    );

    // The configuration fixed: the field the subscription uses. A replay verifies nothing, so
    // from here on it runs without the relay's HMAC key.
    deployment
        .vars
        .retain(|(name, _)| !["RELAY_PAYLOAD_FIELD", "RELAY_HMAC_SECRET"].contains(name));
    let dry = output(deployment.cmd(&["replay", "--refused", "--since", "1h", "--dry-run"])).await;
    let stdout = text(&dry.stdout);
    assert_eq!(dry.status.code(), Some(0), "{stdout}{}", text(&dry.stderr));
    let would = |l: &&str| l.starts_with("would send") && l.contains("/refused-");
    assert_eq!(stdout.lines().filter(would).count(), 3, "{stdout}");
    assert_eq!(delivered(&sink), [""; 0], "a dry run sends nothing");
    // The second run without --since: as far back as the ledger keeps entries.
    for (run, args) in [
        ("first", &["replay", "--refused", "--since", "1h"][..]),
        ("second", &["replay", "--refused"][..]),
    ] {
        let out = output(deployment.cmd(args)).await;
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{run}: {stdout}{}",
            text(&out.stderr)
        );
        let mut sent = delivered(&sink);
        sent.sort();
        let mut want = payloads.clone();
        want.sort();
        assert_eq!(sent, want, "{run}: each once, byte for byte");
    }
    // Sent: refused no more, delivered.
    assert_eq!(refused_count(&deployment).await, 0);
    let found = output(deployment.cmd(&["events", "--status", "delivered", "--json"])).await;
    let found: serde_json::Value = serde_json::from_slice(&found.stdout).unwrap();
    assert_eq!(found["count"], 3, "{found}");
    assert_eq!(found["events"][0]["refused"], "missing_payload_field");
}

/// The payloads the file sink at `path` holds, in order.
fn delivered(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let payload = |line: &str| {
        let line: serde_json::Value = serde_json::from_str(line).unwrap();
        line["payload"].as_str().unwrap().to_owned()
    };
    text.lines().map(payload).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_refuse_what_they_cannot_read_precisely() {
    let deployment = Deployment::new(&[("RELAY_FILE_SINK", "-".to_owned())]);
    // The command, the variable taken away, what it says.
    let cases: [(&[&str], Option<&str>, &str); 4] = [
        (
            &["events"],
            Some("RELAY_LEDGER_URL"),
            "RELAY_LEDGER_URL is not set: where a notification stands is read from the ledger",
        ),
        (
            &["events"],
            Some("RELAY_ARCHIVE_URL"),
            "no archive is configured",
        ),
        (
            &["events", "--since", "yesterday"],
            None,
            "--since: expected a time",
        ),
        (
            &["events", "--since", "1h", "--until", "2h"],
            None,
            "--until is before --since",
        ),
    ];
    for (args, without, says) in cases {
        let mut cmd = deployment.cmd(args);
        if let Some(name) = without {
            cmd.env_remove(name);
        }
        assert_refused(cmd, args, says).await;
    }
    let bad_status = output(deployment.cmd(&["events", "--status", "lost"])).await;
    assert_eq!(bad_status.status.code(), Some(2));
    assert!(text(&bad_status.stderr).contains("invalid value 'lost'"));
}

/// A configuration of two file sinks in `deployment`'s folder, `plain` and `shaped` (with
/// `program` as its transform), and one route to both.
fn two_files(deployment: &Deployment, program: &str) -> String {
    let sink = |name: &str| {
        deployment
            .path(&format!("{name}.jsonl"))
            .display()
            .to_string()
    };
    format!(
        "[sinks.plain]\ntype = \"file\"\npath = \"{}\"\n\n\
         [sinks.shaped]\ntype = \"file\"\npath = \"{}\"\ntransform = '{program}'\n\n\
         [[routes]]\nname = \"both\"\nmatch = {{}}\nto = [\"plain\", \"shaped\"]\n",
        sink("plain"),
        sink("shaped")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_transform_is_delivered_by_replay_undelivered_alone() {
    let mut deployment = Deployment::new(&[("RELAY_TRANSFORM_TIMEOUT_MS", "20".to_owned())]);
    let config_file = deployment.path("relay.toml");
    let config_path = config_file.to_str().unwrap().to_owned();
    deployment.vars.push(("RELAY_CONFIG", config_path));
    std::fs::write(&config_file, two_files(&deployment, "last(range(1e18))")).unwrap();
    let relay = Relay::from_config(deployment.config()).await.unwrap();
    let signer = Signer {
        key_id: "dss".into(),
        secret: SECRET.into(),
        at: SystemTime::now(),
    };
    let payloads: Vec<String> = (0..3).map(|i| notification(&format!("b-{i}"))).collect();
    for payload in &payloads {
        let outcome = relay.accept(signer.json(payload)).await;
        assert_eq!(
            status_and_code(&outcome),
            (502, "transform_failed".to_owned())
        );
    }
    let lines = |name: &str| {
        let file = deployment.path(&format!("{name}.jsonl"));
        let text = std::fs::read_to_string(file).unwrap_or_default();
        text.lines().map(str::to_owned).collect::<Vec<_>>()
    };
    assert_eq!(lines("plain").len(), 3, "the other destination took each");
    assert!(lines("shaped").is_empty());

    // The program fixed, the replay delivers to the destination that failed, and only to it.
    std::fs::write(
        &config_file,
        two_files(&deployment, "{bundle: .match.bundle_uuid}"),
    )
    .unwrap();
    let since = humantime::format_rfc3339_seconds(SystemTime::now() - Duration::from_secs(600));
    let since = since.to_string();
    succeeded(deployment.cmd(&["replay", "--undelivered", "--since", &since])).await;
    assert_eq!(lines("plain").len(), 3, "not again");
    let mut bundles: Vec<String> = lines("shaped")
        .iter()
        .map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            let body: serde_json::Value =
                serde_json::from_str(record["payload"].as_str().unwrap()).unwrap();
            body["bundle"].as_str().unwrap().to_owned()
        })
        .collect();
    bundles.sort();
    assert_eq!(bundles, ["b-0", "b-1", "b-2"]);
}
