//! Lambda's CPU share as a cgroup v1 CPU quota, and the thread that starts each relay process
//! in its cgroup and on core 0 before the process runs any code of its own.
//!
//! A child inherits the cgroup and the CPU affinity of the thread that forks it. So one thread
//! of this process does nothing but start the relay processes: it is pinned to core 0 once, and
//! for a process that runs under the quota from its start it joins the run's cgroup (its own
//! thread id written to `tasks`), forks, and returns to the cgroup it came from. No wrapper
//! (taskset, a shell) runs inside the quota, and no code runs between fork and exec.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Where this machine mounts the cgroup v1 `cpu` controller.
const ROOT: &str = "/sys/fs/cgroup/cpu";

/// The CFS period Lambda's share is expressed in, in microseconds.
const PERIOD_US: u64 = 100_000;

/// The memory size that buys one full vCPU on Lambda, in MB.
pub(crate) const FULL_VCPU_MB: u64 = 1769;

/// The CPU time per [`PERIOD_US`] that Lambda gives a function of `memory_mb`.
pub(crate) fn quota_us(memory_mb: u64) -> u64 {
    (PERIOD_US * memory_mb).div_ceil(FULL_VCPU_MB)
}

/// A `cpu` cgroup with a CFS quota, removed when dropped.
#[derive(Debug)]
pub(crate) struct CpuQuota {
    path: PathBuf,
}

impl CpuQuota {
    /// Creates `/sys/fs/cgroup/cpu/<name>` with `quota_us` of CPU per 100 ms period and no
    /// burst.
    pub(crate) fn create(name: &str, quota_us: u64) -> io::Result<Self> {
        let path = Path::new(ROOT).join(name);
        std::fs::create_dir(&path)?;
        let cgroup = Self { path };
        cgroup.write("cpu.cfs_period_us", PERIOD_US)?;
        cgroup.write("cpu.cfs_quota_us", quota_us)?;
        if cgroup.path.join("cpu.cfs_burst_us").exists() {
            cgroup.write("cpu.cfs_burst_us", 0)?;
        }
        Ok(cgroup)
    }

    fn write(&self, file: &str, value: impl std::fmt::Display) -> io::Result<()> {
        std::fs::write(self.path.join(file), value.to_string())
            .map_err(|e| io::Error::new(e.kind(), format!("{}/{file}: {e}", self.path.display())))
    }

    /// The file a process id is written to to move every thread of that process into the
    /// cgroup.
    pub(crate) fn procs_file(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    /// The periods in which the cgroup was throttled, and for how long in all.
    pub(crate) fn throttled(&self) -> (u64, Duration) {
        let stat = std::fs::read_to_string(self.path.join("cpu.stat")).unwrap_or_default();
        let field = |name: &str| {
            stat.lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        (
            field("nr_throttled "),
            Duration::from_nanos(field("throttled_time ")),
        )
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        // The cgroup is busy until the kernel has let go of the reaped process.
        for _ in 0..200 {
            match std::fs::remove_dir(&self.path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                _ => return,
            }
        }
        eprintln!("cold: could not remove {}", self.path.display());
    }
}

/// Whether cgroups can be made here: the `cpu` controller mounted and writable (root).
pub(crate) fn available() -> bool {
    let name = format!("relay-bench-{}-probe", std::process::id());
    CpuQuota::create(&name, PERIOD_US).is_ok()
}

/// What the spawning thread is asked to do.
struct Job {
    command: Command,
    cgroup: Option<PathBuf>,
    reply: mpsc::Sender<io::Result<(Child, Instant)>>,
}

/// The thread that starts the relay processes on core 0, each in a cgroup when asked.
#[derive(Debug)]
pub(crate) struct Spawner {
    jobs: mpsc::Sender<Job>,
}

impl Spawner {
    /// Starts the thread, pinned to `core` when given.
    pub(crate) fn new(core: Option<usize>) -> Self {
        let (jobs, receive) = mpsc::channel::<Job>();
        let (ready, started) = mpsc::channel();
        std::thread::Builder::new()
            .name("cold-spawner".into())
            .spawn(move || {
                let tid = thread_id();
                let home = home_cgroup();
                let _ = ready.send(core.map_or(Ok(()), |core| pin(tid, core)));
                for mut job in receive {
                    let joined = match &job.cgroup {
                        Some(cgroup) => std::fs::write(cgroup.join("tasks"), tid.to_string()),
                        None => Ok(()),
                    };
                    let spawned = joined.and_then(|()| {
                        let started = Instant::now();
                        job.command.spawn().map(|child| (child, started))
                    });
                    if job.cgroup.is_some() {
                        std::fs::write(home.join("tasks"), tid.to_string())
                            .expect("the spawning thread returns to its cgroup");
                    }
                    let _ = job.reply.send(spawned);
                }
            })
            .expect("a thread");
        started
            .recv()
            .expect("the spawning thread starts")
            .unwrap_or_else(|e| panic!("cannot pin the spawning thread to core {core:?}: {e}"));
        Self { jobs }
    }

    /// Starts `command` on the pinned thread, inside `cgroup` from its first instruction when
    /// given; the child and the moment just before the fork.
    pub(crate) fn spawn(
        &self,
        command: Command,
        cgroup: Option<&CpuQuota>,
    ) -> io::Result<(Child, Instant)> {
        let (reply, answer) = mpsc::channel();
        self.jobs
            .send(Job {
                command,
                cgroup: cgroup.map(|c| c.path.clone()),
                reply,
            })
            .expect("the spawning thread runs");
        answer.recv().expect("the spawning thread answers")
    }
}

/// Pins thread `tid` to `core` (taskset, which this process's own threads may be pinned with).
fn pin(tid: u32, core: usize) -> Result<(), String> {
    let out = Command::new("taskset")
        .args(["-p", "-c", &core.to_string(), &tid.to_string()])
        .output()
        .map_err(|e| format!("taskset: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

/// The calling thread's id (`/proc/thread-self` links to `<pid>/task/<tid>`).
fn thread_id() -> u32 {
    let link = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
    link.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.parse().ok())
        .expect("a thread id")
}

/// The `cpu` cgroup this process runs in (`/proc/self/cgroup`'s `N:cpu:/path` line).
fn home_cgroup() -> PathBuf {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let path = cgroups
        .lines()
        .filter_map(|l| l.split_once(':')?.1.split_once(':'))
        .find(|(controllers, _)| controllers.split(',').any(|c| c == "cpu"))
        .map_or("/", |(_, path)| path);
    Path::new(ROOT).join(path.trim_start_matches('/'))
}

/// The CPU time process `pid` has used so far (its live threads), from their schedstat.
pub(crate) fn process_cpu(pid: u32) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Duration::ZERO;
    };
    let nanos: u64 = tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cold_quota_is_lambdas_share_of_a_vcpu() {
        assert_eq!(quota_us(128), 7236);
        assert_eq!(quota_us(256), 14472);
        assert_eq!(quota_us(FULL_VCPU_MB), PERIOD_US);
    }
}
