//! Adaptive batching: messages that arrive close together leave in one API call.
//!
//! Each request hands its message to a dispatcher task and waits for that message's own result.
//! The dispatcher sends a batch when it is full (the API's entry or byte limit), or at once when
//! the message opening it came after a quiet spell of its wait (`RELAY_BATCH_WAIT_MS`, 1 ms
//! unless set) and no call is in flight: a lone message never waits. Otherwise a partial batch
//! waits for more messages, for at most that long, so that as the load rises calls fill up and
//! the calls per message fall towards `1 / max_entries`, while a quiet relay sends each message
//! the moment it arrives. Up to `max_in_flight` calls run at once, enough to keep a slow
//! endpoint busy.
//!
//! The queue is bounded: when it is full, a request is refused at once (503) rather than held.
//! A queued message whose request has given up (its deadline passed, or the client went away)
//! is dropped before its batch leaves, so it is never sent after its sender was told to retry.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::{Message, Receipt, Sink, SinkError};

/// One destination's publish API: a single message, or a batch answered per message in order.
#[async_trait::async_trait]
pub(crate) trait SendBatch: Send + Sync + 'static {
    /// Sends a lone message; by default, as a batch of one.
    async fn send_one(&self, message: &Message) -> Result<Receipt, SinkError> {
        self.send_many(std::slice::from_ref(message))
            .await
            .remove(0)
    }

    async fn send_many(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>>;

    /// The size a message counts for against the batch byte limit.
    fn size(&self, message: &Message) -> usize {
        message.encoded_size()
    }

    /// Opens the connection ([`Sink::warm`]); nothing to open by default.
    async fn warm(&self) -> Result<(), SinkError> {
        Ok(())
    }
}

/// A sink whose messages in flight together share API calls (SQS, SNS).
pub(crate) struct BatchedSink {
    name: String,
    batcher: Batcher,
    /// The same sender the batcher calls, for [`Sink::warm`].
    sender: Arc<dyn SendBatch>,
}

impl std::fmt::Debug for BatchedSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchedSink")
            .field("name", &self.name)
            .field("batcher", &self.batcher)
            .finish_non_exhaustive()
    }
}

impl BatchedSink {
    pub(crate) fn new(name: String, sender: Arc<dyn SendBatch>, limits: Limits) -> Self {
        Self {
            name,
            batcher: Batcher::spawn(Arc::clone(&sender), limits),
            sender,
        }
    }
}

#[async_trait::async_trait]
impl Sink for BatchedSink {
    fn name(&self) -> &str {
        &self.name
    }

    async fn publish(&self, message: &Message) -> Result<Receipt, SinkError> {
        self.batcher.publish(message).await
    }

    async fn warm(&self) -> Result<(), SinkError> {
        self.sender.warm().await
    }
}

/// How long a partial batch may wait for more messages, unless `RELAY_BATCH_WAIT_MS` says
/// otherwise (the runtime's timers round it up to the next millisecond tick, so a wait is at
/// most 2 ms). A message that arrives after this long without one, when no call is in flight,
/// leaves at once.
#[cfg(test)]
pub(crate) const LINGER: Duration = Duration::from_millis(1);

/// The limits of one call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_entries: usize,
    pub(crate) max_bytes: usize,
    pub(crate) max_in_flight: usize,
    /// Messages waiting for a call, at most; beyond it a request is refused at once.
    pub(crate) max_queued: usize,
    /// How long a partial batch may wait for more messages (`RELAY_BATCH_WAIT_MS`); zero:
    /// never (what is queued together still leaves together).
    pub(crate) linger: Duration,
}

impl Limits {
    /// An AWS batch call's (`SendMessageBatch`, `PublishBatch`): at most ten entries and
    /// `max_bytes`, 64 calls in flight and 4,096 messages queued; a partial batch waits at most
    /// `linger`.
    #[cfg(any(feature = "sqs", feature = "sns"))]
    pub(crate) const fn aws(max_bytes: usize, linger: Duration) -> Self {
        Self {
            max_entries: 10,
            max_bytes,
            max_in_flight: 64,
            max_queued: 4096,
            linger,
        }
    }
}

