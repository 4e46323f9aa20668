//! `docs/writing-a-cca.md` shows this crate's files: each fenced block tagged
//! `file=<path>` must be that file, byte for byte, so the guide cannot drift from the code
//! `make test` builds and runs.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;

#[test]
fn every_file_the_guide_shows_is_the_file_in_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let guide = std::fs::read_to_string(root.join("docs/writing-a-cca.md")).unwrap();
    let mut shown = 0;
    let mut lines = guide.lines();
    while let Some(line) = lines.next() {
        let Some(path) = line
            .strip_prefix("```")
            .and_then(|info| info.split(',').find_map(|p| p.strip_prefix("file=")))
        else {
            continue;
        };
        let mut block = String::new();
        for l in lines.by_ref() {
            if l == "```" {
                break;
            }
            block.push_str(l);
            block.push('\n');
        }
        let file = std::fs::read_to_string(root.join(path)).unwrap();
        assert_eq!(
            block, file,
            "{path} differs from what docs/writing-a-cca.md shows"
        );
        shown += 1;
    }
    assert_eq!(shown, 5, "the guide shows the template's five files");
}

#[test]
fn the_guides_cellular_scenario_loads_and_names_capped() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("cellular.toml");
    ccp_algorithms::registry::install(custom_cca::registry().unwrap()).unwrap();
    let s = ccp_eval::scenario::Scenario::load(&path).unwrap();
    let plan = ccp_eval::runner::plan(&s, &ccp_eval::runner::RunOptions::default()).unwrap();
    assert!(plan.iter().any(|j| j.scheme == "capped"));
    assert!(plan.iter().any(|j| j.scheme == "selector-rein"));
}
