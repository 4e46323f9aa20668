//! Fold programs: the validated, executable form of an INSTALL message.
//!
//! Validation happens once, at install: every opcode is known, every register index is inside
//! its register file, no instruction writes an immediate or a primitive, and every `when`
//! clause points inside the instruction list. The VM ([`super::vm`]) then runs without bounds
//! surprises on the per-ACK path.

use super::wire::{RawEvent, RawInstr, RawReg, reg_type};
use thiserror::Error;

/// Report registers a program may define (portus serializes indices 0..=15).
pub const MAX_REPORT_REGS: usize = 16;
/// Control registers a program may define (portus serializes indices 0..=15).
pub const MAX_CONTROL_REGS: usize = 16;
/// Temporary registers (portus serializes indices 0..=15; libccp stores 8).
pub const MAX_TMP_REGS: usize = 16;
/// Local registers (portus emits indices 0..=5; libccp stores 8).
pub const MAX_LOCAL_REGS: usize = 8;
/// Implicit registers: `__eventFlag`, `__shouldContinue`, `__shouldReport`, `Micros`, `Cwnd`, `Rate`.
pub const NUM_IMPLICIT_REGS: usize = 6;
/// Measurement primitives (`Ack.*` and `Flow.*`).
pub const NUM_PRIMITIVES: usize = 15;

/// Implicit register indices (libccp `ccp_priv.h`).
pub mod implicit {
    /// Result of the current `when` condition.
    pub const EXPR_FLAG: u8 = 0;
    /// Set by `(fallthrough)`.
    pub const SHOULD_FALLTHROUGH: u8 = 1;
    /// Set by `(report)`.
    pub const SHOULD_REPORT: u8 = 2;
    /// `Micros`: microseconds since the program started or the register was last written.
    pub const MICROS: u8 = 3;
    /// `Cwnd`, bytes.
    pub const CWND: u8 = 4;
    /// `Rate`, bytes per second.
    pub const RATE: u8 = 5;
}

/// Primitive register indices, in portus's alphabetical order.
pub mod prim {
    /// `Ack.bytes_acked`
    pub const ACK_BYTES_ACKED: u8 = 0;
    /// `Ack.bytes_misordered`
    pub const ACK_BYTES_MISORDERED: u8 = 1;
    /// `Ack.ecn_bytes`
    pub const ACK_ECN_BYTES: u8 = 2;
    /// `Ack.ecn_packets`
    pub const ACK_ECN_PACKETS: u8 = 3;
    /// `Ack.lost_pkts_sample`
    pub const ACK_LOST_PKTS_SAMPLE: u8 = 4;
    /// `Ack.now`: microseconds since the datapath started.
    pub const ACK_NOW: u8 = 5;
    /// `Ack.packets_acked`
    pub const ACK_PACKETS_ACKED: u8 = 6;
    /// `Ack.packets_misordered`
    pub const ACK_PACKETS_MISORDERED: u8 = 7;
    /// `Flow.bytes_in_flight`
    pub const FLOW_BYTES_IN_FLIGHT: u8 = 8;
    /// `Flow.bytes_pending`
    pub const FLOW_BYTES_PENDING: u8 = 9;
    /// `Flow.packets_in_flight`
    pub const FLOW_PACKETS_IN_FLIGHT: u8 = 10;
    /// `Flow.rate_incoming`
    pub const FLOW_RATE_INCOMING: u8 = 11;
    /// `Flow.rate_outgoing`
    pub const FLOW_RATE_OUTGOING: u8 = 12;
    /// `Flow.rtt_sample_us` (reads as `u32::MAX` when no sample: libccp's rule)
    pub const FLOW_RTT_SAMPLE_US: u8 = 13;
    /// `Flow.was_timeout`
    pub const FLOW_WAS_TIMEOUT: u8 = 14;
}

/// Where each register lives in a connection's flat register file: every operand of an
/// executable instruction is an index into that file, immediates included (they live in a
/// per-program constant area copied in when the program starts), so reading an operand is
/// one load, with no branch on its kind.
pub mod slot {
    use super::{MAX_CONTROL_REGS, MAX_LOCAL_REGS, MAX_REPORT_REGS, MAX_TMP_REGS};
    use super::{NUM_IMPLICIT_REGS, NUM_PRIMITIVES};

    /// First report register.
    pub const REPORT: u16 = 0;
    /// First control register.
    pub const CONTROL: u16 = REPORT + MAX_REPORT_REGS as u16;
    /// First temporary.
    pub const TMP: u16 = CONTROL + MAX_CONTROL_REGS as u16;
    /// First local.
    pub const LOCAL: u16 = TMP + MAX_TMP_REGS as u16;
    /// First implicit register.
    pub const IMPLICIT: u16 = LOCAL + MAX_LOCAL_REGS as u16;
    /// First primitive (loaded from the ACK's measurements at each invocation).
    pub const PRIM: u16 = IMPLICIT + NUM_IMPLICIT_REGS as u16;
    /// First constant of the running program.
    pub const CONST: u16 = PRIM + NUM_PRIMITIVES as u16;
    /// `Micros`, whose writes also move the time origin.
    pub const MICROS: u16 = IMPLICIT + super::implicit::MICROS as u16;
}

