//! cargo-fuzz target: `ccp_fuzz::scenario`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ccp_fuzz::scenario(data));
