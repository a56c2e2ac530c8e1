#![no_main]
//! Fuzzes relay_testkit::fuzz::signature_header; run with `make fuzz` (cargo +nightly fuzz run signature_header).

libfuzzer_sys::fuzz_target!(|data: &[u8]| relay_testkit::fuzz::signature_header(data));
