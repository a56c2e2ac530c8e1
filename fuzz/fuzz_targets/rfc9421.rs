#![no_main]
//! Fuzzes relay_testkit::fuzz_schemes::rfc9421; run with `make fuzz` (cargo +nightly fuzz run rfc9421).

libfuzzer_sys::fuzz_target!(|data: &[u8]| relay_testkit::fuzz_schemes::rfc9421(data));
