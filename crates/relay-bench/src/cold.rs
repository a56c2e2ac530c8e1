//! `BENCH_ONLY=cold`: cold starts of relay-lambda's bootstrap, measured from outside.
//!
//! Each cold start is a fresh process of the bootstrap binary (`BENCH_LAMBDA`, which `make
//! bench-load` sets to the bootstrap `make lambda` builds; else `relay-lambda` next to this
//! binary), started on core 0 with the environment Lambda gives a
//! `provided.al2023` function and the relay's own variables, against a loopback Lambda Runtime
//! API ([`runtime_api`]) that hands it two Function URL events, each a distinct DSS-signed
//! notification, and a loopback SQS-protocol endpoint ([`queue`]) over TLS, whose private CA
//! the relay trusts through `SSL_CERT_FILE` (the system's bundle plus that CA). Lambda's CPU
//! share of a memory size is a cgroup v1 CFS quota ([`cgroup`]): on the whole process (it
//! starts inside the cgroup), or from its first `/next` on (Lambda's init runs unthrottled).
//! The endpoints run on this process's core (1, under `make bench-load`).
//!
//! Per start: *ready* is the fork to the first `/next`; an invocation is the event handed out
//! to its response posted; the peak RSS is `VmHWM` once the process asks for a third event,
//! when it is ended (SIGKILL, by its pid). Every start must answer both events 202 `published`
//! and the endpoint must hold each notification exactly once, or the benchmark fails.
//! `BENCH_COLD_STARTS` sets the starts per row (default 20); the rows' starts are interleaved
//! so that whatever else runs on the machine touches every row alike.

mod cgroup;
mod events;
mod queue;
mod runtime_api;
pub(crate) mod warm;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use cgroup::{CpuQuota, FULL_VCPU_MB, Spawner};
use events::{SECRET, events, lambda_env};
use queue::{Queue, Tls};
use runtime_api::{Event, OnReady, RuntimeApi};

/// How long one cold start may take, at most, before it fails.
const PATIENCE: Duration = Duration::from_secs(120);

/// When the CPU quota starts to apply.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Quota {
    /// No quota: the whole core.
    None,
    /// From the process's first instruction.
    Whole,
    /// From its first `/next` (init unthrottled).
    FromFirstNext,
}

/// One row: a memory size's CPU share, when it applies, and the endpoint's protocol.
#[derive(Debug, Clone)]
struct Scenario {
    memory_mb: u64,
    quota: Quota,
    tls: bool,
}

impl Scenario {
    fn label(&self) -> String {
        let share = match self.quota {
            Quota::None => "full CPU (no quota)".to_owned(),
            _ => format!(
                "{} MB ({:.1} % of a core)",
                self.memory_mb,
                cgroup::quota_us(self.memory_mb) as f64 / 1000.0
            ),
        };
        let when = match self.quota {
            Quota::None => "",
            Quota::Whole => ", (a) quota from exec",
            Quota::FromFirstNext => ", (b) quota from the first /next",
        };
        let protocol = if self.tls { "TLS" } else { "plain HTTP" };
        format!("{share}{when}, {protocol}")
    }
}

/// What one cold start measured.
#[derive(Debug, Clone)]
struct Sample {
    ready: Duration,
    first: Duration,
    second: Duration,
    peak_rss_kib: u64,
    init_cpu: Duration,
    invocations_cpu: Duration,
    throttled: Duration,
    /// Endpoint calls that published nothing (a relay opening its connections at start).
    other_calls: usize,
}

/// What every cold start shares: the binary, the spawning thread, the TLS material, a scratch
/// folder (the CA bundle, each process's output), removed when dropped.
#[derive(Debug)]
struct Bench {
    binary: PathBuf,
    spawner: Spawner,
    tls: Tls,
    scratch: PathBuf,
    bundle: PathBuf,
    starts: usize,
}

