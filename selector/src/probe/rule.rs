//! Rules: a default-mode flow whose probe features fall inside a box moves to a fixed
//! candidate at the probe's end, whatever the models predict.
//!
//! A rule is for a place the regressors cannot learn from the few training flows that show
//! it, but that the features separate cleanly. A box is a set of ranges over named features
//! ([`super::FEATURE_NAMES`]); a flow is inside when every named feature lies in its range (a
//! missing or NaN feature is outside). The first rule whose box holds the flow decides; a
//! flow inside none keeps the models' choice. The candidate [`START`] keeps the flow on the
//! candidate it probed on. Rules apply to default-mode flows that ask the models (not to a
//! hand-over's or a path memory's start).

use std::fmt;

use super::features::{FEATURE_NAMES, N_FEATURES};

/// The rule candidate that keeps a flow on its start (the candidate it probed on).
pub const START: &str = "start";

/// One feature's range: `min <= x <= max` (either end may be infinite).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FeatureRange {
    /// The feature's index in [`FEATURE_NAMES`].
    pub feature: usize,
    /// The least value inside.
    pub min: f64,
    /// The largest value inside.
    pub max: f64,
}

impl FeatureRange {
    /// Parses `<feature>=<min>..<max>` (an end left empty is open), e.g. `loss_per_kpkt=..50`;
    /// feature names are those of [`FEATURE_NAMES`].
    pub fn parse(spec: &str) -> Result<Self, String> {
        let spec = spec.trim();
        let (name, range) = spec
            .split_once('=')
            .ok_or_else(|| format!("{spec:?} is not <feature>=<min>..<max>"))?;
        let name = name.trim();
        let feature = FEATURE_NAMES
            .iter()
            .position(|n| *n == name)
            .ok_or_else(|| format!("no feature {name:?} (features: {FEATURE_NAMES:?})"))?;
        let (lo, hi) = range
            .trim()
            .split_once("..")
            .ok_or_else(|| format!("{:?} is not <min>..<max>", range.trim()))?;
        let end = |v: &str, open: f64| -> Result<f64, String> {
            let v = v.trim();
            if v.is_empty() {
                return Ok(open);
            }
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| format!("{v:?} is not a number"))
        };
        let (min, max) = (end(lo, f64::NEG_INFINITY)?, end(hi, f64::INFINITY)?);
        if min > max {
            return Err(format!("{name}: {min} > {max}"));
        }
        Ok(Self { feature, min, max })
    }

    /// Whether `x` (a whole feature vector) lies in the range (NaN or a missing feature does
    /// not).
    pub fn holds(&self, x: &[f64]) -> bool {
        x.get(self.feature)
            .is_some_and(|v| *v >= self.min && *v <= self.max)
    }
}

impl fmt::Display for FeatureRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = FEATURE_NAMES.get(self.feature).copied().unwrap_or("?");
        let end = |v: f64| {
            if v.is_finite() {
                v.to_string()
            } else {
                String::new()
            }
        };
        write!(f, "{name}={}..{}", end(self.min), end(self.max))
    }
}

/// A box of feature ranges and the candidate flows inside it move to.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeRule {
    /// The candidate a flow inside the box moves to ([`START`]: it keeps its start).
    pub candidate: String,
    /// The box: every range must hold.
    pub ranges: Vec<FeatureRange>,
}

impl ProbeRule {
    /// Parses `<candidate>:<feature>=<min>..<max>[,<feature>=<min>..<max>...]`, e.g.
    /// `reno:rtt_ratio_drained=1.05..1.45,loss_per_kpkt=0.3..40,rtt_cv=..0.2` (an end left
    /// empty is open). Feature names are those of [`FEATURE_NAMES`]; each at most once; at
    /// least one range.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let err = |why: &str| {
            format!(
                "{spec:?}: {why}; expected <candidate>:<feature>=<min>..<max>[,...], \
                 e.g. reno:rtt_ratio_drained=1.05..1.45,rtt_cv=..0.2"
            )
        };
        let (candidate, ranges) = spec.trim().split_once(':').ok_or_else(|| err("no ':'"))?;
        let candidate = candidate.trim();
        if candidate.is_empty() {
            return Err(err("no candidate"));
        }
        let mut out: Vec<FeatureRange> = Vec::new();
        for part in ranges.split(',') {
            let range = FeatureRange::parse(part).map_err(|e| err(&e))?;
            if out.iter().any(|r| r.feature == range.feature) {
                let name = FEATURE_NAMES.get(range.feature).copied().unwrap_or("?");
                return Err(err(&format!("{name:?} given twice")));
            }
            out.push(range);
        }
        Ok(Self {
            candidate: candidate.to_string(),
            ranges: out,
        })
    }

    /// Whether a probe with features `x` is inside the box.
    pub fn holds(&self, x: &[f64; N_FEATURES]) -> bool {
        self.ranges.iter().all(|r| r.holds(x))
    }
}

impl fmt::Display for ProbeRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:", self.candidate)?;
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                write!(f, ",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x(drained: f64, loss: f64, rtt_cv: f64) -> [f64; N_FEATURES] {
        let mut x = [1.0; N_FEATURES];
        x[super::super::features::DRAINED] = drained;
        x[super::super::features::LOSS] = loss;
        x[4] = rtt_cv;
        x
    }

    #[test]
    fn a_box_holds_what_lies_in_every_range() {
        let r = ProbeRule::parse(
            "reno: rtt_ratio_drained=1.05..1.45, loss_per_kpkt=0.3..40, rtt_cv=..0.2",
        )
        .unwrap();
        assert_eq!(r.candidate, "reno");
        assert_eq!(r.ranges.len(), 3);
        assert!(r.holds(&x(1.2, 5.0, 0.1)));
        assert!(r.holds(&x(1.05, 40.0, 0.2)), "ends are inside");
        assert!(!r.holds(&x(1.0, 5.0, 0.1)), "a queue that drained");
        assert!(!r.holds(&x(1.2, 0.1, 0.1)), "too few losses");
        assert!(!r.holds(&x(1.2, 5.0, 0.3)), "a variable RTT");
        assert!(
            !r.holds(&x(f64::NAN, 5.0, 0.1)),
            "a missing feature is outside"
        );
        assert_eq!(
            r.to_string(),
            "reno:rtt_ratio_drained=1.05..1.45,loss_per_kpkt=0.3..40,rtt_cv=..0.2"
        );
        assert_eq!(ProbeRule::parse(&r.to_string()), Ok(r));
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (spec, why) in [
            ("reno", "no ':'"),
            (":rtt_cv=..1", "no candidate"),
            ("reno:rtt_cv", "is not <feature>"),
            ("reno:rtt_vc=..1", "no feature \"rtt_vc\""),
            ("reno:rtt_cv=1", "is not <min>..<max>"),
            ("reno:rtt_cv=a..1", "\"a\" is not a number"),
            ("reno:rtt_cv=..inf", "is not a number"),
            ("reno:rtt_cv=2..1", "2 > 1"),
            ("reno:rtt_cv=..1,rtt_cv=0..", "given twice"),
        ] {
            let e = ProbeRule::parse(spec).unwrap_err();
            assert!(e.contains(why), "{spec}: {e}");
        }
    }
}
