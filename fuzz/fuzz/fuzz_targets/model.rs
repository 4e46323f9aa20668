//! cargo-fuzz target: `ccp_fuzz::model`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ccp_fuzz::model(data));
