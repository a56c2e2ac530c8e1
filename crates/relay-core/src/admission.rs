//! Letting a request in: a cap on requests in flight, then the body read within its limits. A
//! body's bytes count against a budget as they arrive, and a body must keep arriving at a
//! minimum rate, so a slow sender holds its place only as long as its bytes justify:
//!
//! - every byte buffered counts against `RELAY_MAX_BUFFERED_BYTES`; bodies still arriving may
//!   hold at most half of it, so bodies that are complete always find room, however many
//!   incomplete ones are waiting;
//! - the next bytes of a body are due within `GRACE` plus what has arrived at
//!   `RELAY_BODY_MIN_BYTES_PER_SEC`, and the whole body within the grace plus its declared size
//!   at that rate, and never later than `RELAY_BODY_TIMEOUT_MS` (408);
//! - beyond a budget, the answer is 503 `overloaded` at once, never a wait.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header;
use http::request::Parts;
use http_body::Body;
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::error::Error;

/// How long after its head a body's first bytes may take, on top of the minimum rate.
pub(crate) const GRACE: Duration = Duration::from_secs(1);

/// What relay-gcf allows a client: how long it may take, and how much may be in flight
/// (`[relay]` settings, read into [`Config::server`](crate::config::Config::server)). Bodies are
/// read within these limits here; relay-gcf's server applies the header timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Headers must arrive within this; also the longest idle wait of a kept-alive connection.
    pub header_timeout: Duration,
    /// A body must arrive within this after its headers.
    pub body_timeout: Duration,
    /// A body must arrive at this rate or faster, after a grace of a second.
    pub body_min_bytes_per_sec: usize,
    /// Requests in flight at once.
    pub max_concurrent_requests: usize,
    /// Bytes of large bodies buffered at once.
    pub max_buffered_bytes: usize,
}

/// The limits, shared by every connection.
#[derive(Debug, Clone)]
pub(crate) struct Admission {
    requests: Arc<Semaphore>,
    /// Every body byte buffered.
    bytes: Arc<Semaphore>,
    /// The bytes of bodies still arriving: half of [`bytes`](Self::bytes).
    arriving: Arc<Semaphore>,
    /// How long a body may take after its head, and how fast it must come (408 beyond).
    limits: ServerLimits,
    /// The largest body accepted (413 beyond).
    max_body_bytes: usize,
}

/// What an admitted request holds until its answer is sent: its place, and its body's bytes.
#[derive(Debug)]
pub(crate) struct Ticket {
    _request: OwnedSemaphorePermit,
    bytes: Option<OwnedSemaphorePermit>,
}

impl Admission {
    /// At most `limits.max_concurrent_requests` in flight and `limits.max_buffered_bytes` of
    /// bodies buffered at once; each body read within `limits` and `max_body_bytes`.
    pub(crate) fn new(limits: ServerLimits, max_body_bytes: usize) -> Self {
        Self {
            requests: Arc::new(Semaphore::new(limits.max_concurrent_requests)),
            bytes: Arc::new(Semaphore::new(limits.max_buffered_bytes)),
            arriving: Arc::new(Semaphore::new(limits.max_buffered_bytes / 2)),
            limits,
            max_body_bytes,
        }
    }

    /// Admits a request whose head has arrived; its body's bytes are counted as they are read.
    pub(crate) fn admit(&self) -> Result<Ticket, Error> {
        let request = Arc::clone(&self.requests)
            .try_acquire_owned()
            .map_err(|_| Error::Overloaded)?;
        Ok(Ticket {
            _request: request,
            bytes: None,
        })
    }

