//! The servers under test, each a process pinned to core 0, and what /proc says they used.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use relay_testkit::fake_sqs::FakeSqs;
use relay_testkit::free_port;

/// The HMAC secret the load signs with.
pub(crate) const SECRET: &str = "bench-secret";

/// A server process pinned to core 0, stopped when dropped.
#[derive(Debug)]
pub(crate) struct Pinned {
    child: Child,
    /// Where it listens.
    pub(crate) port: u16,
}

impl Pinned {
    fn spawn(binary: &std::path::Path, args: &[String], env: &[(&str, String)], port: u16) -> Self {
        let mut command = Command::new("taskset");
        command.arg("-c").arg("0").arg(binary).args(args);
        command
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let server = Self {
            child: command.spawn().expect("taskset runs"),
            port,
        };
        for _ in 0..400 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!(
            "{} did not listen on {port} (its settings are refused, or a DynamoDB row needs relay-gcf built with --features dynamodb)",
            binary.display()
        );
    }

    /// The bare floor: this binary's `floor` command.
    pub(crate) fn floor() -> Self {
        let port = free_port();
        let exe = std::env::current_exe().expect("this binary");
        Self::spawn(
            &exe,
            &["floor".into(), format!("127.0.0.1:{port}")],
            &[],
            port,
        )
    }

    /// relay-gcf (the release build next to this binary), publishing to `sqs`.
    pub(crate) fn relay(sqs: &FakeSqs) -> Self {
        Self::relay_with(sqs, &[])
    }

    /// relay-gcf publishing to `sqs` and writing its metric lines (`RELAY_METRICS=emf`) to
    /// standard output, which is /dev/null here.
    pub(crate) fn relay_with_metrics(sqs: &FakeSqs) -> Self {
        Self::relay_with(sqs, &[("RELAY_METRICS", "emf".into())])
    }

    /// relay-gcf publishing to `sqs`, with `extra` settings too (a DynamoDB ledger's needs
    /// relay-gcf's cargo feature `dynamodb`).
    pub(crate) fn relay_with(sqs: &FakeSqs, extra: &[(&'static str, String)]) -> Self {
        let port = free_port();
        // BENCH_RELAY runs another build, such as one with symbols for perf.
        let binary = match std::env::var_os("BENCH_RELAY") {
            Some(path) => path.into(),
            None => std::env::current_exe()
                .expect("this binary")
                .with_file_name("relay-gcf"),
        };
        assert!(
            binary.exists(),
            "{} is missing: cargo build --release -p relay-gcf",
            binary.display()
        );
        let mut env = vec![
            ("RELAY_LISTEN", format!("127.0.0.1:{port}")),
            ("RELAY_HMAC_KEYS", format!(r#"{{"dss": "{SECRET}"}}"#)),
            ("RELAY_SQS_QUEUE_URL", sqs.queue_url()),
            ("RELAY_LOG_FORMAT", "json".into()),
            // As the image sets it.
            ("MIMALLOC_ARENA_EAGER_COMMIT", "0".into()),
            ("RUST_LOG", "warn".into()),
            ("AWS_ENDPOINT_URL_SQS", sqs.endpoint.clone()),
            ("AWS_ACCESS_KEY_ID", "bench".into()),
            ("AWS_SECRET_ACCESS_KEY", "bench".into()),
            ("AWS_REGION", "us-east-1".into()),
        ];
        // A configuration file names its own sinks, never beside the variables' sink.
        if extra.iter().any(|(name, _)| *name == "RELAY_CONFIG") {
            env.retain(|(name, _)| *name != "RELAY_SQS_QUEUE_URL");
        }
        env.extend(extra.iter().cloned());
        Self::spawn(&binary, &[], &env, port)
    }

    /// User plus system CPU time used so far, in microseconds.
    pub(crate) fn cpu_us(&self) -> u64 {
        stat_cpu_us(&format!("/proc/{}/stat", self.child.id()), 11)
    }

    /// Resets the peak resident set size that [`peak_rss_kib`](Self::peak_rss_kib) reports.
    pub(crate) fn reset_peak_rss(&self) {
        let _ = std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5");
    }

    /// The peak resident set size since start or the last reset, in KiB.
    pub(crate) fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("a live process");
        let line = status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .expect("VmHWM");
        line.split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .expect("a number")
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The sum of the clock-tick fields `first` and `first + 1` of the `/proc/…/stat` file at `path`
/// (counted after the command name), in microseconds: 11 for a process's user and system time,
/// 13 for that of the children it waited for.
pub(crate) fn stat_cpu_us(path: &str, first: usize) -> u64 {
    let stat = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .expect("a stat line")
        .1
        .split(' ')
        .collect();
    let tick = |i: usize| fields[i].parse::<u64>().expect("a clock-tick count");
    (tick(first) + tick(first + 1)) * 1_000_000 / 100
}
