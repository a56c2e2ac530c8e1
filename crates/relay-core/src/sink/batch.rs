//! Opportunistic batching: messages that are in flight together leave in one API call.
//!
//! Each request hands its message to a dispatcher task and waits for that message's own result.
//! The dispatcher takes whatever is queued, up to the entry and byte limits of the API, and
//! sends it; while `max_in_flight` calls are outstanding, new messages queue up and form the
//! next, larger batch. A lone message leaves at once: batching never adds a delay.

use std::sync::Arc;

use tokio::sync::{Semaphore, mpsc, oneshot};

use super::{Message, Receipt, Sink, SinkError};

/// One destination's publish API: a single message, or a batch answered per message in order.
#[async_trait::async_trait]
pub(crate) trait SendBatch: Send + Sync + 'static {
    async fn send_one(&self, message: &Message) -> Result<Receipt, SinkError>;

    async fn send_many(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>>;

    /// The size a message counts for against the batch byte limit.
    fn size(&self, message: &Message) -> usize {
        message.encoded_size()
    }
}

/// A sink whose messages in flight together share API calls (SQS, SNS).
#[derive(Debug)]
pub(crate) struct BatchedSink {
    name: String,
    batcher: Batcher,
}

impl BatchedSink {
    pub(crate) fn new(name: String, sender: Arc<dyn SendBatch>, limits: Limits) -> Self {
        Self {
            name,
            batcher: Batcher::spawn(sender, limits),
        }
    }
}

#[async_trait::async_trait]
impl Sink for BatchedSink {
    fn name(&self) -> &str {
        &self.name
    }

    async fn publish(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
        self.batcher.publish(batch).await
    }
}

/// The limits of one call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_entries: usize,
    pub(crate) max_bytes: usize,
    pub(crate) max_in_flight: usize,
}

type Reply = oneshot::Sender<Result<Receipt, SinkError>>;

/// The handle requests publish through.
#[derive(Debug)]
pub(crate) struct Batcher {
    tx: mpsc::UnboundedSender<(Message, Reply)>,
}

impl Batcher {
    /// Starts the dispatcher on the current Tokio runtime.
    pub(crate) fn spawn(sender: Arc<dyn SendBatch>, limits: Limits) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(dispatch(sender, limits, rx));
        Self { tx }
    }

    pub(crate) async fn publish(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
        let waiting: Vec<_> = batch
            .iter()
            .map(|message| {
                let (reply, result) = oneshot::channel();
                let _ = self.tx.send((message.clone(), reply));
                result
            })
            .collect();
        let mut results = Vec::with_capacity(waiting.len());
        for result in waiting {
            results.push(result.await.unwrap_or_else(|_| {
                Err(SinkError::Retryable("the sink's dispatcher stopped".into()))
            }));
        }
        results
    }
}

