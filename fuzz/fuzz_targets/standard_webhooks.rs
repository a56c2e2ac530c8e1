#![no_main]
//! Fuzzes relay_testkit::fuzz_schemes::standard_webhooks; run with `make fuzz` (cargo +nightly fuzz run standard_webhooks).

libfuzzer_sys::fuzz_target!(|data: &[u8]| relay_testkit::fuzz_schemes::standard_webhooks(data));
