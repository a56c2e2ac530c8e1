//! The real relay-gcf binary on a free loopback port, for tests that need its server.
#![allow(dead_code, unreachable_pub)]

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use relay_testkit::free_port;

/// A connection to `port`, waiting up to 20 s for a server to listen there.
pub fn connect(port: u16) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => return s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("relay-gcf did not start: {e}"),
        }
    }
}

/// relay-gcf with the capture secret, no clock-skew check (the captures are old), a file sink
/// in a folder of its own and `vars` on top; stopped when dropped.
pub struct Server {
    pub child: Child,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Server {
    pub fn start(vars: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let sink = dir.path().join("sink.jsonl");
        let port = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_relay-gcf"));
        command
            .env("RELAY_LISTEN", format!("127.0.0.1:{port}"))
            .env("RELAY_HMAC_SECRET", relay_testkit::capture::SECRET)
            .env("RELAY_MAX_CLOCK_SKEW_SECS", "0")
            .env("RELAY_FILE_SINK", &sink)
            .env("RELAY_LOG_FORMAT", "json")
            .envs(vars.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let server = Self {
            child: command.spawn().unwrap(),
            port,
            dir,
        };
        drop(server.connect());
        server
    }

    /// The file sink's path.
    pub fn sink(&self) -> std::path::PathBuf {
        self.dir.path().join("sink.jsonl")
    }

    /// A connection to the server.
    pub fn connect(&self) -> TcpStream {
        connect(self.port)
    }

    /// The server's peak resident memory so far, in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Sends SIGTERM, as Cloud Run does before stopping an instance.
    pub fn terminate(&self) {
        let killed = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        assert!(killed.unwrap().success());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