type Reply = oneshot::Sender<Result<Receipt, SinkError>>;

/// The handle requests publish through.
#[derive(Debug)]
pub(crate) struct Batcher {
    tx: mpsc::Sender<(Message, Reply)>,
}

impl Batcher {
    /// Starts the dispatcher on the current Tokio runtime.
    pub(crate) fn spawn(sender: Arc<dyn SendBatch>, limits: Limits) -> Self {
        let (tx, rx) = mpsc::channel(limits.max_queued.max(1));
        tokio::spawn(dispatch(sender, limits, rx));
        Self { tx }
    }

    /// Queues `message` for the next call and waits for its own result; refused at once when
    /// the queue is full.
    pub(crate) async fn publish(&self, message: &Message) -> Result<Receipt, SinkError> {
        let (reply, result) = oneshot::channel();
        if self.tx.try_send((message.clone(), reply)).is_err() {
            return Err(SinkError::Retryable("the sink's queue is full".into()));
        }
        result
            .await
            .unwrap_or_else(|_| Err(SinkError::Retryable("the sink's dispatcher stopped".into())))
    }
}

/// The batch being filled.
struct Pending {
    items: Vec<(Message, Reply)>,
    bytes: usize,
    /// When its first message arrived.
    since: Instant,
    /// Whether its first message came after a quiet spell (no message for the linger).
    after_quiet: bool,
    /// When the last message arrived, whichever batch it went to.
    last_arrival: Option<Instant>,
    /// A message that did not fit under the byte limit: it opens the next batch.
    overflow: Option<(Message, Reply)>,
}

impl Pending {
    fn new(last_arrival: Option<Instant>) -> Self {
        Self {
            items: Vec::new(),
            bytes: 0,
            since: Instant::now(),
            after_quiet: false,
            last_arrival,
            overflow: None,
        }
    }

    /// Adds a message, unless its request already gave up (its sender was told to retry).
    fn add(&mut self, item: (Message, Reply), sender: &dyn SendBatch, limits: &Limits) {
        if item.1.is_closed() {
            return;
        }
        let now = Instant::now();
        let quiet = self
            .last_arrival
            .is_none_or(|last| now >= last + limits.linger);
        self.last_arrival = Some(now);
        let size = sender.size(&item.0);
        if !self.items.is_empty() && self.bytes + size > limits.max_bytes {
            self.overflow = Some(item);
            return;
        }
        if self.items.is_empty() {
            (self.since, self.after_quiet) = (now, quiet);
        }
        self.bytes += size;
        self.items.push(item);
    }

    fn is_full(&self, limits: &Limits) -> bool {
        self.overflow.is_some() || self.items.len() >= limits.max_entries
    }

    /// The batch to send, leaving the overflow (if any) as the next one. Messages whose
    /// request gave up while they waited are left out.
    fn take(&mut self, sender: &dyn SendBatch, limits: &Limits) -> Vec<(Message, Reply)> {
        let mut next = Self::new(self.last_arrival);
        if let Some(item) = self.overflow.take() {
            // It arrived while this batch filled: not after a quiet spell.
            next.add(item, sender, limits);
            next.after_quiet = false;
        }
        let mut batch = std::mem::replace(self, next).items;
        batch.retain(|(_, reply)| !reply.is_closed());
        batch
    }
}

