//! The real relay-gcf binary on a free loopback port, for tests that need its server.
#![allow(dead_code, unreachable_pub)]

use std::net::TcpStream;

use relay_testkit::RelayProcess;

/// relay-gcf with the capture secret, no clock-skew check (the captures are old), a file sink
/// in a folder of its own and `vars` on top; stopped when dropped.
pub struct Server {
    pub process: RelayProcess,
    dir: tempfile::TempDir,
}

impl Server {
    pub fn start(vars: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let sink = dir.path().join("sink.jsonl");
        let sink = sink.to_str().unwrap();
        let mut envs = vec![
            ("RELAY_HMAC_SECRET", relay_testkit::capture::SECRET),
            ("RELAY_MAX_CLOCK_SKEW_SECS", "0"),
            ("RELAY_FILE_SINK", sink),
            ("RELAY_LOG_FORMAT", "json"),
        ];
        envs.extend_from_slice(vars);
        let process = RelayProcess::start(env!("CARGO_BIN_EXE_relay-gcf"), envs);
        Self { process, dir }
    }

    /// The file sink's path.
    pub fn sink(&self) -> std::path::PathBuf {
        self.dir.path().join("sink.jsonl")
    }

    /// A connection to the server.
    pub fn connect(&self) -> TcpStream {
        self.process.connect()
    }

    /// The server's peak resident memory so far, in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.process.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}
