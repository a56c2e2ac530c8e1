//! The queue metric lines wait in, and the thread that writes them: [`LineQueue`], and
//! [`Stdout`], the process's one queue to standard output.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, TrySendError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Field, MetricsOut, line};

/// How many metric lines may wait for the standard-output writer; beyond it a line is dropped
/// and counted.
pub(crate) const STDOUT_QUEUE_LINES: usize = 8192;

/// How long dropping the last [`Stdout`] waits, at most, for the queued lines to be written.
const FLUSH_AT_DROP: Duration = Duration::from_secs(2);

/// Standard output, through one process-wide [`LineQueue`] of `STDOUT_QUEUE_LINES` lines:
/// a request's thread hands each line over and goes on; the writer thread writes whole lines,
/// so they never interleave. Dropping the last `Arc` of it (the relay going away) waits for the
/// queued lines, for at most 2 s; [`flush_stdout`] waits for them without dropping anything.
#[derive(Debug)]
pub struct Stdout;

impl MetricsOut for Stdout {
    fn write_line(&self, line: &str) {
        stdout_queue().write_owned(line.to_owned());
    }

    fn write_owned(&self, line: String) {
        stdout_queue().write_owned(line);
    }
}

impl Drop for Stdout {
    fn drop(&mut self) {
        if let Some(queue) = STDOUT.get() {
            queue.flush_blocking(FLUSH_AT_DROP);
        }
    }
}

static STDOUT: OnceLock<LineQueue> = OnceLock::new();

fn stdout_queue() -> &'static LineQueue {
    STDOUT.get_or_init(|| LineQueue::spawn(std::io::stdout(), STDOUT_QUEUE_LINES))
}

/// Waits until every metric line queued for standard output before the call has been written
/// and flushed, for at most `timeout`; true when they were (or none was ever queued). For a
/// platform that may freeze or stop the process once it has answered (Lambda) and at shutdown.
pub async fn flush_stdout(timeout: Duration) -> bool {
    match STDOUT.get() {
        Some(queue) => queue.flush(timeout).await,
        None => true,
    }
}

enum Command {
    Line(String),
    Flush(FlushAck),
}

enum FlushAck {
    Async(tokio::sync::oneshot::Sender<()>),
    Blocking(mpsc::SyncSender<()>),
}

/// A bounded queue of lines drained by one thread of its own. The first line after a quiet
/// spell wakes the thread, which then waits `GATHER` for the lines that follow (they do not
/// wake it: a line costs its sender a push, not a context switch) and writes all of them,
/// whole lines, in one write, then flushes. A flush request wakes it at once. Writing never
/// blocks: when the queue is full the line is dropped and counted, and the writer reports the
/// count as `MetricLinesDropped` (by `Relay`) in a line of its own, with a warning at most
/// once a minute.
#[derive(Debug)]
pub struct LineQueue {
    tx: mpsc::SyncSender<Command>,
    dropped: Arc<AtomicU64>,
    /// Set by a flush request before it wakes the writer: the writer does not wait out
    /// [`GATHER`] while it is set. The wake-up alone can be lost, since the channel's own
    /// blocking receive parks and unparks the same thread.
    flush_requested: Arc<AtomicBool>,
    /// The writer thread, woken early by a flush request.
    writer: std::thread::Thread,
}

/// How long the writer waits, after the line that woke it, for more to write with it: a line
/// leaves at most this long after it was queued (a flush request does not wait).
pub(crate) const GATHER: Duration = Duration::from_millis(2);

impl LineQueue {
    /// Starts the writer thread over `out`, with room for `capacity` lines.
    pub fn spawn(out: impl Write + Send + 'static, capacity: usize) -> Self {
        Self::spawn_gathering(out, capacity, GATHER)
    }

    /// [`spawn`](Self::spawn) with another gathering window than [`GATHER`].
    pub(crate) fn spawn_gathering(
        out: impl Write + Send + 'static,
        capacity: usize,
        gather: Duration,
    ) -> Self {
        let (tx, rx) = mpsc::sync_channel(capacity);
        let dropped = Arc::new(AtomicU64::new(0));
        let flush_requested = Arc::new(AtomicBool::new(false));
        let counter = Arc::clone(&dropped);
        let flushing = Arc::clone(&flush_requested);
        let writer = std::thread::Builder::new()
            .name("relay-metrics".into())
            .spawn(move || drain(&rx, out, gather, &counter, &flushing))
            .expect("a thread for metric lines")
            .thread()
            .clone();
        Self {
            tx,
            dropped,
            flush_requested,
            writer,
        }
    }

