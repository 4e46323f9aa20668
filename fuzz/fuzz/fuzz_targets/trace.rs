//! cargo-fuzz target: `ccp_fuzz::trace`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ccp_fuzz::trace(data));