    /// Reads a whole body, counting its bytes into `ticket`: never more than the body limit
    /// whatever `Content-Length` claimed (413), at the minimum rate and within the timeout
    /// (408), within the byte budget (503); 400 for a body that breaks off.
    pub(crate) async fn read<B>(
        &self,
        parts: &Parts,
        body: B,
        ticket: &mut Ticket,
    ) -> Result<Bytes, Error>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let limits = self.limits;
        let declared = body
            .size_hint()
            .exact()
            .or_else(|| declared_length(&parts.headers));
        let started = Instant::now();
        let rate = limits.body_min_bytes_per_sec.max(1) as f64;
        let at_rate = |bytes: u64| GRACE + Duration::from_secs_f64(bytes as f64 / rate);
        let timeout = limits.body_timeout;
        let whole_by = started + timeout.min(declared.map_or(timeout, at_rate));
        let timed_out = Error::RequestTimeout {
            secs: timeout.as_secs(),
            min_bytes_per_sec: limits.body_min_bytes_per_sec,
        };
        let mut body = std::pin::pin!(body);
        // The chunks as they came: one copy at the end, of the exact size (none for one chunk).
        let mut chunks: Vec<Bytes> = Vec::new();
        let mut received = 0usize;
        let mut arriving: Option<OwnedSemaphorePermit> = None;
        loop {
            let next_by = whole_by.min(started + at_rate(received as u64));
            let frame = match tokio::time::timeout_at(next_by, body.frame()).await {
                Err(_) => return Err(timed_out),
                Ok(None) => break,
                Ok(Some(Err(_))) => return Err(Error::UnreadableBody),
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if received + data.len() > self.max_body_bytes {
                return Err(Error::BodyTooLarge {
                    limit: self.max_body_bytes,
                });
            }
            let size = u32::try_from(data.len()).map_err(|_| Error::Overloaded)?;
            let complete = declared == Some((received + data.len()) as u64);
            if !complete {
                let permit = Arc::clone(&self.arriving)
                    .try_acquire_many_owned(size)
                    .map_err(|_| Error::Overloaded)?;
                merge(&mut arriving, permit);
            }
            let permit = Arc::clone(&self.bytes)
                .try_acquire_many_owned(size)
                .map_err(|_| Error::Overloaded)?;
            merge(&mut ticket.bytes, permit);
            received += data.len();
            chunks.push(data);
        }
        // Complete: its bytes no longer count as arriving.
        drop(arriving);
        Ok(match chunks.len() {
            0 => Bytes::new(),
            1 => chunks.pop().expect("one chunk"),
            _ => {
                let mut whole = BytesMut::with_capacity(received);
                chunks
                    .iter()
                    .for_each(|chunk| whole.extend_from_slice(chunk));
                whole.freeze()
            }
        })
    }
}

fn merge(held: &mut Option<OwnedSemaphorePermit>, permit: OwnedSemaphorePermit) {
    match held {
        Some(held) => held.merge(permit),
        None => *held = Some(permit),
    }
}