async fn dispatch(
    sender: Arc<dyn SendBatch>,
    limits: Limits,
    mut rx: mpsc::UnboundedReceiver<(Message, Reply)>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_in_flight.max(1)));
    let mut carried: Option<(Message, Reply)> = None;
    loop {
        let first = match carried.take() {
            Some(item) => item,
            None => match rx.recv().await {
                Some(item) => item,
                None => return,
            },
        };
        // Waiting for a free slot is what lets the next batch grow.
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let mut bytes = sender.size(&first.0);
        let mut batch = vec![first];
        while batch.len() < limits.max_entries {
            let Ok(item) = rx.try_recv() else { break };
            let size = sender.size(&item.0);
            if bytes + size > limits.max_bytes {
                carried = Some(item);
                break;
            }
            bytes += size;
            batch.push(item);
        }
        let sender = Arc::clone(&sender);
        tokio::spawn(async move {
            let (messages, replies): (Vec<Message>, Vec<Reply>) = batch.into_iter().unzip();
            let mut results = match messages.as_slice() {
                [one] => vec![sender.send_one(one).await],
                many => sender.send_many(many).await,
            }
            .into_iter();
            for reply in replies {
                let result = results.next().unwrap_or_else(|| {
                    Err(SinkError::Permanent(
                        "the destination answered for fewer messages".into(),
                    ))
                });
                let _ = reply.send(result);
            }
            drop(slot);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notification::Attributes;
    use bytes::Bytes;
    use std::sync::Mutex;
    use std::time::{Duration, SystemTime};

    /// Records batch sizes; fails the messages whose payload is `fail`.
    #[derive(Default)]
    struct Recorder {
        batches: Mutex<Vec<usize>>,
    }

    #[async_trait::async_trait]
    impl SendBatch for Recorder {
        async fn send_one(&self, message: &Message) -> Result<Receipt, SinkError> {
            self.send_many(std::slice::from_ref(message))
                .await
                .remove(0)
        }

        async fn send_many(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
            self.batches.lock().unwrap().push(batch.len());
            tokio::time::sleep(Duration::from_millis(20)).await;
            batch
                .iter()
                .map(|m| {
                    if m.payload == "fail" {
                        Err(SinkError::Permanent("rejected".into()))
                    } else {
                        Ok(Receipt {
                            message_id: Some(String::from_utf8_lossy(&m.payload).into()),
                        })
                    }
                })
                .collect()
        }

        fn size(&self, message: &Message) -> usize {
            message.payload.len()
        }
    }

    fn message(payload: &str) -> Message {
        Message {
            payload: Bytes::from(payload.to_owned()),
            attributes: Attributes::default(),
            dedup_key: String::new(),
            group_id: None,
            dedup_id: None,
            ordering_key: None,
            received_at: SystemTime::now(),
        }
    }

    /// Starts a batcher over a recorder and publishes `payloads` concurrently, one request
    /// each; returns each payload's result and the recorder.
    async fn publish_concurrently(
        limits: Limits,
        payloads: Vec<String>,
    ) -> (Vec<(String, Result<Receipt, SinkError>)>, Arc<Recorder>) {
        let recorder = Arc::new(Recorder::default());
        let batcher = Arc::new(Batcher::spawn(
            Arc::clone(&recorder) as Arc<dyn SendBatch>,
            limits,
        ));
        let tasks: Vec<_> = payloads
            .into_iter()
            .map(|payload| {
                let batcher = Arc::clone(&batcher);
                tokio::spawn(async move {
                    let mut results = batcher.publish(&[message(&payload)]).await;
                    (payload, results.remove(0))
                })
            })
            .collect();
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await.unwrap());
        }
        (results, recorder)
    }

    #[tokio::test]
    async fn concurrent_messages_share_calls_and_keep_their_own_results() {
        let limits = Limits {
            max_entries: 10,
            max_bytes: 1000,
            max_in_flight: 2,
        };
        let payloads = (0..100).map(|i| {
            if i % 7 == 0 {
                "fail".to_owned()
            } else {
                format!("m{i}")
            }
        });
        let (results, recorder) = publish_concurrently(limits, payloads.collect()).await;
        for (payload, result) in &results {
            match result {
                Ok(receipt) => assert_eq!(receipt.message_id.as_deref(), Some(payload.as_str())),
                Err(e) => assert!(payload == "fail" && !e.is_retryable()),
            }
        }
        let batches = recorder.batches.lock().unwrap();
        assert_eq!(batches.iter().sum::<usize>(), 100);
        assert!(batches.iter().all(|&n| n <= 10));
        // With two calls in flight, everything else queues and leaves in full batches: two
        // single messages first, then batches of ten. One message per call would be 100 calls.
        assert!(
            batches.len() <= 14 && batches.iter().filter(|&&n| n == 10).count() >= 8,
            "{} calls for 100 messages: {batches:?}",
            batches.len()
        );
    }

    #[tokio::test]
    async fn the_byte_limit_splits_batches() {
        let limits = Limits {
            max_entries: 10,
            max_bytes: 10,
            max_in_flight: 1,
        };
        let (results, recorder) = publish_concurrently(limits, vec!["abcd".to_owned(); 6]).await;
        assert!(results.iter().all(|(_, r)| r.is_ok()));
        // 4-byte messages under a 10-byte limit: the first alone (nothing was queued yet), then
        // pairs. One message per call would be six calls of one.
        let batches = recorder.batches.lock().unwrap();
        assert_eq!(batches.iter().sum::<usize>(), 6);
        assert!(batches.iter().all(|&n| n <= 2), "{batches:?}");
        assert!(
            batches.iter().filter(|&&n| n == 2).count() >= 2,
            "{batches:?}"
        );
    }
}
