//! Letting a request in: the budget of requests in flight (how many at once, and how many bytes
//! of large bodies buffered at once), then the body read within the body limit and timeout. A
//! request beyond the budget is refused with 503 `overloaded` before its body is read, so a
//! client cannot make the relay hold more memory than the budget by opening connections or by
//! sending slowly.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header;
use http::request::Parts;
use http_body::Body;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::Error;

/// Bodies up to this size count only against the request limit; a DSS notification is a few
/// KiB, so legitimate traffic keeps flowing while large bodies wait for the byte budget.
pub const SMALL_BODY_BYTES: usize = 64 * 1024;

/// The limits, shared by every connection.
#[derive(Debug, Clone)]
pub struct Admission {
    requests: Arc<Semaphore>,
    large_bytes: Arc<Semaphore>,
    max_body_bytes: usize,
}

/// What an admitted request holds until its answer is sent.
#[derive(Debug)]
pub struct Ticket {
    _request: OwnedSemaphorePermit,
    _bytes: Option<OwnedSemaphorePermit>,
}

impl Admission {
    /// At most `max_requests` in flight, and at most `max_large_bytes` of bodies over
    /// [`SMALL_BODY_BYTES`] at once.
    pub fn new(max_requests: usize, max_large_bytes: usize, max_body_bytes: usize) -> Self {
        Self {
            requests: Arc::new(Semaphore::new(max_requests)),
            large_bytes: Arc::new(Semaphore::new(max_large_bytes)),
            max_body_bytes,
        }
    }

    /// Admits a request whose head has arrived, reserving what its body may take: its size
    /// when known (a body already in memory), else the declared `Content-Length`, else the
    /// body limit.
    pub fn admit(&self, parts: &Parts, known_size: Option<u64>) -> Result<Ticket, Error> {
        let declared = known_size
            .and_then(|n| usize::try_from(n).ok())
            .or_else(|| {
                parts
                    .headers
                    .get(header::CONTENT_LENGTH)
                    .and_then(|v| v.to_str().ok()?.trim().parse::<usize>().ok())
            });
        let size = declared
            .unwrap_or(self.max_body_bytes)
            .min(self.max_body_bytes);
        let request = Arc::clone(&self.requests)
            .try_acquire_owned()
            .map_err(|_| Error::Overloaded)?;
        let bytes = match size > SMALL_BODY_BYTES {
            false => None,
            true => {
                let permits = u32::try_from(size).map_err(|_| Error::Overloaded)?;
                let reserved = Arc::clone(&self.large_bytes).try_acquire_many_owned(permits);
                Some(reserved.map_err(|_| Error::Overloaded)?)
            }
        };
        Ok(Ticket {
            _request: request,
            _bytes: bytes,
        })
    }
}

/// Reads a whole body, never more than `limit` bytes whatever `Content-Length` claimed, and
/// within `timeout`: 413, 408, or 400 for a body that breaks off.
pub async fn read_body<B>(body: B, limit: usize, timeout: Duration) -> Result<Bytes, Error>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let read = Limited::new(body, limit).collect();
    match tokio::time::timeout(timeout, read).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(Error::BodyTooLarge { limit })
        }
        Ok(Err(_)) => Err(Error::UnreadableBody),
        Err(_) => Err(Error::RequestTimeout {
            secs: timeout.as_secs(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Admission {
        fn admit_head(&self, parts: &Parts) -> Result<Ticket, Error> {
            self.admit(parts, None)
        }
    }

    fn head(length: Option<usize>) -> Parts {
        let mut request = http::Request::post("/");
        if let Some(n) = length {
            request = request.header("content-length", n.to_string());
        }
        request.body(()).unwrap().into_parts().0
    }

    #[test]
    fn requests_and_large_bytes_are_bounded_and_released() {
        let admission = Admission::new(3, 2_000_000, 1_048_576);
        let big = admission.admit_head(&head(Some(1_000_000))).unwrap();
        let unknown = admission.admit_head(&head(None)).err();
        assert!(
            matches!(unknown, Some(Error::Overloaded)),
            "no length: the limit is reserved"
        );
        let small = admission.admit_head(&head(Some(4096))).unwrap();
        let second_big = admission.admit_head(&head(Some(900_000))).unwrap();
        assert!(
            matches!(
                admission.admit_head(&head(Some(10))),
                Err(Error::Overloaded)
            ),
            "three in flight"
        );
        drop((big, small, second_big));
        assert!(
            admission.admit_head(&head(None)).is_ok(),
            "released with the tickets"
        );
    }

    #[test]
    fn a_body_already_in_memory_reserves_its_own_size() {
        let admission = Admission::new(10, 100_000, 1_048_576);
        assert!(
            matches!(admission.admit(&head(None), None), Err(Error::Overloaded)),
            "unknown size: the whole limit is reserved"
        );
        assert!(admission.admit(&head(None), Some(4096)).is_ok());
        assert!(
            admission.admit(&head(Some(4096)), Some(200_000)).is_err(),
            "the known size outranks what Content-Length claims"
        );
    }

    #[test]
    fn small_bodies_pass_while_large_ones_wait() {
        let admission = Admission::new(10, 1_048_576, 1_048_576);
        let _big = admission.admit_head(&head(Some(1_048_576))).unwrap();
        assert!(matches!(
            admission.admit_head(&head(Some(100_000))),
            Err(Error::Overloaded)
        ));
        assert!(admission.admit_head(&head(Some(SMALL_BODY_BYTES))).is_ok());
    }
}
