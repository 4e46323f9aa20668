//! What the end-to-end tests of the `ccp-eval` binary share.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `ccp-eval` with `args`, with LP-TCP's test forest as LP-TCP's model (LP-TCP is a
/// candidate of every selector, whatever `make models` made or did not) and, when `models`
/// is given, that folder in the environment variable `models_var`.
pub(crate) fn eval(args: &[&str], models_var: &str, models: Option<&Path>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ccp-eval"));
    c.args(args);
    c.env(
        "CCP_LPTCP_MODEL",
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../algorithms/tests/fixtures/lptcp-forest.json"),
    );
    if let Some(m) = models {
        c.env(models_var, m);
    }
    c.output().expect("ccp-eval runs")
}