async fn dispatch(
    sender: Arc<dyn SendBatch>,
    limits: Limits,
    mut rx: mpsc::Receiver<(Message, Reply)>,
) {
    let max_in_flight = limits.max_in_flight.max(1);
    let mut calls = JoinSet::new();
    let mut pending = Pending::new(None);
    let mut open = true;
    loop {
        // Take what is already queued, up to a full batch.
        while open && !pending.is_full(&limits) {
            match rx.try_recv() {
                Ok(item) => pending.add(item, sender.as_ref(), &limits),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
        let due = pending.since + limits.linger;
        let ready = !pending.items.is_empty()
            && (pending.is_full(&limits)
                || (pending.after_quiet && calls.is_empty())
                || due <= Instant::now()
                || !open);
        if ready && calls.len() < max_in_flight {
            let batch = pending.take(sender.as_ref(), &limits);
            if !batch.is_empty() {
                calls.spawn(send(Arc::clone(&sender), batch));
            }
            continue;
        }
        if !open && pending.items.is_empty() && pending.overflow.is_none() {
            // Every handle is gone: finish the calls in flight, whose requests still wait.
            while calls.join_next().await.is_some() {}
            return;
        }
        let lingering = !ready && !pending.items.is_empty();
        tokio::select! {
            item = rx.recv(), if open && !pending.is_full(&limits) => match item {
                Some(item) => pending.add(item, sender.as_ref(), &limits),
                None => open = false,
            },
            Some(_) = calls.join_next(), if !calls.is_empty() => {}
            () = tokio::time::sleep_until(due), if lingering => {}
        }
    }
}

/// One call: sends `batch` and answers each message's request with its own result.
async fn send(sender: Arc<dyn SendBatch>, batch: Vec<(Message, Reply)>) {
    let (messages, replies): (Vec<Message>, Vec<Reply>) = batch.into_iter().unzip();
    let mut results = match messages.as_slice() {
        [one] => vec![sender.send_one(one).await],
        many => sender.send_many(many).await,
    }
    .into_iter();
    let batch_size = replies.len();
    for reply in replies {
        let result = results.next().unwrap_or_else(|| {
            Err(SinkError::Permanent(
                "the destination answered for fewer messages".into(),
            ))
        });
        let _ = reply.send(result.map(|receipt| Receipt {
            batch_size: Some(batch_size),
            ..receipt
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::Attributes;
    use bytes::Bytes;
    use std::sync::Mutex;
    use std::time::SystemTime;
    use tokio::sync::Semaphore;

    /// Records batch sizes; fails the messages whose payload is `fail`. Each call takes
    /// `delay` (20 ms by default).
    struct Recorder {
        batches: Mutex<Vec<usize>>,
        delay: Duration,
    }

    impl Default for Recorder {
        fn default() -> Self {
            Self {
                batches: Mutex::default(),
                delay: Duration::from_millis(20),
            }
        }
    }

    #[async_trait::async_trait]
    impl SendBatch for Recorder {
        async fn send_many(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
            self.batches.lock().unwrap().push(batch.len());
            // A zero delay is no timer at all: the runtime's timers round up to the next
            // millisecond, so even a zero sleep can take one.
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            batch
                .iter()
                .map(|m| {
                    if m.payload == "fail" {
                        Err(SinkError::Permanent("rejected".into()))
                    } else {
                        Ok(Receipt::new(Some(
                            String::from_utf8_lossy(&m.payload).into(),
                        )))
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
            trace: None,
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
                    let result = batcher.publish(&message(&payload)).await;
                    (payload, result)
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
            max_queued: 1000,
            linger: LINGER,
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
        // Each receipt tells the size of the call that carried it.
        let sizes: Vec<usize> = results
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .map(|receipt| receipt.batch_size.expect("a batched receipt"))
            .collect();
        assert!(sizes.iter().all(|size| batches.contains(size)), "{sizes:?}");
        assert!(sizes.contains(&10), "{sizes:?}");
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
            max_queued: 1000,
            linger: LINGER,
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

    /// Holds every call until the gate opens; records the payloads it was given.
    struct Gated {
        gate: Semaphore,
        seen: Mutex<Vec<String>>,
    }

    #[async_trait::async_trait]
    impl SendBatch for Gated {
        async fn send_many(&self, batch: &[Message]) -> Vec<Result<Receipt, SinkError>> {
            let payloads = batch
                .iter()
                .map(|m| String::from_utf8_lossy(&m.payload).into_owned());
            self.seen.lock().unwrap().extend(payloads);
            drop(self.gate.acquire().await.unwrap());
            batch.iter().map(|_| Ok(Receipt::new(None))).collect()
        }
    }

    fn gated(max_queued: usize, max_in_flight: usize) -> (Arc<Gated>, Arc<Batcher>) {
        let gated = Arc::new(Gated {
            gate: Semaphore::new(0),
            seen: Mutex::default(),
        });
        let limits = Limits {
            max_entries: 10,
            max_bytes: 1000,
            max_in_flight,
            max_queued,
            linger: LINGER,
        };
        let batcher = Batcher::spawn(Arc::clone(&gated) as Arc<dyn SendBatch>, limits);
        (gated, Arc::new(batcher))
    }

    fn publish_in_background(
        batcher: &Arc<Batcher>,
        payload: &str,
    ) -> tokio::task::JoinHandle<Result<Receipt, SinkError>> {
        let (batcher, message) = (Arc::clone(batcher), message(payload));
        tokio::spawn(async move { batcher.publish(&message).await })
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once() {
        let (gated, batcher) = gated(2, 1);
        let first = publish_in_background(&batcher, "in flight");
        tokio::time::sleep(Duration::from_millis(20)).await;
        let waiting: Vec<_> = (0..6)
            .map(|i| publish_in_background(&batcher, &format!("m{i}")))
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (refused, held): (Vec<_>, Vec<_>) = waiting.into_iter().partition(|t| t.is_finished());
        assert!(
            !refused.is_empty() && !held.is_empty(),
            "{} refused",
            refused.len()
        );
        for task in refused {
            let error = task.await.unwrap().unwrap_err();
            assert!(
                error.is_retryable() && error.to_string().contains("queue is full"),
                "{error}"
            );
        }
        gated.gate.add_permits(100);
        assert!(first.await.unwrap().is_ok());
        for task in held {
            assert!(task.await.unwrap().is_ok());
        }
    }

    #[tokio::test]
    async fn a_message_whose_request_gave_up_is_never_sent() {
        let (gated, batcher) = gated(100, 1);
        let first = publish_in_background(&batcher, "a");
        tokio::time::sleep(Duration::from_millis(20)).await;
        let gave_up =
            tokio::time::timeout(Duration::from_millis(50), batcher.publish(&message("b"))).await;
        assert!(gave_up.is_err(), "b waits behind a");
        let after = publish_in_background(&batcher, "c");
        gated.gate.add_permits(100);
        assert!(first.await.unwrap().is_ok() && after.await.unwrap().is_ok());
        assert_eq!(*gated.seen.lock().unwrap(), ["a", "c"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_message_leaves_at_once() {
        let limits = Limits {
            max_entries: 10,
            max_bytes: 1000,
            max_in_flight: 4,
            max_queued: 1000,
            linger: LINGER,
        };
        let started = Instant::now();
        let (results, recorder) = publish_concurrently(limits, vec!["alone".to_owned()]).await;
        assert!(results[0].1.is_ok());
        assert_eq!(*recorder.batches.lock().unwrap(), [1]);
        // The recorder takes 20 ms per call; no linger was added in front of it.
        assert_eq!(started.elapsed(), Duration::from_millis(20));
    }

    #[tokio::test(start_paused = true)]
    async fn while_a_call_is_in_flight_a_partial_batch_waits_at_most_the_linger() {
        let (gated, batcher) = gated(100, 4);
        let first = publish_in_background(&batcher, "a");
        tokio::time::sleep(Duration::from_micros(10)).await;
        assert_eq!(
            *gated.seen.lock().unwrap(),
            ["a"],
            "a lone message leaves at once"
        );
        let (b, c) = (
            publish_in_background(&batcher, "b"),
            publish_in_background(&batcher, "c"),
        );
        tokio::time::sleep(LINGER / 2).await;
        assert_eq!(gated.seen.lock().unwrap().len(), 1, "b and c wait for more");
        tokio::time::sleep(LINGER).await;
        // The linger is over while a is still held: b and c left together without it.
        assert_eq!(*gated.seen.lock().unwrap(), ["a", "b", "c"]);
        gated.gate.add_permits(100);
        for (task, size) in [(first, 1), (b, 2), (c, 2)] {
            assert_eq!(task.await.unwrap().unwrap().batch_size, Some(size));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn under_load_nearly_every_call_is_full() {
        let limits = Limits {
            max_entries: 10,
            max_bytes: 1 << 20,
            max_in_flight: 64,
            max_queued: 4096,
            linger: LINGER,
        };
        let payloads = (0..1000).map(|i| format!("m{i}")).collect();
        let (results, recorder) = publish_concurrently(limits, payloads).await;
        assert!(results.iter().all(|(_, r)| r.is_ok()));
        let batches = recorder.batches.lock().unwrap();
        assert_eq!(batches.iter().sum::<usize>(), 1000);
        // The first message leaves alone (nothing was in flight); every later call is full
        // but the last, which the linger sends. One call per message would be 1000 calls.
        let full = batches.iter().filter(|&&n| n == 10).count();
        assert!(batches.len() <= 102 && full >= 98, "{batches:?}");
    }

    /// A batcher over calls that take no time (no call is ever in flight when a message
    /// comes), whose partial batches wait at most `linger`, and what it sent.
    fn instant_calls(linger: Duration) -> (Arc<Recorder>, Batcher) {
        let recorder = Arc::new(Recorder {
            batches: Mutex::default(),
            delay: Duration::ZERO,
        });
        let limits = Limits {
            max_entries: 10,
            max_bytes: 1 << 20,
            max_in_flight: 64,
            max_queued: 4096,
            linger,
        };
        let batcher = Batcher::spawn(Arc::clone(&recorder) as Arc<dyn SendBatch>, limits);
        (recorder, batcher)
    }

    #[tokio::test(start_paused = true)]
    async fn at_a_steady_rate_messages_share_calls_and_wait_at_most_the_linger() {
        let (recorder, batcher) = instant_calls(LINGER);
        let batcher = Arc::new(batcher);
        // One message every 300 µs, faster than the linger. The clock is moved by hand, in
        // these steps: the runtime's timers have a resolution of 1 ms.
        let step = Duration::from_micros(300);
        let mut tasks = Vec::new();
        for i in 0..20 {
            let batcher = Arc::clone(&batcher);
            tasks.push(tokio::spawn(async move {
                let sent = Instant::now();
                let result = batcher.publish(&message(&format!("m{i}"))).await;
                (result, sent.elapsed())
            }));
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
            tokio::time::advance(step).await;
        }
        for task in tasks {
            let (result, waited) = task.await.unwrap();
            assert!(result.is_ok());
            // The linger, plus the timer's resolution and one step of the clock.
            let most = LINGER + Duration::from_millis(1) + step;
            assert!(waited <= most, "{waited:?}");
        }
        let batches = recorder.batches.lock().unwrap();
        assert_eq!(batches.iter().sum::<usize>(), 20);
        // The first message came after a quiet spell and left alone; the others shared calls.
        // Sending each as soon as no call was in flight would have been 20 calls.
        assert_eq!(batches[0], 1, "{batches:?}");
        assert!(batches.len() <= 8, "{batches:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn with_no_wait_each_message_leaves_the_moment_it_comes() {
        // One request at a time, as on Lambda: the next message comes 300 µs after the last,
        // sooner than the default linger, and nothing could join it by waiting.
        let (recorder, batcher) = instant_calls(Duration::ZERO);
        for i in 0..20 {
            let sent = Instant::now();
            let result = batcher.publish(&message(&format!("m{i}"))).await;
            assert!(result.is_ok());
            assert_eq!(sent.elapsed(), Duration::ZERO, "message {i} waited");
            tokio::time::advance(Duration::from_micros(300)).await;
        }
        assert_eq!(*recorder.batches.lock().unwrap(), [1; 20]);
    }
}
