//! Live routes through the real binaries: relay-gcf reading a stored routes file every second,
//! changed by `relay split` and `relay routes` while it runs, fed by `relay send`.
//!
//! Needs the relay-gcf and relay binaries built next to this test (`cargo build --workspace`,
//! which `make test` runs first); no emulator.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use relay_testkit::RelayProcess;
use serde_json::Value;

const SECRET: &str = "live-routes-secret";
const SPLIT_MATCH: &str = r#"{"match":{"bundle_uuid":[{"prefix":"aa"}]}}"#;

fn binary(name: &str) -> PathBuf {
    relay_testkit::built_binary(name)
}

/// relay-gcf with a file sink `main.jsonl` and the stored routes `routes.toml`, both in a
/// folder of its own, read again every second; killed when dropped.
struct Relay {
    process: RelayProcess,
    dir: tempfile::TempDir,
}

impl Relay {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new(binary("relay-gcf"));
        command
            .env_clear()
            .env("RELAY_HMAC_SECRET", SECRET)
            .env("RELAY_FILE_SINK", dir.path().join("main.jsonl"))
            .env("RELAY_ROUTES_URL", dir.path().join("routes.toml"))
            .env("RELAY_ROUTES_REFRESH_SECS", "1")
            .env("RELAY_LOG_FORMAT", "json");
        Self {
            process: RelayProcess::spawn(command),
            dir,
        }
    }

    /// A relay whose split `name` (see [`start_split`](Self::start_split)) takes notifications;
    /// the split's file.
    fn with_split(name: &str, ttl: &str) -> (Self, PathBuf) {
        let relay = Self::start();
        let file = relay.start_split(name, ttl);
        lands_within_two_seconds(&relay, "aa-1", &format!("{name}.jsonl"), "main.jsonl");
        (relay, file)
    }

    /// Its folder.
    fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `relay` with `args` against its stored routes.
    fn cli(&self, args: &[&str]) -> Output {
        relay_cli(self.dir(), args)
    }

    /// Sends a notification about `bundle_uuid`; returns the status line and the JSON body.
    fn send(&self, bundle_uuid: &str) -> (String, Value) {
        let file = self.dir().join(format!("{bundle_uuid}.json"));
        std::fs::write(
            &file,
            format!(
                r#"{{"subscription_id": "live", "event_type": "CREATE", "match": {{"bundle_uuid": "{bundle_uuid}", "bundle_version": "v1"}}}}"#
            ),
        )
        .unwrap();
        let out = Command::new(binary("relay"))
            .args(["send", file.to_str().unwrap(), "--url"])
            .arg(format!("{}/", self.process.url()))
            .args(["--key-id", "dss", "--secret", SECRET])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut lines = stdout.lines();
        let status = lines.next().unwrap_or_default().to_owned();
        let body = serde_json::from_str(lines.next().unwrap_or("null")).unwrap_or(Value::Null);
        (status, body)
    }

    /// Sends a notification about `bundle_uuid`, which must be accepted; the JSON body.
    fn accepted(&self, bundle_uuid: &str) -> Value {
        let (status, body) = self.send(bundle_uuid);
        assert!(status.starts_with("202"), "{status} {body}");
        body
    }

    /// Sends a notification about `bundle_uuid`, which must be accepted and land in `file` and
    /// not in `other`.
    fn lands_in(&self, bundle_uuid: &str, file: &str, other: &str) {
        self.accepted(bundle_uuid);
        let landed = |file: &str| self.landed(file).iter().any(|b| b == bundle_uuid);
        assert!(landed(file), "{bundle_uuid} missed {file}");
        assert!(!landed(other), "{bundle_uuid} also reached {other}");
    }

    /// Starts the split `name`, taking what [`SPLIT_MATCH`] matches for `ttl`, into the file
    /// `<name>.jsonl` in its folder; that file's path.
    fn start_split(&self, name: &str, ttl: &str) -> PathBuf {
        let file = self.dir().join(format!("{name}.jsonl"));
        let path = file.to_str().unwrap();
        let args = [
            "split",
            "start",
            name,
            "--match",
            SPLIT_MATCH,
            "--file",
            path,
            "--ttl",
            ttl,
        ];
        succeeds(&self.cli(&args));
        file
    }

    /// The bundle uuids that reached `file` in its folder.
    fn landed(&self, file: &str) -> Vec<String> {
        let text = std::fs::read_to_string(self.dir().join(file)).unwrap_or_default();
        text.lines()
            .map(|line| {
                let line: Value = serde_json::from_str(line).unwrap();
                let payload: Value =
                    serde_json::from_str(line["payload"].as_str().unwrap()).unwrap();
                payload["match"]["bundle_uuid"].as_str().unwrap().to_owned()
            })
            .collect()
    }
}