/// The instruction set (opcodes as portus serializes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    /// `ret = left + right`; overflow aborts the invocation.
    Add = 0,
    /// `ret = right`.
    Bind = 1,
    /// A register definition with its default value (only in the preamble).
    Def = 2,
    /// `ret = left / right`; division by zero aborts the invocation.
    Div = 3,
    /// `ret = (left == right)`.
    Equiv = 4,
    /// `ret = (left * ret + (10 - left) * right) / 10`, or `right` when `ret` is 0.
    Ewma = 5,
    /// `ret = (left > right)`.
    Gt = 6,
    /// `if left { ret = right }`.
    If = 7,
    /// `ret = (left < right)`.
    Lt = 8,
    /// `ret = max(left, right)`.
    Max = 9,
    /// `ret = max(left, right)` over 32-bit sequence space (wrap-aware).
    MaxWrap = 10,
    /// `ret = min(left, right)`.
    Min = 11,
    /// `ret = left * right`; libccp's overflow check aborts the invocation.
    Mul = 12,
    /// `if !left { ret = right }`.
    NotIf = 13,
    /// `ret = left - right`; underflow aborts the invocation.
    Sub = 14,
}

impl Op {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Op::Add,
            1 => Op::Bind,
            2 => Op::Def,
            3 => Op::Div,
            4 => Op::Equiv,
            5 => Op::Ewma,
            6 => Op::Gt,
            7 => Op::If,
            8 => Op::Lt,
            9 => Op::Max,
            10 => Op::MaxWrap,
            11 => Op::Min,
            12 => Op::Mul,
            13 => Op::NotIf,
            14 => Op::Sub,
            _ => return None,
        })
    }
}

/// A register operand, validated against its register file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reg {
    /// An immediate (32-bit on the wire, zero-extended).
    Imm(u64),
    /// A report register.
    Report(u8),
    /// A control register.
    Control(u8),
    /// A temporary register.
    Tmp(u8),
    /// A local register.
    Local(u8),
    /// A measurement primitive (read-only).
    Prim(u8),
    /// An implicit register.
    Implicit(u8),
}

/// One executable instruction: operands are register-file slots (see [`slot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instr {
    /// Operation.
    pub op: Op,
    /// Destination slot.
    pub ret: u16,
    /// Left operand slot.
    pub left: u16,
    /// Right operand slot.
    pub right: u16,
}

impl Reg {
    /// The register-file slot of a register; immediates get a slot in `consts`.
    fn slot(self, consts: &mut Vec<u64>) -> u16 {
        match self {
            Reg::Imm(v) => {
                let i = consts.iter().position(|&c| c == v).unwrap_or_else(|| {
                    consts.push(v);
                    consts.len() - 1
                });
                slot::CONST + i as u16
            }
            Reg::Report(i) => slot::REPORT + u16::from(i),
            Reg::Control(i) => slot::CONTROL + u16::from(i),
            Reg::Tmp(i) => slot::TMP + u16::from(i),
            Reg::Local(i) => slot::LOCAL + u16::from(i),
            Reg::Implicit(i) => slot::IMPLICIT + u16::from(i),
            Reg::Prim(i) => slot::PRIM + u16::from(i),
        }
    }
}

/// A `when` clause: condition instructions then body instructions, as index ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// First condition instruction.
    pub flag_start: u16,
    /// One past the last condition instruction.
    pub flag_end: u16,
    /// First body instruction.
    pub body_start: u16,
    /// One past the last body instruction.
    pub body_end: u16,
}

/// How a defined register behaves at program start and after each report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefKind {
    /// Report field reset after every report.
    VolatileReport,
    /// Report field kept across reports.
    Report,
    /// Control register reset after every report.
    VolatileControl,
    /// Control register kept across reports.
    Control,
}

/// A register definition from the program preamble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Def {
    /// Register behaviour.
    pub kind: DefKind,
    /// Register index.
    pub index: u8,
    /// Default value (`+infinity` arrives as `u32::MAX`).
    pub value: u64,
}

/// A validated fold program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// Uid the agent refers to it by.
    pub uid: u32,
    /// Definitions from the preamble, in order.
    pub defs: Vec<Def>,
    /// `when` clauses, in order.
    pub events: Vec<Event>,
    /// All instructions (preamble included, so event indices match the wire).
    pub instrs: Vec<Instr>,
    /// Distinct immediates, placed in the register file from [`slot::CONST`] on.
    pub consts: Vec<u64>,
    /// Report fields sent in each MEASURE.
    pub num_to_return: usize,
}

