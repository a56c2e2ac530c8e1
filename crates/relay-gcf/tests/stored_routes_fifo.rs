//! relay-gcf whose stored routes path is a FIFO: it listens, keeps refreshing without waiting on
//! it, logs the refusal once, and stops on SIGTERM.

use std::io::{Read as _, Write as _};
use std::process::Command;
use std::time::Duration;

use relay_testkit::RelayProcess;

#[test]
fn a_fifo_as_the_stored_routes_stops_neither_the_start_nor_the_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.toml");
    let made = Command::new("mkfifo").arg(&routes).status().unwrap();
    assert!(made.success());
    let mut command = Command::new(relay_testkit::built_binary("relay-gcf"));
    command
        .env_clear()
        .env("RELAY_ALLOW_UNSIGNED", "true")
        .env("RELAY_FILE_SINK", dir.path().join("main.jsonl"))
        .env("RELAY_ROUTES_URL", &routes)
        .env("RELAY_ROUTES_REFRESH_SECS", "1")
        .env("RELAY_LOG_FORMAT", "json");
    // Panics, and kills it, when it does not listen within its patience.
    let mut relay = RelayProcess::spawn(command);
    // A few refreshes against the FIFO; the server still answers.
    std::thread::sleep(Duration::from_millis(2500));
    let mut stream = relay.connect();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: relay\r\nconnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    relay.terminate();
    let status = relay.exits_within(Duration::from_secs(10));
    assert!(status.success(), "{status}:\n{}", relay.stderr());
    let logged = relay.stderr();
    let refusals = logged
        .lines()
        .filter(|l| l.contains("Cannot read the stored routes"))
        .collect::<Vec<_>>();
    assert_eq!(refusals.len(), 1, "{logged}");
    assert!(refusals[0].contains("a FIFO"), "{}", refusals[0]);
}
