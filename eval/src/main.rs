//! `ccp-eval`: see [`ccp_eval::cli`] for the commands and exit codes.

use std::process::ExitCode;

fn main() -> ExitCode {
    ccp_eval::cli::main_with(ccp_algorithms::Registry::builtin())
}
