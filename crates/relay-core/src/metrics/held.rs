//! Metric lines held for the end of an invocation ([`Held`]): on a platform that runs one
//! request at a time and may freeze the process once it has answered (Lambda), the lines of an
//! invocation are written to their output in one write when it ends, by the invocation itself,
//! with no writer thread and nothing to wait for afterwards.

use std::io::Write;
use std::sync::Mutex;

use super::MetricsOut;

/// The lines written since the last `write_out`, and where they go.
pub struct Held {
    lines: Mutex<String>,
    out: Mutex<Box<dyn Write + Send>>,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held").finish_non_exhaustive()
    }
}

impl Held {
    /// Lines held for `out`.
    pub fn new(out: impl Write + Send + 'static) -> Self {
        Self {
            lines: Mutex::new(String::new()),
            out: Mutex::new(Box::new(out)),
        }
    }

    /// Lines held for standard output.
    pub fn stdout() -> Self {
        Self::new(std::io::stdout())
    }

    /// Writes the held lines in one write and flushes; an output that fails loses them, as a
    /// full queue's lines are lost, with a warning.
    pub(crate) fn write_out(&self) {
        let lines = std::mem::take(&mut *self.lines.lock().unwrap_or_else(|e| e.into_inner()));
        if lines.is_empty() {
            return;
        }
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = out.write_all(lines.as_bytes()).and_then(|()| out.flush()) {
            tracing::warn!(error = %e, lines = lines.lines().count(), "Metric lines could not be written.");
        }
    }
}

impl MetricsOut for Held {
    fn write_line(&self, line: &str) {
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines.push_str(line);
        lines.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// A writer whose writes are counted and kept.
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<Vec<Vec<u8>>>>);

    impl Write for Kept {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().push(data.to_vec());
            Ok(data.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_invocations_lines_leave_together_when_it_ends() {
        let kept = Kept::default();
        let held = Held::new(kept.clone());
        held.write_line("{\"a\":1}");
        held.write_owned("{\"b\":2}".to_owned());
        assert!(kept.0.lock().unwrap().is_empty(), "nothing before the end");
        held.write_out();
        assert_eq!(
            *kept.0.lock().unwrap(),
            [b"{\"a\":1}\n{\"b\":2}\n".to_vec()]
        );
        held.write_out();
        assert_eq!(
            kept.0.lock().unwrap().len(),
            1,
            "nothing held, nothing written"
        );
    }
}
