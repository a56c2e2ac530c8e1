#![no_main]
//! Fuzzes relay_testkit::fuzz::pattern; run with `make fuzz` (cargo +nightly fuzz run pattern).

libfuzzer_sys::fuzz_target!(|data: &[u8]| relay_testkit::fuzz::pattern(data));
