//! cargo-fuzz target: `ccp_fuzz::iw_table`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ccp_fuzz::iw_table(data));
