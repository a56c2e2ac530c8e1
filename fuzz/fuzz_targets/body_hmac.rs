#![no_main]
//! Fuzzes relay_testkit::fuzz_schemes::body_hmac; run with `make fuzz` (cargo +nightly fuzz run body_hmac).

libfuzzer_sys::fuzz_target!(|data: &[u8]| relay_testkit::fuzz_schemes::body_hmac(data));
