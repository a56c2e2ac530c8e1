//! The relay's metric lines, kept for a test to read.

use std::sync::Mutex;

use serde_json::Value;

/// Every metric line written, parsed.
#[derive(Debug, Default)]
pub struct Lines(Mutex<Vec<Value>>);

impl relay_core::metrics::MetricsOut for Lines {
    fn write_line(&self, line: &str) {
        self.0
            .lock()
            .expect("not poisoned")
            .push(serde_json::from_str(line).expect("a metric line is JSON"));
    }
}

impl Lines {
    /// Every line so far.
    pub fn all(&self) -> Vec<Value> {
        self.0.lock().expect("not poisoned").clone()
    }

    /// The sum of `metric` over the lines whose dimensions match `with`.
    pub fn sum(&self, metric: &str, with: &[(&str, &str)]) -> f64 {
        self.0
            .lock()
            .expect("not poisoned")
            .iter()
            .filter(|l| with.iter().all(|(k, v)| l[*k] == *v))
            .filter_map(|l| l[metric].as_f64())
            .sum()
    }
}
