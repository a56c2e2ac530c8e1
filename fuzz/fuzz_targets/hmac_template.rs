#![no_main]
//! Fuzzes relay_testkit::fuzz_schemes::hmac_template; run with `make fuzz` (cargo +nightly fuzz run hmac_template).

libfuzzer_sys::fuzz_target!(|data: &[u8]| relay_testkit::fuzz_schemes::hmac_template(data));
