//! What a replay did: each record's result, counted, and the summary printed at the end.

use std::collections::BTreeMap;

use relay_core::relay::Replayed;

use crate::terminal::safe;

/// What a replay did, in counts.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    pub(crate) listed: usize,
    pub(crate) outside: usize,
    pub(crate) filtered: usize,
    pub(crate) done: usize,
    pub(crate) failed: usize,
    /// Objects that are not records sealed with the archive's key: never sent.
    pub(crate) refused: usize,
    pub(crate) gone: usize,
    /// Records of requests refused on arrival, left to `--refused`.
    pub(crate) refused_on_arrival: usize,
    /// Notifications sent (or, in a dry run, that would be), per destination.
    pub(crate) sent: BTreeMap<String, usize>,
    pub(crate) notifications_sent: usize,
    /// Dry runs: one line per notification that would be sent.
    pub(crate) lines: Vec<String>,
    /// Interrupted: the archive's objects not started (or not finished).
    pub(crate) left: usize,
}

/// What became of one record.
pub(super) enum Result1 {
    Gone,
    Outside,
    Replayed(String, Replayed),
    Failed(String, String),
    Refused(String, String),
    RefusedOnArrival,
}

impl Summary {
    pub(super) fn add(&mut self, result: Result1) {
        match result {
            Result1::Gone => self.gone += 1,
            Result1::Outside => self.outside += 1,
            Result1::RefusedOnArrival => self.refused_on_arrival += 1,
            Result1::Failed(key, error) => {
                eprintln!("relay replay: {}: {}", safe(&key), safe(&error));
                self.failed += 1;
            }
            Result1::Refused(key, error) => {
                eprintln!("relay replay: {}: not sent: {}", safe(&key), safe(&error));
                self.refused += 1;
            }
            Result1::Replayed(key, replayed) => match replayed {
                Replayed::Filtered => self.filtered += 1,
                Replayed::Done { .. } => self.done += 1,
                Replayed::WouldSend { to, done } => {
                    if to.is_empty() {
                        self.done += 1;
                        return;
                    }
                    self.notifications_sent += 1;
                    let mut line = format!("would send {key} to {}", to.join(", "));
                    if !done.is_empty() {
                        line.push_str(&format!(" (done: {})", done.join(", ")));
                    }
                    self.lines.push(line);
                    for name in to {
                        *self.sent.entry(name).or_default() += 1;
                    }
                }
                Replayed::Sent { to, .. } => {
                    self.notifications_sent += 1;
                    for (name, _) in to {
                        *self.sent.entry(name).or_default() += 1;
                    }
                }
                Replayed::Busy { .. } => {
                    eprintln!(
                        "relay replay: {}: still being delivered by another attempt",
                        safe(&key)
                    );
                    self.failed += 1;
                }
                Replayed::Failed { sink, retryable } => {
                    let how = if retryable {
                        "unavailable"
                    } else {
                        "refused it"
                    };
                    eprintln!("relay replay: {}: {} {how}", safe(&key), safe(&sink));
                    self.failed += 1;
                }
            },
        }
    }
}

pub(super) fn print_summary(summary: &Summary, dry_run: bool) {
    for line in &summary.lines {
        println!("{}", safe(line));
    }
    let verb = if dry_run { "would send" } else { "sent" };
    println!(
        "{} archived in the window: {} {verb}, {} delivered before, {} filtered by the routes in effect, {} not selected, {} failed{}",
        summary.listed,
        summary.notifications_sent,
        summary.done,
        summary.filtered,
        summary.outside,
        summary.failed,
        match summary.gone {
            0 => String::new(),
            n => format!(", {n} expired while listed"),
        }
    );
    if summary.refused > 0 {
        println!(
            "  {} refused: objects in the archive that are not records sealed with its key (RELAY_ARCHIVE_KEY), or larger than any record, never sent",
            summary.refused
        );
    }
    if summary.refused_on_arrival > 0 {
        println!(
            "  {} refused on arrival (verified, then answered 400 or 415): relay replay --refused sends them once the configuration takes them",
            summary.refused_on_arrival
        );
    }
    for (destination, count) in &summary.sent {
        println!("  {}: {count} {verb}", safe(destination));
    }
    if summary.left > 0 {
        println!(
            "interrupted with {} of the archive's objects not started: run the same command again to continue",
            summary.left
        );
    }
}
