//! Sinks that record, fail or never answer, and a [`Relay`] with them in place of the
//! configured ones.

use std::sync::{Arc, Mutex};

use relay_core::verify::{Clock, FixedClock};
use relay_core::{Config, Message, Receipt, Relay, Sink, SinkError};

use crate::{capture, config};

/// Records every message it accepts.
#[derive(Debug)]
pub struct RecordingSink {
    name: String,
    messages: Mutex<Vec<Message>>,
}

impl RecordingSink {
    /// An empty recorder called `name` in logs and receipts.
    pub fn new(name: &str) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            messages: Mutex::new(Vec::new()),
        })
    }

    /// What it has accepted so far, in order.
    pub fn messages(&self) -> Vec<Message> {
        self.messages.lock().expect("not poisoned").clone()
    }
}

#[async_trait::async_trait]
impl Sink for RecordingSink {
    fn name(&self) -> &str {
        &self.name
    }

    async fn publish(&self, message: &Message) -> Result<Receipt, SinkError> {
        let mut messages = self.messages.lock().expect("not poisoned");
        messages.push(message.clone());
        Ok(Receipt::new(Some(messages.len().to_string())))
    }
}

/// Fails every message, retryably or not, and counts the calls.
#[derive(Debug)]
pub struct FailingSink {
    name: String,
    retryable: bool,
    calls: Mutex<usize>,
}

impl FailingSink {
    /// A sink whose every publish fails.
    pub fn new(name: &str, retryable: bool) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            retryable,
            calls: Mutex::new(0),
        })
    }

    /// How many publish calls it received.
    pub fn calls(&self) -> usize {
        *self.calls.lock().expect("not poisoned")
    }
}

#[async_trait::async_trait]
impl Sink for FailingSink {
    fn name(&self) -> &str {
        &self.name
    }

    async fn publish(&self, _: &Message) -> Result<Receipt, SinkError> {
        *self.calls.lock().expect("not poisoned") += 1;
        let cause = "simulated failure".into();
        Err(match self.retryable {
            true => SinkError::Retryable(cause),
            false => SinkError::Permanent(cause),
        })
    }
}

/// Records what it accepts, and fails retryably while told to; counts every call.
#[derive(Debug)]
pub struct SwitchSink {
    recorder: Arc<RecordingSink>,
    failing: std::sync::atomic::AtomicBool,
    calls: std::sync::atomic::AtomicUsize,
}

impl SwitchSink {
    /// A sink called `name`, accepting until [`fail`](Self::fail) is called.
    pub fn new(name: &str) -> Arc<Self> {
        Arc::new(Self {
            recorder: RecordingSink::new(name),
            failing: false.into(),
            calls: 0.into(),
        })
    }

    /// From now on, fails every publish (`true`) or accepts it (`false`).
    pub fn fail(&self, failing: bool) {
        self.failing
            .store(failing, std::sync::atomic::Ordering::SeqCst);
    }

    /// What it has accepted so far, in order.
    pub fn messages(&self) -> Vec<Message> {
        self.recorder.messages()
    }

    /// How many publish calls it received, failed ones included.
    pub fn calls(&self) -> usize {
        self.calls.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Sink for SwitchSink {
    fn name(&self) -> &str {
        self.recorder.name()
    }

    async fn publish(&self, message: &Message) -> Result<Receipt, SinkError> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(SinkError::Retryable("switched off".into()));
        }
        self.recorder.publish(message).await
    }
}

/// Never answers.
#[derive(Debug)]
pub struct StuckSink;

#[async_trait::async_trait]
impl Sink for StuckSink {
    fn name(&self) -> &str {
        "stuck"
    }

    async fn publish(&self, _: &Message) -> Result<Receipt, SinkError> {
        std::future::pending().await
    }
}

/// A relay with the configuration's routes and shaping, whose sinks are `sinks`, by configured
/// name; a configured sink without one here gets a recorder nobody reads.
pub fn relay(config: Config, sinks: &[(&str, Arc<dyn Sink>)], clock: Arc<dyn Clock>) -> Relay {
    Relay::with_sinks(
        config,
        |c| match sinks.iter().find(|(name, _)| *name == c.name) {
            Some((_, sink)) => Arc::clone(sink),
            None => RecordingSink::new(&c.name),
        },
        clock,
    )
}

/// A relay with the capture secret, the clock at the captures' `Date`, `pairs` on top, and one
/// recording sink in place of the configured `file` sink.
pub fn capture_relay(pairs: &[(&str, &str)]) -> (Relay, Arc<RecordingSink>) {
    let mut all = vec![
        ("RELAY_HMAC_SECRET", capture::SECRET),
        ("RELAY_FILE_SINK", "-"),
    ];
    all.extend_from_slice(pairs);
    let sink = RecordingSink::new("memory");
    let relay = relay(
        config(&all),
        &[("file", Arc::clone(&sink) as Arc<dyn Sink>)],
        capture_clock(),
    );
    (relay, sink)
}

/// A clock at the captures' `Date`.
pub fn capture_clock() -> Arc<dyn Clock> {
    Arc::new(FixedClock(capture::time()))
}
