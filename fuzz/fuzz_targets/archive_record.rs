#![no_main]
//! Fuzzes relay_testkit::fuzz::archive_record; run with `make fuzz` (cargo +nightly fuzz run archive_record).

libfuzzer_sys::fuzz_target!(|data: &[u8]| relay_testkit::fuzz::archive_record(data));
