//! cargo-fuzz target: `ccp_fuzz::wire`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ccp_fuzz::wire(data));
