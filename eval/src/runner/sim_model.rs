//! The simulator's TCP model for a run, and the environment switches that change it
//! (`docs/eval.md`, "The simulator's switches").

use ccp_datapath::sim::TcpModel;

/// The simulator's TCP model: Linux's ([`TcpModel::default`]), with a receive window whose
/// buffer grows to `CCP_SIM_RMEM_MAX` bytes when that is set (e.g. 33554432, the kernel
/// testbed's `tcp_rmem[2]`; 0: none, the default), without the receivers' SACK compression
/// when `CCP_SIM_SACK_COMPRESSION=off`, for side-by-side runs (`docs/calibration.md`, "The
/// receive window", "SACK compression"), and with the CCP datapath's timing of
/// `CCP_SIM_TIMING` ([`ccp_inline_programs`]). A value it cannot read is reported on stderr
/// and left out.
pub(crate) fn sim_model() -> TcpModel {
    static MODEL: std::sync::OnceLock<TcpModel> = std::sync::OnceLock::new();
    *MODEL.get_or_init(|| {
        let mut model = TcpModel::default();
        if let Some(max) = sim_rmem_max() {
            model.rmem_max_bytes = max;
        }
        match std::env::var("CCP_SIM_SACK_COMPRESSION").as_deref() {
            Ok("on") | Err(_) => {}
            Ok("off") => model.sack_compression = false,
            Ok(v) => eprintln!("CCP_SIM_SACK_COMPRESSION={v:?} is neither on nor off; on"),
        }
        match ccp_inline_programs(std::env::var("CCP_SIM_TIMING").ok().as_deref()) {
            Ok(inline) => model.ccp_inline_programs = inline,
            Err(e) => eprintln!("{e}"),
        }
        if model != TcpModel::default() {
            eprintln!("the simulator's model is not its default: {model:?}");
        }
        model
    })
}

/// [`TcpModel::ccp_inline_programs`] for the CCP datapath whose timing `CCP_SIM_TIMING`
/// names:
/// - unset or `ebpf`, the default: this project's eBPF datapath, whose programs run on each
///   ACK's record after the kernel has sent what the ACK allowed, so a window a program
///   writes applies from the next ACK;
/// - `ccp-kernel`: a datapath that runs its programs inside the kernel's ACK processing, as
///   ccp-kernel does, so a program's window applies on its own ACK.
///
/// Both keep the records' 0-200 µs spread ([`TcpModel::ccp_record_delay_ns`]): with
/// ccp-kernel it stands for a real kernel's timing noise, without which the suite's per-RTT
/// reports meet exact ties on a path whose RTT does not vary. Any other value is an error
/// naming both, and the default applies.
pub(crate) fn ccp_inline_programs(v: Option<&str>) -> Result<bool, String> {
    match v {
        None | Some("ebpf") => Ok(false),
        Some("ccp-kernel") => Ok(true),
        Some(v) => Err(format!(
            "CCP_SIM_TIMING={v:?} is neither ebpf nor ccp-kernel; ebpf"
        )),
    }
}

/// `CCP_SIM_RMEM_MAX`, if set.
fn sim_rmem_max() -> Option<u64> {
    let v = std::env::var("CCP_SIM_RMEM_MAX").ok()?;
    v.trim()
        .parse()
        .map_err(|_| eprintln!("CCP_SIM_RMEM_MAX={v:?} is not a byte count; no receive window"))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ccp_timing_names_the_datapath() {
        assert!(!TcpModel::default().ccp_inline_programs);
        assert_eq!(ccp_inline_programs(None), Ok(false));
        assert_eq!(ccp_inline_programs(Some("ebpf")), Ok(false));
        assert_eq!(ccp_inline_programs(Some("ccp-kernel")), Ok(true));
        let e = ccp_inline_programs(Some("kernel")).expect_err("not a timing");
        assert!(e.contains("\"kernel\"") && e.contains("ccp-kernel"), "{e}");
    }
}
