//! `ccp-eval` with `capped` registered: `my-ccp-eval run quick --schemes capped,cubic --out DIR`.

use std::process::ExitCode;

fn main() -> ExitCode {
    match custom_cca::registry() {
        Ok(r) => ccp_eval::cli::main_with(r),
        Err(e) => {
            eprintln!("my-ccp-eval: {e}");
            ExitCode::from(2)
        }
    }
}
