//! cargo-fuzz target: `ccp_fuzz::agent_guard`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ccp_fuzz::agent_guard(data));
