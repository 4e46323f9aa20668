//! Per-flow state: registers, the active and staged program, staged register updates, the
//! fallback rule and the CREATE retry schedule.

use super::FlowInfo;
use super::fallback::RenoFallback;
use super::program::{MAX_CONTROL_REGS, implicit};
use super::vm::Registers;
use super::wire::{RawUpdate, reg_type};

/// A program reference that survives table clears: slot plus the table generation it was
/// installed in. A new agent generation invalidates every older reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProgramRef {
    pub(crate) slot: usize,
    pub(crate) generation: u64,
}

/// Register updates staged by UPDATE_FIELD or CHANGE_PROG, applied at the next invocation
/// (as libccp does).
#[derive(Debug, Clone, Default)]
pub(crate) struct Pending {
    control_mask: u16,
    control: [u64; MAX_CONTROL_REGS],
    pub(crate) cwnd: Option<u64>,
    pub(crate) rate: Option<u64>,
}

/// An update that names a register the agent may not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BadUpdate {
    pub(crate) reg_type: u8,
    pub(crate) index: u32,
}

impl Pending {
    /// Checks a whole batch first, then stages it, so a bad update leaves nothing half-applied.
    pub(crate) fn stage(&mut self, updates: &[RawUpdate]) -> Result<(), BadUpdate> {
        for u in updates {
            let ok = match u.reg_type {
                reg_type::NONVOLATILE_CONTROL | reg_type::VOLATILE_CONTROL => {
                    (u.reg_index as usize) < MAX_CONTROL_REGS
                }
                // libccp accepts any implicit index and ignores all but Cwnd and Rate.
                reg_type::IMPLICIT => true,
                _ => false,
            };
            if !ok {
                return Err(BadUpdate {
                    reg_type: u.reg_type,
                    index: u.reg_index,
                });
            }
        }
        for u in updates {
            match u.reg_type {
                reg_type::IMPLICIT if u.reg_index == u32::from(implicit::CWND) => {
                    self.cwnd = Some(u.value);
                }
                reg_type::IMPLICIT if u.reg_index == u32::from(implicit::RATE) => {
                    self.rate = Some(u.value);
                }
                reg_type::IMPLICIT => {}
                _ => {
                    let i = u.reg_index as usize;
                    self.control[i] = u.value;
                    self.control_mask |= 1 << i;
                }
            }
        }
        Ok(())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.control_mask == 0 && self.cwnd.is_none() && self.rate.is_none()
    }

    /// Writes staged control registers into `regs` and clears them.
    pub(crate) fn apply_controls(&mut self, regs: &mut Registers) {
        let mut mask = self.control_mask;
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            regs.set_control(i, self.control[i]);
            mask &= mask - 1;
        }
        self.control_mask = 0;
    }
}

/// One flow.
#[derive(Debug)]
pub struct Connection {
    pub(crate) sid: u32,
    pub(crate) info: FlowInfo,
    pub(crate) regs: Registers,
    pub(crate) program: Option<ProgramRef>,
    pub(crate) staged: Option<ProgramRef>,
    pub(crate) pending: Pending,
    pub(crate) fallback: RenoFallback,
    /// Last window the flow reported (its `snd_cwnd`), bytes.
    pub(crate) last_cwnd: u32,
    /// The agent has not yet taken this flow (no CHANGE_PROG since the last CREATE).
    pub(crate) needs_create: bool,
    /// When the last CREATE went out, ns.
    pub(crate) create_sent_ns: Option<u64>,
    pub(crate) next_create_ns: u64,
    pub(crate) create_backoff_ns: u64,
    pub(crate) faults: u64,
}

impl Connection {
    pub(crate) fn new(sid: u32, info: FlowInfo, retry_initial_ns: u64) -> Self {
        let fallback = RenoFallback::new(info.mss_bytes);
        let last_cwnd = info.init_cwnd_bytes;
        Self {
            sid,
            info,
            regs: Registers::default(),
            program: None,
            staged: None,
            pending: Pending::default(),
            fallback,
            last_cwnd,
            needs_create: true,
            create_sent_ns: None,
            next_create_ns: 0,
            create_backoff_ns: retry_initial_ns,
            faults: 0,
        }
    }

    /// The flow's id as the agent knows it.
    pub fn sid(&self) -> u32 {
        self.sid
    }

    /// What the flow was created with.
    pub fn info(&self) -> &FlowInfo {
        &self.info
    }

    /// Program faults seen on this flow.
    pub fn faults(&self) -> u64 {
        self.faults
    }
}
