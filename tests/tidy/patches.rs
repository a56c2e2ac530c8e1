//! The workspace's `[patch.crates-io]` entries are in use: when a dependency moves to a version
//! a patch does not satisfy, cargo only warns and builds the crates.io crate instead, so this
//! test reads Cargo.lock and fails if a patched crate comes from a registry.

use std::path::Path;

/// Crates the workspace replaces, and why (crates/crc-fast-slim/README.md).
const PATCHED: [&str; 1] = ["crc-fast"];

#[test]
fn every_patched_crate_is_built_from_the_workspace() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).expect("Cargo.lock is readable");
    let lock: toml::Table = lock.parse().expect("Cargo.lock is TOML");
    let packages = lock["package"]
        .as_array()
        .expect("Cargo.lock lists packages");
    for name in PATCHED {
        let found: Vec<_> = packages
            .iter()
            .filter(|p| p["name"].as_str() == Some(name))
            .collect();
        assert!(!found.is_empty(), "{name} is not in Cargo.lock at all");
        for package in found {
            assert!(
                package.get("source").is_none(),
                "{name} {} comes from {}: the workspace's patch no longer applies (its version or \
                 interface needs following the dependency that asks for it)",
                package["version"],
                package["source"]
            );
        }
    }
}
