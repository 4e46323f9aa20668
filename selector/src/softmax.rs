//! Multiclass gradient boosting with a softmax objective: each round fits one regression tree
//! per class to the gradient of the multinomial log-loss, so the classes' scores are fitted
//! together and their probabilities compete, where one-against-the-rest boosters (forust-ml
//! has no multiclass objective) each fit their own class and are only normalized afterwards.
//!
//! What it follows: Friedman's K-class gradient boosting ("Greedy function approximation: a
//! gradient boosting machine", Ann. Statist. 29(5), 2001, §4.6: K trees a round on the
//! residuals `y_k - p_k`), with the second-order leaf values and split gain of XGBoost (Chen &
//! Guestrin, KDD 2016, Eq. 5-7: leaf `-G / (H + lambda)`, hessian `p_k (1 - p_k)`). Splits are
//! exact (every distinct value of a feature is tried, thresholds half-way between neighbours),
//! grown level by level to a fixed depth. Left out: missing values (every feature must be
//! finite), row and feature subsampling, and the gain threshold `gamma` (a split only has to
//! gain something).

use serde::{Deserialize, Serialize};

/// Training settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoftmaxParams {
    /// Boosting rounds (one tree per class each).
    pub rounds: usize,
    /// Deepest split level of a tree (a tree has at most `2^depth` leaves).
    pub depth: usize,
    /// Shrinkage of each tree's leaf values.
    pub learning_rate: f64,
    /// Least hessian (sum of `p (1 - p)`) on either side of a split.
    pub min_leaf_hessian: f64,
    /// L2 penalty on leaf values (XGBoost's `lambda`).
    pub lambda: f64,
}

/// One node of a tree: a split sends `x[feature] < threshold` to `left`, the rest to `right`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Node {
    Split {
        feature: usize,
        threshold: f64,
        left: usize,
        right: usize,
    },
    Leaf {
        value: f64,
    },
}

/// A tree: its root is node 0 and children come after their parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Tree {
    nodes: Vec<Node>,
}

impl Node {
    /// Where `x` goes from this node: the child it falls to, or the leaf's value.
    fn step(&self, x: &[f64]) -> Result<usize, f64> {
        match *self {
            Node::Leaf { value } => Err(value),
            Node::Split {
                feature,
                threshold,
                left,
                right,
            } => Ok(if x[feature] < threshold { left } else { right }),
        }
    }
}

impl Tree {
    fn predict(&self, x: &[f64]) -> f64 {
        let mut i = 0;
        loop {
            match self.nodes[i].step(x) {
                Ok(child) => i = child,
                Err(value) => return value,
            }
        }
    }
}

/// A fitted classifier: per class a base score and one tree a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftmaxBooster {
    classes: Vec<String>,
    n_features: usize,
    /// Each class's initial score (the log of its share of the training rows).
    base: Vec<f64>,
    /// `rounds[r][k]`: round r's tree of class k.
    rounds: Vec<Vec<Tree>>,
}

/// A node still growing: its rows' gradient and hessian sums.
#[derive(Clone, Copy)]
struct Open {
    node: usize,
    g: f64,
    h: f64,
}

/// The best split found so far for an open node.
#[derive(Clone, Copy)]
struct Best {
    gain: f64,
    feature: usize,
    threshold: f64,
    left: (f64, f64),
}