impl Bench {
    fn new(binary: PathBuf, core: Option<usize>) -> Self {
        assert!(
            binary.exists(),
            "{} is missing: cargo build --release -p relay-lambda",
            binary.display()
        );
        // The process runs in the scratch folder: a relative path would be looked up there.
        let binary = binary.canonicalize().expect("the binary's path");
        // One folder per bench: two may run at once (the tests).
        static BENCHES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let k = BENCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let scratch =
            std::env::temp_dir().join(format!("relay-bench-cold-{}-{k}", std::process::id()));
        std::fs::create_dir_all(&scratch).expect("a scratch folder");
        let tls = Tls::generate();
        let bundle = scratch.join("ca-bundle.pem");
        tls.write_bundle(&bundle);
        Self {
            binary,
            spawner: Spawner::new(core),
            tls,
            scratch,
            bundle,
            starts: 0,
        }
    }

    /// One cold start of `scenario`; panics, with the process's output, if anything is amiss.
    async fn cold_start(&mut self, scenario: &Scenario) -> Sample {
        self.starts += 1;
        let n = self.starts;
        let queue = Queue::start(scenario.tls.then_some(&self.tls)).await;
        let (events, payloads) = events(n, 2);
        let cgroup = match scenario.quota {
            Quota::None => None,
            _ => Some(
                CpuQuota::create(
                    &format!("relay-bench-{}-{n}", std::process::id()),
                    cgroup::quota_us(scenario.memory_mb),
                )
                .expect("a cpu cgroup"),
            ),
        };
        let on_ready: Option<OnReady> = match (&cgroup, scenario.quota) {
            (Some(cgroup), Quota::FromFirstNext) => {
                let procs = cgroup.procs_file();
                Some(Box::new(move |pid: u32| {
                    std::fs::write(&procs, pid.to_string())
                        .map_err(|e| format!("{}: {e}", procs.display()))
                }))
            }
            _ => None,
        };
        let api = RuntimeApi::start(events.clone(), on_ready).await;
        let output = self.scratch.join(format!("start-{n}.log"));
        let command = self.command(scenario, &api, &queue, &output);
        let whole = cgroup.as_ref().filter(|_| scenario.quota == Quota::Whole);
        let (mut child, started) = self
            .spawner
            .spawn(command, whole)
            .unwrap_or_else(|e| panic!("{} does not run: {e}", self.binary.display()));
        let pid = child.id();
        api.set_pid(pid);
        let what = format!("cold start {n} ({})", scenario.label());
        until_idle(&mut child, &api, &output, &what).await;
        let peak_rss_kib = peak_rss_kib(pid);
        child.kill().expect("the process is ended");
        child.wait().expect("the process is reaped");
        let throttled = cgroup.as_ref().map_or(Duration::ZERO, |c| c.throttled().1);
        drop(cgroup);
        let log = api.log();
        let seen = queue.seen();
        if let Err(why) = check(&log, &events, &seen, &payloads) {
            fail(&output, &what, why);
        }
        let first_next = log.first_next.expect("checked");
        Sample {
            ready: first_next - started,
            first: log.responses[0].1 - log.handed[0].1,
            second: log.responses[1].1 - log.handed[1].1,
            peak_rss_kib,
            init_cpu: log.cpu_at_ready,
            invocations_cpu: log.cpu_at_idle.saturating_sub(log.cpu_at_ready),
            throttled,
            other_calls: seen.other.len(),
        }
    }

    /// The process as Lambda starts a `provided.al2023` function's bootstrap, with the relay's
    /// variables and the endpoint's address.
    fn command(
        &self,
        scenario: &Scenario,
        api: &RuntimeApi,
        queue: &Queue,
        output: &Path,
    ) -> Command {
        let memory = match scenario.quota {
            Quota::None => FULL_VCPU_MB,
            _ => scenario.memory_mb,
        };
        let mut command = self.process(api, memory, output);
        command
            .env("RELAY_SQS_QUEUE_URL", queue.queue_url())
            .env("AWS_ENDPOINT_URL_SQS", &queue.endpoint);
        command
    }

