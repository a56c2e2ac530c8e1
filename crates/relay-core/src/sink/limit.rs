//! A destination's message size limit, as its table and the variables write it.

use serde::{Deserialize, Serialize};

/// A positive byte count, from a TOML integer or a variable's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteLimit(std::num::NonZeroUsize);

impl ByteLimit {
    /// A limit known to be positive.
    pub const fn new(bytes: usize) -> Self {
        match std::num::NonZeroUsize::new(bytes) {
            Some(n) => Self(n),
            None => panic!("a byte limit is positive"),
        }
    }

    /// The limit in bytes.
    pub fn get(self) -> usize {
        self.0.get()
    }
}

impl std::fmt::Display for ByteLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for ByteLimit {
    type Err = crate::text::InvalidValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.trim()
            .parse::<usize>()
            .ok()
            .and_then(std::num::NonZeroUsize::new)
            .map(Self)
            .ok_or_else(|| "expected a positive number of bytes".into())
    }
}

crate::text::deserialize_from_text!(ByteLimit, "a positive number of bytes");

/// A TOML integer, as written.
impl Serialize for ByteLimit {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(serializer)
    }
}

/// A destination's `max_message_bytes`: body plus attributes above it get 413 before any call.
/// Unless set it is `N`, the service's own limit, and a table written back leaves it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct MessageLimit<const N: usize>(pub ByteLimit);

impl<const N: usize> MessageLimit<N> {
    /// The limit in bytes.
    pub fn get(self) -> usize {
        self.0.get()
    }

    /// True when it is the service's own limit (then it is not written).
    pub(crate) fn is_default(&self) -> bool {
        self.get() == N
    }
}

impl<const N: usize> Default for MessageLimit<N> {
    fn default() -> Self {
        Self(ByteLimit::new(N))
    }
}

impl<const N: usize> std::fmt::Display for MessageLimit<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