/// The declared `Content-Length`, when there is one (the largest, when it is repeated).
pub(crate) fn declared_length(headers: &http::HeaderMap) -> Option<u64> {
    headers
        .get_all(header::CONTENT_LENGTH)
        .iter()
        .filter_map(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
        .max()
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body::Frame;
    use http_body_util::{Full, StreamBody};
    use tokio::sync::mpsc;

    use super::*;

    /// At most `max_requests` in flight and `max_buffered_bytes` buffered; bodies of 8,000
    /// bytes at most, within 20 s, at 1,000 bytes a second or faster.
    fn admitting(max_requests: usize, max_buffered_bytes: usize) -> Admission {
        let limits = ServerLimits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(20),
            body_min_bytes_per_sec: 1_000,
            max_concurrent_requests: max_requests,
            max_buffered_bytes,
        };
        Admission::new(limits, 8_000)
    }

    fn head(length: usize) -> Parts {
        let request = http::Request::post("/").header("content-length", length.to_string());
        request.body(()).unwrap().into_parts().0
    }

    /// A body whose chunks the test sends when it likes.
    fn streamed() -> (
        mpsc::Sender<Bytes>,
        impl Body<Data = Bytes, Error = Infallible>,
    ) {
        let (tx, rx) = mpsc::channel::<Bytes>(16);
        let frames = futures_util::stream::unfold(rx, |mut rx| async move {
            let data = rx.recv().await?;
            Some((Ok::<_, Infallible>(Frame::data(data)), rx))
        });
        (tx, StreamBody::new(frames))
    }

    async fn read_whole(admission: &Admission, body: &'static [u8]) -> Result<Bytes, Error> {
        let mut ticket = admission.admit()?;
        let parts = head(body.len());
        admission
            .read(&parts, Full::new(Bytes::from_static(body)), &mut ticket)
            .await
    }

    #[tokio::test(start_paused = true)]
    async fn complete_bodies_find_room_while_incomplete_ones_wait() {
        let admission = admitting(100, 10_000);
        // Five bodies of 4,000 declared bytes stop after 1,000: they hold the arriving half.
        let mut waiting = Vec::new();
        for _ in 0..5 {
            let (tx, body) = streamed();
            tx.send(Bytes::from(vec![b' '; 1_000])).await.unwrap();
            let admission = admission.clone();
            waiting.push((
                tx,
                tokio::spawn(async move {
                    let mut ticket = admission.admit()?;
                    admission.read(&head(4_000), body, &mut ticket).await
                }),
            ));
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        // One more incomplete body finds no room…
        let (tx, body) = streamed();
        tx.send(Bytes::from(vec![b' '; 1_000])).await.unwrap();
        let mut ticket = admission.admit().unwrap();
        let refused = admission.read(&head(4_000), body, &mut ticket).await;
        assert!(matches!(refused, Err(Error::Overloaded)), "{refused:?}");
        // …while complete ones do, again and again.
        for _ in 0..10 {
            assert_eq!(
                read_whole(&admission, &[b'x'; 4_000]).await.unwrap().len(),
                4_000
            );
        }
        drop(waiting);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_sender_holds_its_place_only_as_long_as_its_bytes_justify() {
        let admission = admitting(100, 1_000_000);
        let (tx, body) = streamed();
        tx.send(Bytes::from_static(&[b' '; 100])).await.unwrap();
        let started = Instant::now();
        let mut ticket = admission.admit().unwrap();
        let answer = admission.read(&head(4_000), body, &mut ticket).await;
        assert!(
            matches!(answer, Err(Error::RequestTimeout { .. })),
            "{answer:?}"
        );
        // 100 bytes at 1,000 bytes per second justify 0.1 s after the grace, not the 20 s
        // timeout nor the 4 s its declared size would.
        let held = started.elapsed();
        assert!(held >= GRACE + Duration::from_millis(100), "{held:?}");
        assert!(held < GRACE + Duration::from_millis(200), "{held:?}");
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn a_sender_at_the_rate_finishes() {
        let admission = admitting(100, 1_000_000);
        let (tx, body) = streamed();
        let sender = tokio::spawn(async move {
            for _ in 0..4 {
                tx.send(Bytes::from_static(&[b' '; 1_000])).await.unwrap();
                tokio::time::sleep(Duration::from_millis(900)).await;
            }
        });
        let mut ticket = admission.admit().unwrap();
        let read = admission.read(&head(4_000), body, &mut ticket).await;
        assert_eq!(read.unwrap().len(), 4_000);
        sender.await.unwrap();
    }

    #[tokio::test]
    async fn limits_are_answered_at_once() {
        let admission = admitting(1, 1_000_000);
        let held = admission.admit().unwrap();
        assert!(
            matches!(admission.admit(), Err(Error::Overloaded)),
            "one in flight"
        );
        drop(held);
        let too_large = read_whole(&admission, &[b'x'; 8_001]).await;
        assert!(
            matches!(too_large, Err(Error::BodyTooLarge { limit: 8_000 })),
            "{too_large:?}"
        );
        let small_budget = admitting(10, 3_000);
        assert!(matches!(
            read_whole(&small_budget, &[b'x'; 4_000]).await,
            Err(Error::Overloaded)
        ));
        // Bytes come back with the ticket.
        let mut ticket = small_budget.admit().unwrap();
        let parts = head(2_500);
        let body = Full::new(Bytes::from_static(&[b'x'; 2_500]));
        small_budget.read(&parts, body, &mut ticket).await.unwrap();
        assert!(
            read_whole(&small_budget, &[b'x'; 2_500]).await.is_err(),
            "held"
        );
        drop(ticket);
        assert!(
            read_whole(&small_budget, &[b'x'; 2_500]).await.is_ok(),
            "released"
        );
    }
}