    /// The bootstrap with Lambda's environment for `memory_mb`, the relay's HMAC secret and the
    /// CA bundle, writing to `output`; the destination's variables are the caller's.
    fn process(&self, api: &RuntimeApi, memory_mb: u64, output: &Path) -> Command {
        let out = std::fs::File::create(output).expect("an output file");
        let err = out.try_clone().expect("an output file");
        let mut command = Command::new(&self.binary);
        command
            .env_clear()
            .envs(lambda_env(&api.addr.to_string(), memory_mb))
            .env("RELAY_HMAC_SECRET", SECRET)
            .env("SSL_CERT_FILE", &self.bundle)
            .current_dir(&self.scratch)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        command
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

/// Waits until the process has answered every event and asks for the next; panics, with its
/// output, when it exits first or is not idle within [`PATIENCE`].
async fn until_idle(child: &mut Child, api: &RuntimeApi, output: &Path, what: &str) {
    let since = Instant::now();
    while !api.idle(Duration::from_millis(50)).await {
        if let Ok(Some(status)) = child.try_wait() {
            fail(
                output,
                what,
                format!("the process exited ({status}); {:?}", api.log()),
            );
        }
        if since.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            fail(
                output,
                what,
                format!("not idle after {PATIENCE:?}; {:?}", api.log()),
            );
        }
    }
}

/// Panics with why `what` failed and the end of the process's `output`.
fn fail(output: &Path, what: &str, why: String) -> ! {
    let text = std::fs::read_to_string(output).unwrap_or_default();
    let tail = &text[text.len().saturating_sub(4000)..];
    panic!("{what} failed: {why}\nits output:\n{tail}")
}

/// Why a start's exchange is not the expected one: both events handed out and answered 202
/// `published` in order, no error posted, and each notification taken by the endpoint once.
fn check(
    log: &runtime_api::Log,
    events: &[Event],
    seen: &queue::Seen,
    payloads: &[String],
) -> Result<(), String> {
    if !log.errors.is_empty() || !seen.refused.is_empty() {
        return Err(format!(
            "errors: {:?}; endpoint refused: {:?}",
            log.errors, seen.refused
        ));
    }
    let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
    let handed: Vec<&str> = log.handed.iter().map(|(id, _)| id.as_str()).collect();
    let answered: Vec<&str> = log.responses.iter().map(|(id, ..)| id.as_str()).collect();
    if log.first_next.is_none() || handed != ids || answered != ids {
        return Err(format!(
            "handed out {handed:?}, answered {answered:?}; expected {ids:?}"
        ));
    }
    all_published(&log.responses)?;
    let mut taken = seen.bodies.clone();
    taken.sort();
    let mut sent = payloads.to_vec();
    sent.sort();
    if taken != sent {
        return Err(format!(
            "the endpoint took {} bodies {taken:?}; expected each of {sent:?} once",
            taken.len()
        ));
    }
    Ok(())
}

/// Why `responses` are not all 202 `published`.
fn all_published(responses: &[runtime_api::Posted]) -> Result<(), String> {
    for (id, _, body) in responses {
        let response: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let answer: Value = response["body"]
            .as_str()
            .and_then(|b| serde_json::from_str(b).ok())
            .unwrap_or(Value::Null);
        if response["statusCode"] != 202 || answer["status"] != "published" {
            return Err(format!(
                "{id} answered {}, not 202 published",
                String::from_utf8_lossy(body)
            ));
        }
    }
    Ok(())
}

/// The peak resident set size of process `pid`, in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .expect("VmHWM of a live process")
}