/// Why an INSTALL could not become a program.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProgramError {
    /// Unknown opcode.
    #[error("instruction {index}: unknown opcode {opcode}")]
    BadOpcode {
        /// Instruction position.
        index: usize,
        /// Opcode found.
        opcode: u8,
    },
    /// Unknown register type or index outside its register file.
    #[error("instruction {index}: register (type {reg_type}, index {value}) is out of range")]
    BadRegister {
        /// Instruction position.
        index: usize,
        /// Register type byte.
        reg_type: u8,
        /// Register index.
        value: u32,
    },
    /// An instruction writes an immediate or a primitive.
    #[error("instruction {index}: cannot write to register type {reg_type}")]
    ReadOnlyDestination {
        /// Instruction position.
        index: usize,
        /// Register type byte.
        reg_type: u8,
    },
    /// A `when` clause points outside the instructions.
    #[error("event {index}: instruction range is outside the program")]
    BadEventRange {
        /// Event position.
        index: usize,
    },
    /// More report fields than a MEASURE can carry.
    #[error("program defines {0} report fields (limit {MAX_REPORT_REGS})")]
    TooManyReportFields(usize),
}

fn decode_reg(index: usize, raw: RawReg) -> Result<Reg, ProgramError> {
    let bad = || ProgramError::BadRegister {
        index,
        reg_type: raw.reg_type,
        value: raw.value,
    };
    let idx = |limit: usize| -> Result<u8, ProgramError> {
        if (raw.value as usize) < limit {
            Ok(raw.value as u8)
        } else {
            Err(bad())
        }
    };
    Ok(match raw.reg_type {
        reg_type::IMMEDIATE => Reg::Imm(u64::from(raw.value)),
        reg_type::NONVOLATILE_CONTROL | reg_type::VOLATILE_CONTROL => {
            Reg::Control(idx(MAX_CONTROL_REGS)?)
        }
        reg_type::IMPLICIT => Reg::Implicit(idx(NUM_IMPLICIT_REGS)?),
        reg_type::LOCAL => Reg::Local(idx(MAX_LOCAL_REGS)?),
        reg_type::PRIMITIVE => Reg::Prim(idx(NUM_PRIMITIVES)?),
        reg_type::VOLATILE_REPORT | reg_type::NONVOLATILE_REPORT => {
            Reg::Report(idx(MAX_REPORT_REGS)?)
        }
        reg_type::TMP => Reg::Tmp(idx(MAX_TMP_REGS)?),
        _ => return Err(bad()),
    })
}

/// libccp writes `u32::MAX` for a default of `0x3fffffff` (its historical infinity marker).
fn def_value(v: u64) -> u64 {
    if v == 0x3fff_ffff {
        u64::from(u32::MAX)
    } else {
        v
    }
}

