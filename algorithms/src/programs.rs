//! The suite's shared library of datapath programs (DESIGN.md §3.3).
//!
//! ccp-kernel and libccp hold at most 10 programs per datapath (9 in practice) and portus
//! merges every registered algorithm's programs by name, so the whole suite shares a few named
//! programs. Each is a [`ProgramSpec`]: a name, its source, and one typed decoder from a portus
//! [`Report`] to a [`Measurement`] with a single error path ([`DecodeError`]). A report that
//! still carries an older program's uid decodes to [`DecodeError::Stale`]; the adapter drops
//! and counts it.
//!
//! Programs:
//! - [`PER_RTT`]: accumulate acked/SACKed bytes, losses and timeouts, the latest and minimum RTT,
//!   rates, inflight and the window; report once per RTT.
//! - [`PER_RTT_URGENT`]: the same, and report at once on a loss or a timeout (what loss-based
//!   algorithms need to react within one ACK).
//! - [`PER_RTT_URGENT_CLOCKED`]: [`PER_RTT_URGENT`] whose window follows the ACK clock between
//!   reports, in the datapath:
//!   - slow start: while the window is below the control register `ssthresh` (bytes;
//!     unbounded unless the installer sets it), every ACK grows it by the bytes it newly
//!     delivers (acknowledged or SACKed, as Linux's `tcp_slow_start` counts), up to
//!     `ssthresh`, so it doubles per RTT with the ACKs instead of in one step per report;
//!   - loss: every ACK that carries a loss lowers the window to what is in flight plus what
//!     the ACK delivered (packet conservation: one segment out per segment that left), so the
//!     retransmissions do not go out as one burst at the old window while the agent's answer
//!     is on its way (where the program runs in the ACK's path, as in ccp-kernel; on the eBPF
//!     datapath it runs on the ACK's record in user space and the cut applies from the next
//!     ACK); the report carries the window from before, and the answer sets the window. A
//!     loss or a timeout also sets `ssthresh` to 0: growth stops until the agent installs
//!     the program again with a threshold (after a timeout).
//! - [`PER_HALF_RTT`]: the same, reporting every half RTT (and not at once on a loss): the
//!   report's minimum RTT is then the minimum over the last `RTT / 2`, Copa's `RTTstanding`,
//!   and a per-ACK rule acts twice per RTT instead of once.
//!
//! - [`every_rtts`]: the same, reporting every `k` RTTs for any `k` (ARC's decision interval,
//!   the rate environment's); `k = 1/2` and `k = 1` are [`PER_HALF_RTT`] and [`PER_RTT`]
//!   themselves, another `k` a program of its own (not in [`ALL`]: whoever installs it
//!   registers it through its config's programs).
//!
//! All share one report layout, so they share one decoder.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use portus::Report;
use portus::lang::Scope;
use thiserror::Error;

use crate::api::Measurement;
/// Defined in [`crate::api`] (the algorithm trait names it); its registration and decoder are
/// here.
pub use crate::api::ProgramSpec;

/// Why a report could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The report came from a program the flow no longer runs: drop it.
    #[error(
        "report from a program the flow no longer runs (uid {report_uid}, current {current_uid})"
    )]
    Stale {
        /// Program uid the report carries.
        report_uid: u32,
        /// Program uid the flow runs now.
        current_uid: u32,
    },
    /// A field was missing or malformed.
    #[error("report field {field}: {reason}")]
    Field {
        /// Field name.
        field: &'static str,
        /// What portus said.
        reason: String,
    },
}

macro_rules! report_def {
    () => {
        concat!(report_def!(fields), ")\n")
    };
    ($controls:literal) => {
        concat!(report_def!(fields), " ", $controls, ")\n")
    };
    (fields) => {
        "(def (Report
    (volatile acked 0)
    (volatile sacked 0)
    (volatile lost 0)
    (volatile timeout false)
    (rtt 0)
    (volatile minrtt +infinity)
    (volatile rin 0)
    (volatile rout 0)
    (volatile inflight 0)
    (volatile cwnd 0)
    (volatile now 0))"
    };
}

// `Flow.rtt_sample_us` reads +infinity on an ACK without a sample, so the latest RTT is only
// taken from ACKs that carry one (immediates must stay below 2^31).
macro_rules! fold_every_ack {
    () => {
        "(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Report.sacked (+ Report.sacked Ack.bytes_misordered))
    (:= Report.lost (+ Report.lost Ack.lost_pkts_sample))
    (:= Report.timeout (|| Report.timeout Flow.was_timeout))
    (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us))
    (:= Report.rin (max Report.rin Flow.rate_incoming))
    (:= Report.rout Flow.rate_outgoing)
    (:= Report.inflight Flow.bytes_in_flight)
    (:= Report.cwnd Cwnd)
    (:= Report.now Ack.now)
    (fallthrough))
