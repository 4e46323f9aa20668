//! Inputs fuzzing found that hang rather than fail: each runs here under a time limit, so a
//! regression fails the test instead of hanging `cargo test`. They are kept out of the replayed
//! corpus (`fuzz/fuzz/regressions/`, not `corpus/`) for the same reason.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::mpsc;
use std::time::Duration;

/// A model set whose booster file (JSON) describes a tree whose nodes form a cycle: it loaded,
/// and `ModelSet::predict` (forust-ml's `predict_leaf`) then looped forever, so one bad model
/// file hung a selector using it. `ModelSet::load` now checks that every tree's child indices
/// point forward to existing nodes.
#[test]
fn a_booster_with_a_cyclic_tree_is_rejected_or_predicts() {
    let path = ccp_fuzz::seeds::repo_root().join("fuzz/fuzz/regressions/model-cyclic-tree-hang");
    let input = std::fs::read(path).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        ccp_fuzz::model(&input);
        let _ = tx.send(());
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(10)).is_ok(),
        "loading and predicting with the model set did not finish in 10 s"
    );
}