impl SoftmaxBooster {
    /// Fits `params.rounds` rounds on the rows `x` (each of the same length, every value
    /// finite) labelled with indices into `classes`. Errors on an empty or ragged set, a
    /// non-finite feature, a label out of range, fewer than two classes, or bad settings.
    pub fn fit(
        x: &[Vec<f64>],
        y: &[usize],
        classes: Vec<String>,
        params: SoftmaxParams,
    ) -> Result<Self, String> {
        let n_classes = classes.len();
        let n_rows = x.len();
        if n_classes < 2 {
            return Err(format!("need at least two classes, got {n_classes}"));
        }
        if n_rows == 0 || y.len() != n_rows {
            return Err(format!("{n_rows} rows and {} labels", y.len()));
        }
        let nf = x[0].len();
        if nf == 0 || x.iter().any(|r| r.len() != nf) {
            return Err("rows must have the same number of features, at least one".into());
        }
        if x.iter().flatten().any(|v| !v.is_finite()) {
            return Err("a feature is not a finite number".into());
        }
        if let Some(bad) = y.iter().find(|&&c| c >= n_classes) {
            return Err(format!(
                "label {bad} names no class (there are {n_classes})"
            ));
        }
        let p = &params;
        if p.depth == 0
            || !(p.learning_rate.is_finite() && p.learning_rate > 0.0)
            || !(p.min_leaf_hessian.is_finite() && p.min_leaf_hessian >= 0.0)
            || !(p.lambda.is_finite() && p.lambda >= 0.0)
        {
            return Err(format!(
                "depth must be at least 1, the learning rate above 0 and the leaf hessian and \
                 lambda at least 0: {p:?}"
            ));
        }
        // Each class's prior, smoothed so an absent class still has a finite score.
        let base: Vec<f64> = (0..n_classes)
            .map(|c| {
                ((y.iter().filter(|&&l| l == c).count() as f64 + 0.5)
                    / (n_rows as f64 + 0.5 * n_classes as f64))
                    .ln()
            })
            .collect();
        // Row order of each feature, computed once.
        let sorted: Vec<Vec<usize>> = (0..nf)
            .map(|f| {
                let mut idx: Vec<usize> = (0..n_rows).collect();
                idx.sort_by(|&a, &b| x[a][f].total_cmp(&x[b][f]));
                idx
            })
            .collect();
        let mut scores: Vec<Vec<f64>> = vec![base.clone(); n_rows];
        let mut rounds = Vec::with_capacity(p.rounds);
        let (mut grad, mut hess) = (vec![0.0; n_rows], vec![0.0; n_rows]);
        for _ in 0..p.rounds {
            let probs: Vec<Vec<f64>> = scores.iter().map(|s| softmax(s)).collect();
            let mut trees = Vec::with_capacity(n_classes);
            for c in 0..n_classes {
                for i in 0..n_rows {
                    let pc = probs[i][c];
                    grad[i] = pc - f64::from(u8::from(y[i] == c));
                    hess[i] = (pc * (1.0 - pc)).max(1e-16);
                }
                let tree = grow(x, &sorted, (&grad, &hess), params);
                for (i, s) in scores.iter_mut().enumerate() {
                    s[c] += tree.predict(&x[i]);
                }
                trees.push(tree);
            }
            rounds.push(trees);
        }
        Ok(Self {
            classes,
            n_features: nf,
            base,
            rounds,
        })
    }

    /// Number of features a row has.
    pub fn n_features(&self) -> usize {
        self.n_features
    }

    /// The class names, in the order of [`SoftmaxBooster::probabilities`].
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// Each class's probability for features `x` (summing to 1); `None` when `x` has another
    /// length than the training rows or a value that is not finite.
    pub fn probabilities(&self, x: &[f64]) -> Option<Vec<f64>> {
        if x.len() != self.n_features || x.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut s = self.base.clone();
        for round in &self.rounds {
            for (c, t) in round.iter().enumerate() {
                s[c] += t.predict(x);
            }
        }
        Some(softmax(&s))
    }

    /// Checks a classifier read from a file before it is used: one base score and one tree a
    /// round per class, every split on a feature of the model and pointing forward to nodes
    /// that exist (so prediction ends), every number finite.
    pub fn check(&self) -> Result<(), String> {
        let k = self.classes.len();
        if k < 2 || self.base.len() != k || self.n_features == 0 {
            return Err(format!(
                "{k} classes, {} base scores and {} features",
                self.base.len(),
                self.n_features
            ));
        }
        if self.base.iter().any(|b| !b.is_finite()) {
            return Err("a base score is not finite".into());
        }
        for (r, round) in self.rounds.iter().enumerate() {
            if round.len() != k {
                return Err(format!(
                    "round {r} has {} trees for {k} classes",
                    round.len()
                ));
            }
            for (c, tree) in round.iter().enumerate() {
                check_tree(tree, self.n_features)
                    .map_err(|e| format!("round {r}, class {}: {e}", self.classes[c]))?;
            }
        }
        Ok(())
    }
}

fn check_tree(tree: &Tree, n_features: usize) -> Result<(), String> {
    let len = tree.nodes.len();
    if len == 0 {
        return Err("a tree has no nodes".into());
    }
    for (i, node) in tree.nodes.iter().enumerate() {
        match node {
            Node::Leaf { value } if !value.is_finite() => {
                return Err(format!("node {i}: leaf value {value}"));
            }
            Node::Leaf { .. } => {}
            Node::Split {
                feature,
                threshold,
                left,
                right,
            } => {
                if *feature >= n_features || !threshold.is_finite() {
                    return Err(format!(
                        "node {i}: split on feature {feature} at {threshold}"
                    ));
                }
                if !(i < *left && *left < len && i < *right && *right < len) {
                    return Err(format!(
                        "node {i}: children {left} and {right} of {len} nodes"
                    ));
                }
            }
        }
    }
    Ok(())
}