(when (< Flow.rtt_sample_us 2000000000)
    (:= Report.rtt Flow.rtt_sample_us)
    (fallthrough))
"
    };
}

/// Report once per RTT; see the module doc.
pub static PER_RTT: ProgramSpec = ProgramSpec {
    name: "suite_per_rtt",
    source: concat!(
        report_def!(),
        fold_every_ack!(),
        "(when (> Micros Report.rtt) (report) (:= Micros 0))\n"
    ),
};

/// Report once per RTT, and at once on a loss or timeout; see the module doc.
pub static PER_RTT_URGENT: ProgramSpec = ProgramSpec {
    name: "suite_per_rtt_urgent",
    source: concat!(
        report_def!(),
        fold_every_ack!(),
        "(when (|| Report.timeout (> Report.lost 0)) (report) (:= Micros 0))\n",
        "(when (> Micros Report.rtt) (report) (:= Micros 0))\n"
    ),
};

/// [`PER_RTT_URGENT`] with the window following the ACK clock in the datapath between reports;
/// see the module doc.
pub static PER_RTT_URGENT_CLOCKED: ProgramSpec = ProgramSpec {
    name: "suite_per_rtt_urgent_clocked",
    source: concat!(
        report_def!("(ssthresh +infinity)"),
        "(when (|| Flow.was_timeout (> Ack.lost_pkts_sample 0))
    (:= ssthresh 0)
    (fallthrough))
(when (< Cwnd ssthresh)
    (:= Cwnd (min ssthresh (+ Cwnd (+ Ack.bytes_acked Ack.bytes_misordered))))
    (fallthrough))
",
        fold_every_ack!(),
        "(when (> Ack.lost_pkts_sample 0)
    (:= Cwnd (min Cwnd (+ Flow.bytes_in_flight (+ Ack.bytes_acked Ack.bytes_misordered))))
    (fallthrough))
",
        "(when (|| Report.timeout (> Report.lost 0)) (report) (:= Micros 0))\n",
        "(when (> Micros Report.rtt) (report) (:= Micros 0))\n"
    ),
};

/// Report every half RTT; see the module doc.
pub static PER_HALF_RTT: ProgramSpec = ProgramSpec {
    name: "suite_half_rtt",
    source: concat!(
        report_def!(),
        fold_every_ack!(),
        "(when (> Micros (/ Report.rtt 2)) (report) (:= Micros 0))\n"
    ),
};

/// Every program of the library.
pub static ALL: [&ProgramSpec; 4] = [
    &PER_RTT,
    &PER_RTT_URGENT,
    &PER_RTT_URGENT_CLOCKED,
    &PER_HALF_RTT,
];

/// A program reporting every `interval_rtts` RTTs (see the module docs), as a one-program
/// list for a config's `programs`. Intervals are kept to 1/1000 RTT, in `[0.001, 100]`; each
/// distinct one is made once per process.
pub fn every_rtts(interval_rtts: f64) -> Result<&'static [&'static ProgramSpec], String> {
    static MADE: Mutex<BTreeMap<u32, &'static [&'static ProgramSpec]>> =
        Mutex::new(BTreeMap::new());
    static PER_RTT_ONLY: [&ProgramSpec; 1] = [&PER_RTT];
    static PER_HALF_RTT_ONLY: [&ProgramSpec; 1] = [&PER_HALF_RTT];
    let per_mille = (interval_rtts * 1000.0).round();
    if !(1.0..=100_000.0).contains(&per_mille) {
        return Err(format!(
            "the report interval must be in [0.001, 100] RTTs, got {interval_rtts}"
        ));
    }
    let k = per_mille as u32;
    match k {
        500 => return Ok(&PER_HALF_RTT_ONLY),
        1000 => return Ok(&PER_RTT_ONLY),
        _ => {}
    }
    let mut made = MADE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(p) = made.get(&k) {
        return Ok(p);
    }
    let every = "(when (> Micros Report.rtt)";
    let source = PER_RTT.source.replace(
        every,
        &format!("(when (> (* Micros 1000) (* Report.rtt {k}))"),
    );
    let spec: &'static ProgramSpec = Box::leak(Box::new(ProgramSpec {
        name: Box::leak(format!("suite_every_{k}_permille_rtt").into_boxed_str()),
        source: Box::leak(source.into_boxed_str()),
    }));
    let list: &'static [&'static ProgramSpec] = Box::leak(vec![spec].into_boxed_slice());
    made.insert(k, list);
    Ok(list)
}