    /// Lines dropped because the queue was full and not yet reported.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Waits, without blocking the thread, until the lines queued before the call have been
    /// written and flushed, for at most `timeout`; true when they were.
    pub async fn flush(&self, timeout: Duration) -> bool {
        let (ack, done) = tokio::sync::oneshot::channel();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut command = Command::Flush(FlushAck::Async(ack));
        self.flush_requested.store(true, Ordering::Release);
        loop {
            match self.tx.try_send(command) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) if tokio::time::Instant::now() < deadline => {
                    command = back;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Err(_) => return false,
            }
        }
        self.writer.unpark();
        tokio::time::timeout_at(deadline, done)
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// [`flush`](Self::flush), blocking the calling thread.
    pub fn flush_blocking(&self, timeout: Duration) -> bool {
        let (ack, done) = mpsc::sync_channel(1);
        let deadline = Instant::now() + timeout;
        let mut command = Command::Flush(FlushAck::Blocking(ack));
        self.flush_requested.store(true, Ordering::Release);
        loop {
            match self.tx.try_send(command) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) if Instant::now() < deadline => {
                    command = back;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(_) => return false,
            }
        }
        self.writer.unpark();
        done.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .is_ok()
    }
}

impl MetricsOut for LineQueue {
    fn write_line(&self, line: &str) {
        self.write_owned(line.to_owned());
    }

    fn write_owned(&self, line: String) {
        if self.tx.try_send(Command::Line(line)).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Lines gathered into one write, at most (a longer run is written in several).
const WRITE_BYTES: usize = 256 * 1024;

/// The writer thread: writes what is waiting, flushes when nothing more is, until every
/// sender is gone.
fn drain(
    rx: &mpsc::Receiver<Command>,
    mut out: impl Write,
    gather: Duration,
    dropped: &AtomicU64,
    flush_requested: &AtomicBool,
) {
    let mut buffer = Vec::with_capacity(WRITE_BYTES);
    let mut acks = Vec::new();
    let mut last = String::new();
    let mut warned: Option<Instant> = None;
    while let Ok(first) = rx.recv() {
        // A flush request sets the flag, then sends, then unparks: seen here, it is not waited
        // for; set after this check, its unpark ends the wait (or makes it return at once).
        if matches!(first, Command::Line(_)) && !flush_requested.load(Ordering::Acquire) {
            std::thread::park_timeout(gather);
        }
        flush_requested.store(false, Ordering::Release);
        let mut next = Some(first);
        while let Some(command) = next.take() {
            match command {
                Command::Line(line) => {
                    buffer.extend_from_slice(line.as_bytes());
                    buffer.push(b'\n');
                    last = line;
                }
                Command::Flush(ack) => acks.push(ack),
            }
            if buffer.len() < WRITE_BYTES {
                next = rx.try_recv().ok();
            }
        }
        let lost = dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            buffer.extend_from_slice(dropped_line(&last, lost).as_bytes());
            buffer.push(b'\n');
            if warned.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) {
                warned = Some(Instant::now());
                tracing::warn!(
                    dropped = lost,
                    "Metric lines dropped: standard output did not keep up."
                );
            }
        }
        write_lines(&mut out, &buffer);
        buffer.clear();
        let _ = out.flush();
        for ack in acks.drain(..) {
            match ack {
                FlushAck::Async(ack) => drop(ack.send(())),
                FlushAck::Blocking(ack) => drop(ack.send(())),
            }
        }
    }
}

/// A pipe takes a write of at most this many bytes whole (`PIPE_BUF` on Linux).
const ATOMIC_WRITE: usize = 4096;

/// Writes `buffer`, whole lines, in writes of at most [`ATOMIC_WRITE`] bytes that each end at
/// a line's end (a longer line alone), so that nothing another writer of the same pipe writes
/// (the file sink's `-`) lands inside a line.
fn write_lines(out: &mut impl Write, buffer: &[u8]) {
    let mut rest = buffer;
    while !rest.is_empty() {
        let cut = match rest.len() <= ATOMIC_WRITE {
            true => rest.len(),
            false => memchr::memrchr(b'\n', &rest[..ATOMIC_WRITE])
                .or_else(|| memchr::memchr(b'\n', rest))
                .map_or(rest.len(), |at| at + 1),
        };
        let _ = out.write_all(&rest[..cut]);
        rest = &rest[cut..];
    }
}

/// The line reporting `count` dropped lines, under the `Relay` of `last`, a line written.
fn dropped_line(last: &str, count: u64) -> String {
    let relay = serde_json::from_str::<Value>(last)
        .ok()
        .and_then(|line| line.get("Relay").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default();
    line(
        &relay,
        &[&["Relay"]],
        &[("MetricLinesDropped", "Count")],
        &[("MetricLinesDropped", Field::Count(count))],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Output that keeps each write apart.
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.push(bytes.to_vec());
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn writes_end_at_line_ends_and_fit_a_pipe_whole() {
        let mut buffer = Vec::new();
        for len in [999, 999, 999, 999, 999, 5000, 10] {
            buffer.extend(std::iter::repeat_n(b'x', len));
            buffer.push(b'\n');
        }
        let mut out = Writes(Vec::new());
        write_lines(&mut out, &buffer);
        assert_eq!(out.0.concat(), buffer);
        let sizes: Vec<usize> = out.0.iter().map(Vec::len).collect();
        assert_eq!(sizes, [4000, 1000, 5001, 11]);
        assert!(out.0.iter().all(|w| w.ends_with(b"\n")));
    }
}
