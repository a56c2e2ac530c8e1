#![no_main]
//! Fuzzes relay_testkit::fuzz_schemes::slack; run with `make fuzz` (cargo +nightly fuzz run slack).

libfuzzer_sys::fuzz_target!(|data: &[u8]| relay_testkit::fuzz_schemes::slack(data));