fn softmax(s: &[f64]) -> Vec<f64> {
    let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
    let total: f64 = e.iter().sum();
    e.into_iter().map(|v| v / total).collect()
}

/// Grows one tree on gradients `grad` and hessians `hess`, level by level: at each level every open
/// node's best split is found in one pass over each feature's sorted rows.
fn grow(
    x: &[Vec<f64>],
    sorted: &[Vec<usize>],
    (grad, hess): (&[f64], &[f64]),
    params: SoftmaxParams,
) -> Tree {
    let n_rows = x.len();
    let score = |g: f64, h: f64| g * g / (h + params.lambda);
    let mut nodes = vec![Node::Leaf { value: 0.0 }];
    let mut node_of = vec![0usize; n_rows];
    let mut open = vec![Open {
        node: 0,
        g: grad.iter().sum(),
        h: hess.iter().sum(),
    }];
    let leaf = |o: &Open| Node::Leaf {
        value: -o.g / (o.h + params.lambda) * params.learning_rate,
    };
    for _ in 0..params.depth {
        // node id -> its slot in `open`.
        let mut slot = vec![usize::MAX; nodes.len()];
        for (s, o) in open.iter().enumerate() {
            slot[o.node] = s;
        }
        let mut best: Vec<Option<Best>> = vec![None; open.len()];
        for (f, order) in sorted.iter().enumerate() {
            // Per open node: left sums so far and the last value seen.
            let mut run = vec![(0.0, 0.0, f64::NAN); open.len()];
            for &r in order {
                let s = slot[node_of[r]];
                if s == usize::MAX {
                    continue;
                }
                let v = x[r][f];
                let (gl, hl, prev) = run[s];
                if prev < v {
                    let o = open[s];
                    let (gr, hr) = (o.g - gl, o.h - hl);
                    if hl >= params.min_leaf_hessian && hr >= params.min_leaf_hessian {
                        let gain = score(gl, hl) + score(gr, hr) - score(o.g, o.h);
                        if gain > best[s].map_or(1e-12, |b| b.gain) {
                            best[s] = Some(Best {
                                gain,
                                feature: f,
                                threshold: prev + (v - prev) / 2.0,
                                left: (gl, hl),
                            });
                        }
                    }
                }
                run[s] = (gl + grad[r], hl + hess[r], v);
            }
        }
        let mut next = Vec::new();
        for (o, b) in open.iter().zip(&best) {
            let Some(b) = b else {
                nodes[o.node] = leaf(o);
                continue;
            };
            let (left, right) = (nodes.len(), nodes.len() + 1);
            nodes[o.node] = Node::Split {
                feature: b.feature,
                threshold: b.threshold,
                left,
                right,
            };
            nodes.push(Node::Leaf { value: 0.0 });
            nodes.push(Node::Leaf { value: 0.0 });
            next.push(Open {
                node: left,
                g: b.left.0,
                h: b.left.1,
            });
            next.push(Open {
                node: right,
                g: o.g - b.left.0,
                h: o.h - b.left.1,
            });
        }
        for (r, nd) in node_of.iter_mut().enumerate() {
            if let Ok(child) = nodes[*nd].step(&x[r]) {
                *nd = child;
            }
        }
        open = next;
        if open.is_empty() {
            break;
        }
    }
    for o in &open {
        nodes[o.node] = leaf(o);
    }
    Tree { nodes }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> SoftmaxParams {
        SoftmaxParams {
            rounds: 40,
            depth: 3,
            learning_rate: 0.3,
            min_leaf_hessian: 0.5,
            lambda: 1.0,
        }
    }

    /// Three classes in the plane: left of x0 = 0.3, right of it below x1 = 0.5, and above.
    fn data(n: usize, seed: u64) -> (Vec<Vec<f64>>, Vec<usize>) {
        let mut rng = ccp_algorithms::api::SplitMix64::new(seed);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let (first, second) = (rng.next_f64(), rng.next_f64());
            y.push(if first < 0.3 {
                0
            } else if second < 0.5 {
                1
            } else {
                2
            });
            x.push(vec![first, second, rng.next_f64()]);
        }
        (x, y)
    }

    fn classes() -> Vec<String> {
        ["a", "b", "c"].iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn it_learns_three_classes_and_round_trips() {
        let (x, y) = data(600, 1);
        let m = SoftmaxBooster::fit(&x, &y, classes(), params()).expect("fits");
        let (xt, yt) = data(300, 2);
        let right = xt
            .iter()
            .zip(&yt)
            .filter(|(r, l)| {
                let p = m.probabilities(r).expect("finite");
                assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
                p.iter()
                    .enumerate()
                    .max_by(|a, b| a.1.total_cmp(b.1))
                    .map(|(c, _)| c)
                    == Some(**l)
            })
            .count();
        assert!(right >= 285, "{right} of 300 right");
        // Far from the boundaries it is confident.
        let p = m.probabilities(&[0.1, 0.9, 0.5]).expect("finite");
        assert!(p[0] > 0.9, "{p:?}");
        let json = serde_json::to_string(&m).expect("serializes");
        let back: SoftmaxBooster = serde_json::from_str(&json).expect("parses");
        back.check().expect("valid");
        assert_eq!(back.probabilities(&xt[0]), m.probabilities(&xt[0]));
    }

    #[test]
    fn bad_data_and_settings_are_refused() {
        let (x, y) = data(50, 3);
        let fit = |x: &[Vec<f64>], y: &[usize], c: Vec<String>, p| SoftmaxBooster::fit(x, y, c, p);
        assert!(fit(&x, &y, vec!["a".into()], params()).is_err());
        assert!(fit(&x, &y[1..], classes(), params()).is_err());
        assert!(fit(&[], &[], classes(), params()).is_err());
        let mut ragged = x.clone();
        ragged[3].pop();
        assert!(fit(&ragged, &y, classes(), params()).is_err());
        let mut nan = x.clone();
        nan[0][1] = f64::NAN;
        assert!(fit(&nan, &y, classes(), params()).is_err());
        let mut label = y.clone();
        label[0] = 3;
        assert!(fit(&x, &label, classes(), params()).is_err());
        for bad in [
            SoftmaxParams {
                depth: 0,
                ..params()
            },
            SoftmaxParams {
                learning_rate: 0.0,
                ..params()
            },
            SoftmaxParams {
                lambda: f64::NAN,
                ..params()
            },
        ] {
            assert!(fit(&x, &y, classes(), bad).is_err(), "{bad:?}");
        }
        let m = fit(&x, &y, classes(), params()).expect("fits");
        assert_eq!(m.probabilities(&[0.1, 0.2]), None);
        assert_eq!(m.probabilities(&[0.1, f64::INFINITY, 0.2]), None);
    }

    #[test]
    fn damaged_files_fail_the_check() {
        let (x, y) = data(200, 4);
        let m = SoftmaxBooster::fit(&x, &y, classes(), params()).expect("fits");
        let json = serde_json::to_string(&m).expect("serializes");
        // A split pointing back at the root would loop forever.
        let mut v: serde_json::Value = serde_json::from_str(&json).expect("json");
        v["rounds"][0][0]["nodes"][0]["split"]["left"] = 0.into();
        let back: SoftmaxBooster = serde_json::from_value(v).expect("shape");
        assert!(back.check().unwrap_err().contains("children"));
        // A split on a feature the model does not have.
        let mut v: serde_json::Value = serde_json::from_str(&json).expect("json");
        v["rounds"][1][2]["nodes"][0]["split"]["feature"] = 9.into();
        let back: SoftmaxBooster = serde_json::from_value(v).expect("shape");
        assert!(back.check().unwrap_err().contains("feature 9"));
        // A round short of a class's tree.
        let mut v: serde_json::Value = serde_json::from_str(&json).expect("json");
        v["rounds"][2].as_array_mut().expect("array").pop();
        let back: SoftmaxBooster = serde_json::from_value(v).expect("shape");
        assert!(back.check().unwrap_err().contains("round 2"));
        // Base scores that do not match the classes.
        let mut v: serde_json::Value = serde_json::from_str(&json).expect("json");
        v["base"].as_array_mut().expect("array").pop();
        let back: SoftmaxBooster = serde_json::from_value(v).expect("shape");
        assert!(back.check().is_err());
    }
}
