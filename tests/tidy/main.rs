//! Conventions of the repository held by tests that read the tree: every link in the
//! documentation resolves, the error codes it names exist, and relay-core's modules import one
//! way only (ARCHITECTURE.md), its public types have one name each, and no file or function in
//! the crates is over its size.

mod docs;
mod error_codes;
mod layers;
mod names;
mod patches;
mod sizes;
