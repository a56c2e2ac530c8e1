//! How fast a replay goes and how it shows: a rate limiter, and the progress on standard error.

use std::io::IsTerminal as _;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

/// At most `rate` starts per second, evenly spaced.
pub(super) struct Limiter {
    interval: Option<Duration>,
    next: Mutex<Instant>,
}

impl Limiter {
    pub(super) fn new(rate: Option<f64>) -> Self {
        Self {
            interval: rate.map(|r| Duration::from_secs_f64(1.0 / r)),
            next: Mutex::new(Instant::now()),
        }
    }

    pub(super) async fn wait(&self) {
        let Some(interval) = self.interval else {
            return;
        };
        let at = {
            let mut next = self.next.lock().await;
            let at = (*next).max(Instant::now());
            *next = at + interval;
            at
        };
        tokio::time::sleep_until(at.into()).await;
    }
}

/// A bar with the rate and the time left on a terminal; a plain line a second otherwise. It
/// counts the archive's objects read (records written together share one) and the
/// notifications sent, with their rate.
pub(super) struct Progress {
    bar: Option<indicatif::ProgressBar>,
    total: u64,
    done: std::sync::atomic::AtomicU64,
    started: Instant,
    last_line: std::sync::Mutex<Instant>,
    /// `sent`, or `to send` in a dry run.
    verb: &'static str,
}

impl Progress {
    pub(super) fn new(total: u64, dry_run: bool) -> Self {
        let verb = if dry_run { "to send" } else { "sent" };
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(total);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:40} {pos}/{len} objects read, {msg}, {eta} left",
                )
                .expect("a valid template"),
            );
            bar
        });
        let started = Instant::now();
        Self {
            bar,
            total,
            done: 0.into(),
            started,
            last_line: std::sync::Mutex::new(started),
            verb,
        }
    }

    pub(super) fn tick(&self, sent: usize) {
        let done = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if let Some(bar) = &self.bar {
            bar.set_message(self.sent(sent));
            bar.set_position(done);
            return;
        }
        let mut last = self.last_line.lock().expect("never poisoned");
        if last.elapsed() >= Duration::from_secs(1) {
            *last = Instant::now();
            eprintln!("{}", self.line(done, sent));
        }
    }

    pub(super) fn finish(&self, sent: usize) {
        let done = self.done.load(std::sync::atomic::Ordering::Relaxed);
        match &self.bar {
            Some(bar) => bar.finish_and_clear(),
            None => eprintln!("{}", self.line(done, sent)),
        }
    }

    /// `N sent, R/s`: the notifications sent so far, and how many a second.
    fn sent(&self, sent: usize) -> String {
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        format!("{sent} {}, {:.0}/s", self.verb, sent as f64 / secs)
    }

    fn line(&self, done: u64, sent: usize) -> String {
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = done as f64 / secs;
        let left = match rate > 0.0 {
            true => Duration::from_secs_f64((self.total - done) as f64 / rate),
            false => Duration::ZERO,
        };
        format!(
            "replay: {done}/{} objects read, {}, {} left",
            self.total,
            self.sent(sent),
            humantime::format_duration(Duration::from_secs(left.as_secs_f64().ceil() as u64))
        )
    }
}
