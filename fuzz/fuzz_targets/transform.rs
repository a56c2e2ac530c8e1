#![no_main]
//! Fuzzes relay_testkit::fuzz::transform; run with `make fuzz` (cargo +nightly fuzz run transform).

libfuzzer_sys::fuzz_target!(|data: &[u8]| relay_testkit::fuzz::transform(data));
