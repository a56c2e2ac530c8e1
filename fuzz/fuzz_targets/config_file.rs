#![no_main]
//! Fuzzes relay_testkit::fuzz::config_file; run with `make fuzz` (cargo +nightly fuzz run config_file).

libfuzzer_sys::fuzz_target!(|data: &[u8]| relay_testkit::fuzz::config_file(data));