impl Program {
    /// Validates an INSTALL's events and instructions.
    pub fn from_raw(
        uid: u32,
        events: &[RawEvent],
        instrs: &[RawInstr],
    ) -> Result<Self, ProgramError> {
        let mut out = Vec::with_capacity(instrs.len());
        let mut consts = Vec::new();
        let mut decoded = Vec::with_capacity(instrs.len());
        for (i, raw) in instrs.iter().enumerate() {
            let op = Op::from_u8(raw.opcode).ok_or(ProgramError::BadOpcode {
                index: i,
                opcode: raw.opcode,
            })?;
            if matches!(raw.ret.reg_type, reg_type::IMMEDIATE | reg_type::PRIMITIVE) {
                return Err(ProgramError::ReadOnlyDestination {
                    index: i,
                    reg_type: raw.ret.reg_type,
                });
            }
            let (ret, left, right) = (
                decode_reg(i, raw.ret)?,
                decode_reg(i, raw.left)?,
                decode_reg(i, raw.right)?,
            );
            decoded.push((op, left, right));
            out.push(Instr {
                op,
                ret: ret.slot(&mut consts),
                left: left.slot(&mut consts),
                right: right.slot(&mut consts),
            });
        }

        // The preamble: leading DEF instructions (libccp stops at the first non-DEF).
        let mut defs = Vec::new();
        let mut num_to_return = 0;
        let mut saw_non_def = false;
        for (raw, &(op, left, right)) in instrs.iter().zip(&decoded) {
            if op != Op::Def {
                saw_non_def = true;
                break;
            }
            let kind = match raw.left.reg_type {
                reg_type::VOLATILE_REPORT => DefKind::VolatileReport,
                reg_type::NONVOLATILE_REPORT => DefKind::Report,
                reg_type::VOLATILE_CONTROL => DefKind::VolatileControl,
                reg_type::NONVOLATILE_CONTROL => DefKind::Control,
                _ => continue,
            };
            if matches!(kind, DefKind::VolatileReport | DefKind::Report) {
                num_to_return += 1;
            }
            let (Reg::Report(index) | Reg::Control(index)) = left else {
                continue;
            };
            let value = match right {
                Reg::Imm(v) => def_value(v),
                _ => 0,
            };
            defs.push(Def { kind, index, value });
        }
        // libccp only records the count once it sees the first non-DEF instruction.
        if !saw_non_def {
            num_to_return = 0;
        }
        if num_to_return > MAX_REPORT_REGS {
            return Err(ProgramError::TooManyReportFields(num_to_return));
        }

        let n = out.len();
        let range = |index: usize, start: u32, len: u32| -> Result<(u16, u16), ProgramError> {
            let end = u64::from(start) + u64::from(len);
            if end > n as u64 {
                return Err(ProgramError::BadEventRange { index });
            }
            Ok((start as u16, end as u16))
        };
        let mut evs = Vec::with_capacity(events.len());
        for (i, e) in events.iter().enumerate() {
            let (flag_start, flag_end) = range(i, e.flag_idx, e.num_flag_instrs)?;
            let (body_start, body_end) = range(i, e.body_idx, e.num_body_instrs)?;
            evs.push(Event {
                flag_start,
                flag_end,
                body_start,
                body_end,
            });
        }
        Ok(Program {
            uid,
            defs,
            events: evs,
            instrs: out,
            consts,
            num_to_return,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(opcode: u8, ret: (u8, u32), left: (u8, u32), right: (u8, u32)) -> RawInstr {
        let r = |(t, v): (u8, u32)| RawReg {
            reg_type: t,
            value: v,
        };
        RawInstr {
            opcode,
            ret: r(ret),
            left: r(left),
            right: r(right),
        }
    }

    #[test]
    fn out_of_range_registers_are_rejected_at_install() {
        let i = raw(
            1,
            (reg_type::VOLATILE_REPORT, 16),
            (reg_type::VOLATILE_REPORT, 16),
            (1, 0),
        );
        assert!(matches!(
            Program::from_raw(1, &[], &[i]),
            Err(ProgramError::BadRegister { index: 0, .. })
        ));
        let i = raw(
            1,
            (reg_type::TMP, 0),
            (reg_type::TMP, 0),
            (reg_type::PRIMITIVE, 15),
        );
        assert!(matches!(
            Program::from_raw(1, &[], &[i]),
            Err(ProgramError::BadRegister { .. })
        ));
        let i = raw(1, (reg_type::TMP, 0), (reg_type::TMP, 0), (42, 0));
        assert!(matches!(
            Program::from_raw(1, &[], &[i]),
            Err(ProgramError::BadRegister { .. })
        ));
    }

    #[test]
    fn writes_to_immediates_and_primitives_are_rejected() {
        let i = raw(
            1,
            (reg_type::PRIMITIVE, 0),
            (reg_type::PRIMITIVE, 0),
            (1, 3),
        );
        assert!(matches!(
            Program::from_raw(1, &[], &[i]),
            Err(ProgramError::ReadOnlyDestination { .. })
        ));
    }

    #[test]
    fn event_ranges_must_fit() {
        let i = raw(1, (reg_type::IMPLICIT, 0), (reg_type::IMPLICIT, 0), (1, 1));
        let e = RawEvent {
            flag_idx: 0,
            num_flag_instrs: 1,
            body_idx: 1,
            num_body_instrs: 1,
        };
        assert_eq!(
            Program::from_raw(1, &[e], &[i]),
            Err(ProgramError::BadEventRange { index: 0 })
        );
        let e = RawEvent {
            flag_idx: u32::MAX,
            num_flag_instrs: u32::MAX,
            body_idx: 0,
            num_body_instrs: 0,
        };
        assert_eq!(
            Program::from_raw(1, &[e], &[i]),
            Err(ProgramError::BadEventRange { index: 0 })
        );
    }

    #[test]
    fn preamble_becomes_defs_and_counts_report_fields() {
        let instrs = [
            raw(2, (5, 0), (5, 0), (1, 0)),
            raw(2, (6, 1), (6, 1), (1, u32::MAX)),
            raw(2, (0, 0), (0, 0), (1, 0x3fff_ffff)),
            raw(1, (2, 0), (2, 0), (1, 1)),
        ];
        let p = Program::from_raw(3, &[], &instrs).unwrap();
        assert_eq!(p.num_to_return, 2);
        assert_eq!(p.defs.len(), 3);
        assert_eq!(
            p.defs[1],
            Def {
                kind: DefKind::Report,
                index: 1,
                value: u64::from(u32::MAX)
            }
        );
        assert_eq!(p.defs[2].value, u64::from(u32::MAX));
    }
}
