//! cargo-fuzz target: `ccp_fuzz::datapath`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ccp_fuzz::datapath(data));
