//! cargo-fuzz target: `ccp_fuzz::agent_config`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ccp_fuzz::agent_config(data));
