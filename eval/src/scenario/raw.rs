//! The scenario file as written (TOML with spans for `file:line` errors) and the helpers that
//! check its fields.

use serde::Deserialize;
use toml::Spanned;

use super::ScenarioError;
use crate::traces::CellularSpec;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub(super) name: String,
    #[serde(default)]
    pub(super) description: Option<String>,
    pub(super) duration_s: Spanned<f64>,
    #[serde(default)]
    pub(super) seeds: Option<Spanned<Vec<u64>>>,
    #[serde(default)]
    pub(super) repetitions: Option<Spanned<u64>>,
    #[serde(default)]
    pub(super) schemes: Option<Vec<String>>,
    #[serde(default)]
    pub(super) series_interval_ms: Option<Spanned<u64>>,
    #[serde(default)]
    pub(super) conditions: Vec<RawCondition>,
    #[serde(default)]
    pub(super) grid: Option<RawGrid>,
    #[serde(default)]
    pub(super) flows: Vec<RawFlows>,
    #[serde(default)]
    pub(super) cross: Vec<RawFlows>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCondition {
    #[serde(default)]
    pub(super) env: Option<String>,
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(default)]
    pub(super) bw_mbps: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) trace: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) cellular: Option<Spanned<CellularSpec>>,
    pub(super) rtt_ms: Spanned<f64>,
    #[serde(default)]
    pub(super) loss: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) buffer_bdp: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) buffer_bytes: Option<Spanned<u64>>,
    #[serde(default)]
    pub(super) buffer_pkts: Option<Spanned<u64>>,
    #[serde(default)]
    pub(super) phases: Vec<Spanned<RawPhase>>,
    #[serde(default)]
    pub(super) ack_aggregation_ms: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) trace_offset_s: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) flows: Option<Spanned<Vec<RawFlows>>>,
    #[serde(default)]
    pub(super) cross: Option<Spanned<Vec<RawFlows>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPhase {
    pub(super) at_s: f64,
    #[serde(default)]
    pub(super) bw_mbps: Option<f64>,
    #[serde(default)]
    pub(super) rtt_ms: Option<f64>,
    #[serde(default)]
    pub(super) loss: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGrid {
    #[serde(default)]
    pub(super) env: Option<String>,
    pub(super) bw_mbps: Spanned<Vec<f64>>,
    pub(super) rtt_ms: Spanned<Vec<f64>>,
    #[serde(default)]
    pub(super) loss: Option<Spanned<Vec<f64>>>,
    #[serde(default)]
    pub(super) buffer_bdp: Option<Spanned<Vec<f64>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFlows {
    #[serde(default)]
    pub(super) scheme: Option<String>,
    #[serde(default = "one")]
    pub(super) count: Spanned<usize>,
    #[serde(default)]
    pub(super) start_s: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) stagger_s: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) size_bytes: Option<Spanned<u64>>,
    #[serde(default)]
    pub(super) on_off_s: Option<Spanned<[f64; 2]>>,
    #[serde(default)]
    pub(super) sizes: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) objective: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) port: Option<Spanned<u16>>,
}

pub(super) fn one() -> Spanned<usize> {
    Spanned::new(0..0, 1)
}

/// Turns byte offsets into line numbers for error messages.
pub(super) struct Src<'a> {
    pub(super) path: &'a str,
    pub(super) text: &'a str,
}

impl Src<'_> {
    pub(super) fn line(&self, offset: usize) -> usize {
        self.text
            .get(..offset)
            .map_or(1, |t| t.matches('\n').count() + 1)
    }

    pub(super) fn invalid<T>(
        &self,
        span: &Spanned<T>,
        field: String,
        message: &str,
    ) -> ScenarioError {
        ScenarioError::Invalid {
            path: self.path.to_string(),
            line: self.line(span.span().start),
            field,
            message: message.to_string(),
        }
    }
}

pub(super) fn check<T>(
    src: &Src<'_>,
    v: &Spanned<T>,
    field: impl Into<String>,
    ok: impl Fn(&T) -> bool,
    msg: &str,
) -> Result<(), ScenarioError> {
    if ok(v.get_ref()) {
        Ok(())
    } else {
        Err(src.invalid(v, field.into(), msg))
    }
}

pub(super) fn fmt_num(x: f64) -> String {
    let s = format!("{x}");
    s.trim_end_matches(".0").to_string()
}

pub(super) fn pos(x: f64) -> bool {
    x.is_finite() && x > 0.0
}
