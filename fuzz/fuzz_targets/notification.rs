#![no_main]
//! Fuzzes relay_testkit::fuzz::notification; run with `make fuzz` (cargo +nightly fuzz run notification).

libfuzzer_sys::fuzz_target!(|data: &[u8]| relay_testkit::fuzz::notification(data));
