//! The relay's side of live routes: reading the store, and swapping its table.

use std::sync::Arc;

use super::Relay;
use crate::cloud::Cloud;
use crate::live::refresh::{LiveRoutes, Refreshed, SinkFactory};
use crate::sink::{Clients, SinkConfig};

impl Relay {
    /// The same relay, adding the routes stored in `store` to the deployed ones; new sinks are
    /// built by `factory`. Call [`refresh`](Self::refresh) to read the store.
    pub(crate) fn with_live_routes(
        mut self,
        store: Box<dyn crate::live::Store>,
        factory: SinkFactory,
    ) -> Self {
        let table = self.table.load();
        let built = self
            .config
            .sinks
            .iter()
            .cloned()
            .zip(table.destinations.iter().map(|d| Arc::clone(&d.sink)))
            .collect();
        self.live = Some(LiveRoutes::new(
            store,
            factory,
            self.config.routes(),
            self.config.routes_refresh,
            built,
        ));
        self
    }

    /// Reads the stored routes and swaps in their table when they changed and are good; the
    /// last good routes stay in effect otherwise. Without a store, does nothing.
    pub async fn refresh(&self) -> Option<Refreshed> {
        Some(self.live.as_ref()?.refresh(&self.table).await)
    }

    /// [`refresh`](Self::refresh), when the refresh interval has passed since the last read,
    /// waiting at most `timeout` (Lambda, at the start of an invocation: background work
    /// freezes between invocations).
    pub(crate) async fn refresh_if_due(&self, timeout: std::time::Duration) {
        if self.live.as_ref().is_some_and(LiveRoutes::is_due)
            && tokio::time::timeout(timeout, self.refresh()).await.is_err()
        {
            tracing::warn!("Reading the stored routes took too long; the routes in effect stay.");
        }
    }

    /// Refreshes the stored routes every interval, forever (relay-gcf runs it in a task).
    pub async fn keep_routes_fresh(self: Arc<Self>) {
        let Some(every) = self.live.as_ref().map(LiveRoutes::every) else {
            return;
        };
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            self.refresh().await;
        }
    }
}

/// Builds every sink's client, each once: the deployed sinks' at start, and those of sinks that
/// stored routes add, from the clouds' configuration `cloud`; a partial batch waits at most
/// `batch_wait`.
#[cfg_attr(not(feature = "aws"), allow(unused_variables))]
pub(super) fn sink_factory(cloud: Cloud, batch_wait: std::time::Duration) -> SinkFactory {
    Arc::new(move |config: SinkConfig| {
        let cloud = cloud.clone();
        Box::pin(async move {
            #[cfg(feature = "aws")]
            if config.target.uses_aws() {
                let clients = Clients::with_aws(cloud.aws().await, batch_wait);
                return config.target.build(clients).await;
            }
            config.target.build(Clients::default()).await
        })
    })
}
