#![no_main]
//! Fuzzes relay_testkit::fuzz::intake; run with `make fuzz` (cargo +nightly fuzz run intake).

libfuzzer_sys::fuzz_target!(|data: &[u8]| relay_testkit::fuzz::intake(data));
