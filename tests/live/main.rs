//! Live routes through the real binaries: relay-gcf reading a stored routes file every second,
//! changed by `relay split` and `relay routes` while it runs, fed by `relay send`.
//!
//! Needs the relay-gcf and relay binaries built next to this test (`cargo build --workspace`,
//! which `make test` runs first); no emulator.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const SECRET: &str = "live-routes-secret";
const SPLIT_MATCH: &str = r#"{"match":{"bundle_uuid":[{"prefix":"aa"}]}}"#;

fn binary(name: &str) -> PathBuf {
    relay_testkit::built_binary(name)
}

/// relay-gcf with a file sink `main.jsonl` and the stored routes `routes.toml`, both in `dir`,
/// read again every second; killed when dropped.
struct Relay {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Relay {
    fn start(dir: &Path) -> Self {
        let port = relay_testkit::free_port();
        let child = Command::new(binary("relay-gcf"))
            .env_clear()
            .env("RELAY_LISTEN", format!("127.0.0.1:{port}"))
            .env("RELAY_HMAC_SECRET", SECRET)
            .env("RELAY_FILE_SINK", dir.join("main.jsonl"))
            .env("RELAY_ROUTES_URL", dir.join("routes.toml"))
            .env("RELAY_ROUTES_REFRESH_SECS", "1")
            .env("RELAY_LOG_FORMAT", "json")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let relay = Self {
            child,
            port,
            dir: dir.to_owned(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "relay-gcf did not listen");
            std::thread::sleep(Duration::from_millis(25));
        }
        relay
    }

    /// Sends a notification about `bundle_uuid`; returns the status line and the JSON body.
    fn send(&self, bundle_uuid: &str) -> (String, Value) {
        let file = self.dir.join(format!("{bundle_uuid}.json"));
        std::fs::write(
            &file,
            format!(
                r#"{{"subscription_id": "live", "event_type": "CREATE", "match": {{"bundle_uuid": "{bundle_uuid}", "bundle_version": "v1"}}}}"#
            ),
        )
        .unwrap();
        let out = Command::new(binary("relay"))
            .args(["send", file.to_str().unwrap(), "--url"])
            .arg(format!("http://127.0.0.1:{}/", self.port))
            .args(["--key-id", "dss", "--secret", SECRET])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut lines = stdout.lines();
        let status = lines.next().unwrap_or_default().to_owned();
        let body = serde_json::from_str(lines.next().unwrap_or("null")).unwrap_or(Value::Null);
        (status, body)
    }

    /// The bundle uuids that reached `file` in `dir`.
    fn landed(&self, file: &str) -> Vec<String> {
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
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

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
        let (status, body) = relay.send(&bundle_uuid);
        assert!(status.starts_with("202"), "{status} {body}");
        if relay.landed(file).contains(&bundle_uuid) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "nothing reached {file} within 2 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let next = format!("{prefix}-next");
    let (status, body) = relay.send(&next);
    assert!(status.starts_with("202"), "{status} {body}");
    assert!(relay.landed(file).contains(&next), "{next} missed {file}");
    assert!(
        !relay.landed(other).contains(&next),
        "{next} also reached {other}"
    );
}

#[test]
fn a_split_started_while_the_relay_runs_takes_its_slice_until_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let relay = Relay::start(dir.path());
    let alice = dir.path().join("alice.jsonl");

    succeeds(&relay_cli(
        dir.path(),
        &[
            "split",
            "start",
            "alice",
            "--match",
            SPLIT_MATCH,
            "--file",
            alice.to_str().unwrap(),
            "--ttl",
            "30s",
        ],
    ));
    lands_within_two_seconds(&relay, "aa-1", "alice.jsonl", "main.jsonl");
    // The rest keeps flowing to the routes.
    let (status, body) = relay.send("bb-1");
    assert!(status.starts_with("202"), "{status} {body}");
    assert!(relay.landed("main.jsonl").contains(&"bb-1".to_owned()));
    assert!(!relay.landed("alice.jsonl").contains(&"bb-1".to_owned()));

    succeeds(&relay_cli(dir.path(), &["split", "stop", "alice"]));
    lands_within_two_seconds(&relay, "aa-2", "main.jsonl", "alice.jsonl");
}

#[test]
fn an_expired_split_takes_nothing_before_gc_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let relay = Relay::start(dir.path());
    let bob = dir.path().join("bob.jsonl");
    succeeds(&relay_cli(
        dir.path(),
        &[
            "split",
            "start",
            "bob",
            "--match",
            SPLIT_MATCH,
            "--file",
            bob.to_str().unwrap(),
            "--ttl",
            "6s",
        ],
    ));
    lands_within_two_seconds(&relay, "aa-1", "bob.jsonl", "main.jsonl");
    // Until just past its expiry (times are written to the second).
    let listed = relay_cli(dir.path(), &["split", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let expires: relay_core::live::Timestamp =
        listed[0]["expires_at"].as_str().unwrap().parse().unwrap();
    if let Ok(left) = expires.0.duration_since(std::time::SystemTime::now()) {
        std::thread::sleep(left + Duration::from_millis(200));
    }
    // Still in the document, no longer in effect.
    let listed = relay_cli(dir.path(), &["split", "list", "--json"]);
    succeeds(&listed);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed[0]["expired"], true, "{listed}");
    let (status, _) = relay.send("aa-expired");
    assert!(status.starts_with("202"));
    assert!(
        relay
            .landed("main.jsonl")
            .contains(&"aa-expired".to_owned())
    );
    assert!(!relay.landed("bob.jsonl").contains(&"aa-expired".to_owned()));

    succeeds(&relay_cli(dir.path(), &["split", "gc"]));
    let listed = relay_cli(dir.path(), &["split", "list", "--json"]);
    assert_eq!(
        serde_json::from_slice::<Value>(&listed.stdout).unwrap(),
        Value::Array(vec![])
    );
}

#[test]
fn a_broken_document_leaves_the_last_good_routes_and_their_version() {
    let dir = tempfile::tempdir().unwrap();
    let relay = Relay::start(dir.path());
    let carol = dir.path().join("carol.jsonl");
    succeeds(&relay_cli(
        dir.path(),
        &[
            "split",
            "start",
            "carol",
            "--match",
            SPLIT_MATCH,
            "--file",
            carol.to_str().unwrap(),
            "--ttl",
            "1h",
        ],
    ));
    lands_within_two_seconds(&relay, "aa-1", "carol.jsonl", "main.jsonl");
    let (_, good) = relay.send("aa-good");
    let version = good["routes_version"].clone();
    assert!(version.is_string(), "{good}");

    // Written around the CLI, which would refuse it: a split that takes everything, and then
    // a document that is not TOML.
    let routes = dir.path().join("routes.toml");
    let text = std::fs::read_to_string(&routes).unwrap();
    for broken in [
        text.replace("prefix = \"aa\"", "exists = true"),
        "[[splits]\nname = ".to_owned(),
    ] {
        std::fs::write(&routes, broken).unwrap();
        std::thread::sleep(Duration::from_millis(2500));
        let (status, body) = relay.send("aa-broken");
        assert!(status.starts_with("202"), "{status} {body}");
        assert_eq!(body["routes_version"], version, "{body}");
        assert_eq!(
            body["deliveries"][0]["sink"],
            format!("file:{}", carol.display()),
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
