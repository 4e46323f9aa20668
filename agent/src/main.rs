//! `ccp-agent`: see the crate doc of `ccp_agent` for the options and `agent.toml`.

use std::process::ExitCode;

fn main() -> ExitCode {
    ccp_agent::cli::main_with(ccp_algorithms::Registry::builtin())
}
