#![no_main]
//! Fuzzes relay_testkit::fuzz::verification; run with `make fuzz` (cargo +nightly fuzz run verification).

libfuzzer_sys::fuzz_target!(|data: &[u8]| relay_testkit::fuzz::verification(data));
