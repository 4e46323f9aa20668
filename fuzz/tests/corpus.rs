//! Replays every committed corpus file and every seed through the same function the
//! cargo-fuzz target calls (`ccp_fuzz::TARGETS`), on stable Rust: what fuzzing once found
//! stays fixed, and the seeds stay inputs the parsers accept.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::panic::{AssertUnwindSafe, catch_unwind};

use ccp_fuzz::TARGETS;
use ccp_fuzz::seeds::{self, corpus_dir};

/// Runs `f` on `input`; the panic message names the file that failed.
fn replay(target: &str, name: &str, f: fn(&[u8]), input: &[u8]) -> Option<String> {
    catch_unwind(AssertUnwindSafe(|| f(input)))
        .err()
        .map(|_| format!("{target}/{name} ({} bytes) panicked", input.len()))
}

#[test]
fn every_corpus_file_runs_without_panic() {
    let mut failures = Vec::new();
    let mut total = 0;
    for &(target, f) in TARGETS {
        let dir = corpus_dir(target);
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (every target has a committed corpus)",
                dir.display()
            )
        });
        let mut n = 0;
        for entry in entries {
            let path = entry.unwrap().path();
            let input = std::fs::read(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            failures.extend(replay(target, &name, f, &input));
            n += 1;
        }
        assert!(n > 0, "{}: empty corpus", dir.display());
        total += n;
    }
    assert!(
        failures.is_empty(),
        "{} of {total} inputs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_seed_runs_without_panic() {
    let all = seeds::all().expect("seeds");
    for &(target, _) in TARGETS {
        assert!(
            all.iter().any(|s| s.target == target),
            "no seed for {target}"
        );
    }
    let mut failures = Vec::new();
    for s in &all {
        let (_, f) = TARGETS
            .iter()
            .find(|(t, _)| *t == s.target)
            .expect("target");
        failures.extend(replay(s.target, &s.name, *f, &s.bytes));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The seeds are real inputs, not rejected at the first byte: the repository's scenarios,
/// config, traces and IW table parse, and the seeded model set loads.
#[test]
fn seeds_are_accepted_by_their_parsers() {
    use std::path::Path;
    for s in seeds::all().expect("seeds") {
        let text = || std::str::from_utf8(&s.bytes).expect("utf-8");
        let ok = match s.target {
            "scenario" => ccp_eval::scenario::Scenario::parse(
                &s.name,
                text(),
                Some(&seeds::repo_root().join("eval/scenarios")),
            )
            .map(|_| ())
            .map_err(|e| e.to_string()),
            "agent_config" => ccp_agent::Config::parse(
                text(),
                &seeds::repo_root().join("agent"),
                Path::new("agent.toml"),
            )
            .map(|_| ())
            .map_err(|e| e.to_string()),
            "trace" => ccp_datapath::netem::Trace::parse(&s.name, text())
                .map(|_| ())
                .map_err(|e| e.to_string()),
            "iw_table" => ccp_agent::config::parse_table(text(), Path::new("iw.csv"), 10, 100)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            "agent_guard" => ccp_agent::guard::check(&s.bytes)
                .map(|_| ())
                .map_err(|e| format!("{e:?}")),
            "wire" => ccp_datapath::runtime::wire::decode_agent_msg(
                &s.bytes,
                &ccp_datapath::runtime::wire::DecodeLimits::default(),
            )
            .map(|_| ())
            .map_err(|e| e.to_string()),
            _ => Ok(()),
        };
        assert!(
            ok.is_ok(),
            "seed {}/{} rejected: {}",
            s.target,
            s.name,
            ok.unwrap_err()
        );
    }
}
