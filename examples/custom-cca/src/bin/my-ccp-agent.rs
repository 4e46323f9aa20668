//! `ccp-agent` with `capped` registered: `my-ccp-agent --alg capped` serves it to real flows.

use std::process::ExitCode;

fn main() -> ExitCode {
    match custom_cca::registry() {
        Ok(r) => ccp_agent::cli::main_with(r),
        Err(e) => {
            eprintln!("my-ccp-agent: {e}");
            ExitCode::from(2)
        }
    }
}