/// Runs `relay` with `args` against the stored routes in `dir`.
fn relay_cli(dir: &Path, args: &[&str]) -> Output {
    relay_testkit::stores::relay_with_routes(&dir.join("routes.toml"), args)
}

fn succeeds(out: &Output) {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Sends notifications about `<prefix>-<n>` until one lands in `file`, which must happen within
/// 2 s; then the next one lands there and only there, not in `other`.
fn lands_within_two_seconds(relay: &Relay, prefix: &str, file: &str, other: &str) {
    let started = Instant::now();
    for n in 0.. {
        let bundle_uuid = format!("{prefix}-{n}");
        relay.accepted(&bundle_uuid);
        if relay.landed(file).contains(&bundle_uuid) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "nothing reached {file} within 2 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    relay.lands_in(&format!("{prefix}-next"), file, other);
}

#[test]
fn a_split_started_while_the_relay_runs_takes_its_slice_until_it_stops() {
    let (relay, _) = Relay::with_split("alice", "30s");
    // The rest keeps flowing to the routes.
    relay.lands_in("bb-1", "main.jsonl", "alice.jsonl");

    succeeds(&relay.cli(&["split", "stop", "alice"]));
    lands_within_two_seconds(&relay, "aa-2", "main.jsonl", "alice.jsonl");
}

#[test]
fn an_expired_split_takes_nothing_before_gc_removes_it() {
    let (relay, _) = Relay::with_split("bob", "6s");
    // Until just past its expiry (times are written to the second).
    let listed = relay.cli(&["split", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let expires: relay_core::live::Timestamp =
        listed[0]["expires_at"].as_str().unwrap().parse().unwrap();
    if let Ok(left) = expires.0.duration_since(std::time::SystemTime::now()) {
        std::thread::sleep(left + Duration::from_millis(200));
    }
    // Still in the document, no longer in effect.
    let listed = relay.cli(&["split", "list", "--json"]);
    succeeds(&listed);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed[0]["expired"], true, "{listed}");
    relay.lands_in("aa-expired", "main.jsonl", "bob.jsonl");

    succeeds(&relay.cli(&["split", "gc"]));
    let listed = relay.cli(&["split", "list", "--json"]);
    assert_eq!(
        serde_json::from_slice::<Value>(&listed.stdout).unwrap(),
        Value::Array(vec![])
    );
}

#[test]
fn a_broken_document_leaves_the_last_good_routes_and_their_version() {
    let (relay, carol) = Relay::with_split("carol", "1h");
    let good = relay.accepted("aa-good");
    let version = good["routes_version"].clone();
    assert!(version.is_string(), "{good}");

    // Written around the CLI, which would refuse it: a split that takes everything, and then
    // a document that is not TOML.
    let routes = relay.dir().join("routes.toml");
    let text = std::fs::read_to_string(&routes).unwrap();
    for broken in [
        text.replace("prefix = \"aa\"", "exists = true"),
        "[[splits]\nname = ".to_owned(),
    ] {
        std::fs::write(&routes, broken).unwrap();
        std::thread::sleep(Duration::from_millis(2500));
        let body = relay.accepted("aa-broken");
        assert_eq!(body["routes_version"], version, "{body}");
        let delivery = &body["deliveries"][0];
        assert_eq!(delivery["sink"], "split:carol", "{body}");
        let file = carol.file_name().unwrap().to_str().unwrap();
        assert!(
            delivery["resource"]
                .as_str()
                .is_some_and(|r| r.starts_with("file:/") && r.ends_with(file)),
            "{body}"
        );
    }
}

#[test]
fn two_writers_at_once_lose_no_update() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    relay_testkit::stores::two_split_writers_lose_no_update(routes.to_str().unwrap());
}

#[test]
fn splits_without_a_filter_or_taking_everything_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eve.jsonl");
    let path = path.to_str().unwrap();
    let missing = relay_cli(dir.path(), &["split", "start", "eve", "--file", path]);
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("--match"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
    for everything in ["{}", r#"{"match":{"bundle_uuid":[{"exists":true}]}}"#] {
        let out = relay_cli(
            dir.path(),
            &[
                "split", "start", "eve", "--match", everything, "--file", path,
            ],
        );
        assert!(!out.status.success(), "{everything}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("takes every notification"), "{stderr}");
    }
    assert!(!dir.path().join("routes.toml").exists());
}
