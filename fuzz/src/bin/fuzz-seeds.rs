//! Writes the seed corpora (`ccp_fuzz::seeds`) to `fuzz/fuzz/corpus/<target>/`, keeping what
//! is there. Run it once before fuzzing a new target: `cargo run -p ccp-fuzz --bin fuzz-seeds`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let seeds = match ccp_fuzz::seeds::all() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fuzz-seeds: {e}");
            return ExitCode::FAILURE;
        }
    };
    for s in &seeds {
        let dir = ccp_fuzz::seeds::corpus_dir(s.target);
        let path = dir.join(format!("seed-{}", s.name));
        if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &s.bytes))
        {
            eprintln!("fuzz-seeds: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    println!("wrote {} seeds", seeds.len());
    ExitCode::SUCCESS
}