/// The library's side of a program: registration and the typed decoder.
impl ProgramSpec {
    /// The portus registration map of some programs.
    pub fn registration(programs: &[&'static ProgramSpec]) -> HashMap<&'static str, String> {
        programs
            .iter()
            .map(|p| (p.name, p.source.to_string()))
            .collect()
    }

    /// Decodes a report of this program, installed with `scope`.
    pub fn decode(&self, report: &Report, scope: &Scope) -> Result<Measurement, DecodeError> {
        if report.program_uid != scope.program_uid {
            return Err(DecodeError::Stale {
                report_uid: report.program_uid,
                current_uid: scope.program_uid,
            });
        }
        decode_fields(|field| {
            report
                .get_field(field, scope)
                .map_err(|e| DecodeError::Field { field, reason: e.0 })
        })
    }
}

/// Field values at or above this mean "+infinity" / "no sample" in the datapath.
const INFINITY: u64 = u32::MAX as u64;

/// The one decoder of the library's report layout, over any field source.
pub fn decode_fields(
    mut get: impl FnMut(&'static str) -> Result<u64, DecodeError>,
) -> Result<Measurement, DecodeError> {
    let no_sample = |v: u64| if v >= INFINITY { 0 } else { v };
    Ok(Measurement {
        now_us: get("Report.now")?,
        acked_bytes: get("Report.acked")?,
        sacked_bytes: get("Report.sacked")?,
        lost_pkts: get("Report.lost")?,
        timeout: get("Report.timeout")? != 0,
        rtt_us: no_sample(get("Report.rtt")?),
        min_rtt_us: no_sample(get("Report.minrtt")?),
        rate_incoming_bytes_per_sec: get("Report.rin")?,
        rate_outgoing_bytes_per_sec: get("Report.rout")?,
        inflight_bytes: get("Report.inflight")?,
        cwnd_bytes: get("Report.cwnd")?,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// ccp-kernel holds 10 programs per datapath; libccp accepts 9 in practice.
    const MAX_PROGRAMS: usize = 9;

    #[test]
    fn every_program_compiles_with_portus() {
        for p in ALL {
            let (bin, scope) = portus::lang::compile(p.source.as_bytes(), &[])
                .unwrap_or_else(|e| panic!("{}: {}", p.name, e.0));
            assert!(!bin.instrs.is_empty(), "{}", p.name);
            for f in [
                "Report.acked",
                "Report.lost",
                "Report.timeout",
                "Report.rtt",
                "Report.minrtt",
                "Report.now",
            ] {
                assert!(scope.get(f).is_some(), "{}: no {f}", p.name);
            }
        }
    }

    #[test]
    fn every_rtts_shares_the_library_programs_and_compiles_the_others() {
        assert_eq!(every_rtts(0.5).unwrap()[0].name, PER_HALF_RTT.name);
        assert_eq!(every_rtts(1.0).unwrap()[0].name, PER_RTT.name);
        let p = every_rtts(0.25).unwrap()[0];
        assert!(std::ptr::eq(p, every_rtts(0.25).unwrap()[0]));
        assert!(p.source.contains("(* Report.rtt 250)"), "{}", p.source);
        portus::lang::compile(p.source.as_bytes(), &[]).unwrap_or_else(|e| panic!("{}", e.0));
        assert!(every_rtts(0.0).is_err() && every_rtts(f64::NAN).is_err());
        assert!(every_rtts(1e6).is_err());
    }

    #[test]
    fn the_suite_registers_at_most_nine_programs() {
        let mut names = BTreeSet::new();
        for p in crate::registered_programs() {
            names.insert(p.name);
        }
        assert!(
            names.len() <= MAX_PROGRAMS,
            "{} programs: {names:?}",
            names.len()
        );
        // Every program an algorithm may install is registered by its config.
        for p in crate::registered_programs() {
            assert!(ALL.contains(&p));
        }
    }

    #[test]
    fn decoding_maps_infinity_to_no_sample_and_keeps_units() {
        let values = HashMap::from([
            ("Report.now", 5_000_000),
            ("Report.acked", 14_480),
            ("Report.sacked", 0),
            ("Report.lost", 2),
            ("Report.timeout", 1),
            ("Report.rtt", 50_000),
            ("Report.minrtt", u64::from(u32::MAX)),
            ("Report.rin", 1_250_000),
            ("Report.rout", 1_300_000),
            ("Report.inflight", 60_000),
            ("Report.cwnd", 62_000),
        ]);
        let m = decode_fields(|f| Ok(values[f])).unwrap();
        assert_eq!(m.now_us, 5_000_000);
        assert_eq!(m.acked_bytes, 14_480);
        assert!(m.timeout && m.congestion());
        assert_eq!(m.rtt_us, 50_000);
        assert_eq!(m.min_rtt_us, 0);
        assert_eq!(m.rate_incoming_bytes_per_sec, 1_250_000);
    }

    #[test]
    fn a_missing_field_is_one_typed_error() {
        let err = decode_fields(|field| {
            Err(DecodeError::Field {
                field,
                reason: "absent".into(),
            })
        })
        .unwrap_err();
        assert!(matches!(
            err,
            DecodeError::Field {
                field: "Report.now",
                ..
            }
        ));
    }
}
