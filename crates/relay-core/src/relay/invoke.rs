//! One invocation, on a platform that runs one request at a time and may freeze the process
//! once it has answered (Lambda): [`Relay::invoke`], the adapter's one call. Nothing runs in
//! the background there, so what relay-gcf leaves to tasks and threads is done in the
//! invocation: the stored routes read when stale, before the request; the metric lines
//! written, in one write, after it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::Body;

use super::Relay;
use crate::config::MetricsFormat;
use crate::metrics::{Held, Metrics};
use crate::outcome::Outcome;

/// How long an invocation waits, at most, for stale stored routes to be read.
const ROUTES_READ_TIMEOUT: Duration = Duration::from_millis(500);

impl Relay {
    /// This relay, holding its metric lines for the end of each invocation instead of handing
    /// them to a writer thread: for [`invoke`](Self::invoke).
    pub(crate) fn per_invocation(self) -> Self {
        self.holding_metrics(Arc::new(Held::stdout()))
    }

    /// This relay, holding its metric lines in `held` (when its metrics are on); tests read them.
    pub fn holding_metrics(mut self, held: Arc<Held>) -> Self {
        if self.config.metrics == MetricsFormat::Emf {
            self.metrics = Metrics::emf(Arc::clone(&held) as _, &self.config.metrics_name);
            self.held = Some(held);
        }
        self
    }

    /// Answers one invocation's request by `deadline`: the stored routes read first when they
    /// are stale, then [`handle`](Self::handle), then the invocation's metric lines written
    /// (when held), before the answer leaves.
    pub async fn invoke<B>(&self, request: http::Request<B>, deadline: Option<Instant>) -> Outcome
    where
        B: Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.refresh_if_due(ROUTES_READ_TIMEOUT).await;
        let outcome = self.handle(request, deadline).await;
        self.write_held_metrics();
        outcome
    }

    /// Writes the metric lines held since the last invocation (those of the start).
    pub(crate) fn write_held_metrics(&self) {
        if let Some(held) = &self.held {
            held.write_out();
        }
    }
}