/// The `q` quantile (nearest rank) of `values`.
fn quantile<T: Copy + Ord>(values: &[T], q: f64) -> T {
    let mut sorted = values.to_vec();
    sorted.sort();
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `p50 / p90` of one measure of the samples, in milliseconds.
fn spread(samples: &[Sample], measure: impl Fn(&Sample) -> Duration) -> String {
    let values: Vec<Duration> = samples.iter().map(measure).collect();
    format!(
        "{:.1} / {:.1}",
        ms(quantile(&values, 0.5)),
        ms(quantile(&values, 0.9))
    )
}

/// The bootstrap measured: `BENCH_LAMBDA`, else `relay-lambda` next to this binary.
fn bootstrap() -> PathBuf {
    match std::env::var_os("BENCH_LAMBDA") {
        Some(path) => PathBuf::from(path),
        None => std::env::current_exe()
            .expect("this binary")
            .with_file_name("relay-lambda"),
    }
}

fn starts() -> usize {
    crate::number_from_env("BENCH_COLD_STARTS", 20)
}

/// The rows: the full core, 128 and 256 MB's shares in both modes over TLS, and 128 MB's from
/// the first `/next` over plain HTTP.
fn scenarios() -> Vec<Scenario> {
    let row = |memory_mb, quota, tls| Scenario {
        memory_mb,
        quota,
        tls,
    };
    vec![
        row(FULL_VCPU_MB, Quota::None, true),
        row(128, Quota::Whole, true),
        row(128, Quota::FromFirstNext, true),
        row(256, Quota::Whole, true),
        row(256, Quota::FromFirstNext, true),
        row(128, Quota::FromFirstNext, false),
    ]
}

/// The table. Without cgroups (not root, or no cgroup v1 `cpu` controller), it is skipped with
/// a note when every table runs, and fails when it alone was asked for.
pub(crate) async fn table() {
    if !cgroup::available() {
        let why = "the cold-start table needs root and the cgroup v1 cpu controller at /sys/fs/cgroup/cpu";
        match std::env::var("BENCH_ONLY").as_deref() {
            Ok("cold") => panic!("{why}"),
            _ => {
                println!("(skipped: {why})");
                return;
            }
        }
    }
    let mut bench = Bench::new(bootstrap(), Some(0));
    let scenarios = scenarios();
    // One start, not counted, so the binary is in the page cache for every row alike.
    bench.cold_start(&scenarios[0]).await;
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); scenarios.len()];
    for _ in 0..starts() {
        for (scenario, samples) in scenarios.iter().zip(&mut samples) {
            samples.push(bench.cold_start(scenario).await);
        }
    }
    println!(
        "| relay-lambda cold start, 2 events | starts | ready (ms) p50 / p90 | 1st invocation (ms) p50 / p90 | 2nd invocation (ms) p50 / p90 | peak RSS (MiB) p50 / p90 | CPU to ready (ms) p50 | CPU of both invocations (ms) p50 | throttled (ms) p50 |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (scenario, samples) in scenarios.iter().zip(&samples) {
        let rss: Vec<u64> = samples.iter().map(|s| s.peak_rss_kib).collect();
        let median = |measure: fn(&Sample) -> Duration| {
            let values: Vec<Duration> = samples.iter().map(measure).collect();
            ms(quantile(&values, 0.5))
        };
        println!(
            "| {} | {} | {} | {} | {} | {:.1} / {:.1} | {:.1} | {:.1} | {:.0} |",
            scenario.label(),
            samples.len(),
            spread(samples, |s| s.ready),
            spread(samples, |s| s.first),
            spread(samples, |s| s.second),
            quantile(&rss, 0.5) as f64 / 1024.0,
            quantile(&rss, 0.9) as f64 / 1024.0,
            median(|s| s.init_cpu),
            median(|s| s.invocations_cpu),
            median(|s| s.throttled),
        );
    }
    let other: usize = samples.iter().flatten().map(|s| s.other_calls).sum();
    if other > 0 {
        println!(
            "\n({other} calls that publish nothing, GetQueueAttributes, in {} starts: the relay opens its connections at start)",
            samples.iter().map(Vec::len).sum::<usize>()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cold_quantiles_are_nearest_rank() {
        let values: Vec<u32> = (1..=20).collect();
        assert_eq!(quantile(&values, 0.5), 10);
        assert_eq!(quantile(&values, 0.9), 18);
        assert_eq!(quantile(&[7], 0.9), 7);
    }

    /// The bench's machinery against the debug relay-lambda: one cold start at full CPU over
    /// TLS, both events answered 202 and published once each (the start panics otherwise).
    #[test]
    fn cold_start_exchange_with_the_debug_relay_lambda() {
        with_debug_bench(async |bench| {
            let sample = bench.cold_start(&scenarios()[0]).await;
            assert!(sample.ready > Duration::ZERO && sample.peak_rss_kib > 0);
            assert!(sample.first > Duration::ZERO && sample.second > Duration::ZERO);
        });
    }

    /// Runs `test` with a bench of the debug relay-lambda, on a runtime of one worker.
    pub(super) fn with_debug_bench(test: impl AsyncFnOnce(&mut Bench)) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let mut bench = Bench::new(relay_testkit::built_binary("relay-lambda"), None);
            test(&mut bench).await;
        });
    }
}
