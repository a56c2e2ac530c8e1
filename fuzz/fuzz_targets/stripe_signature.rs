#![no_main]
//! Fuzzes relay_testkit::fuzz_schemes::stripe_signature; run with `make fuzz` (cargo +nightly fuzz run stripe_signature).

libfuzzer_sys::fuzz_target!(|data: &[u8]| relay_testkit::fuzz_schemes::stripe_signature(data));
