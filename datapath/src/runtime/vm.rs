//! The fold-program virtual machine.
//!
//! Semantics follow libccp's `machine.c`, which is the reference (and the oracle of the
//! conformance tests): 64-bit unsigned registers; `add` and `sub` abort the invocation on
//! overflow and underflow; `mul` aborts on libccp's (partial) overflow check; `div` aborts on a
//! zero divisor; `when` clauses run in order and stop at the first true one unless it set
//! `(fallthrough)`; the fallthrough flag, once set, stays set for the rest of the invocation.
//! An aborted invocation leaves registers as they were when it stopped, sets no cwnd or rate
//! and sends no report.

use super::Primitives;
use super::program::{Def, DefKind, Instr, Op, Program, implicit, slot};
use super::program::{MAX_REPORT_REGS, NUM_PRIMITIVES};
use thiserror::Error;

/// libccp's fixed-point denominator for `ewma`.
const EWMA_DENOM: u64 = 10;

/// A program fault. Like libccp, the invocation stops at the faulting instruction.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum VmError {
    /// `add` wrapped around.
    #[error("instruction {instr}: integer overflow in {left} + {right}")]
    AddOverflow {
        /// Instruction index.
        instr: usize,
        /// Left operand.
        left: u64,
        /// Right operand.
        right: u64,
    },
    /// `sub` went below zero.
    #[error("instruction {instr}: integer underflow in {left} - {right}")]
    SubUnderflow {
        /// Instruction index.
        instr: usize,
        /// Left operand.
        left: u64,
        /// Right operand.
        right: u64,
    },
    /// `mul` tripped libccp's overflow check.
    #[error("instruction {instr}: integer overflow in {left} * {right}")]
    MulOverflow {
        /// Instruction index.
        instr: usize,
        /// Left operand.
        left: u64,
        /// Right operand.
        right: u64,
    },
    /// `div` by zero.
    #[error("instruction {instr}: division by zero ({left} / 0)")]
    DivByZero {
        /// Instruction index.
        instr: usize,
        /// Dividend.
        left: u64,
    },
}

/// A connection's register file: report, control, temporary, local, implicit and primitive
/// registers at fixed slots, then the running program's constants (see [`slot`]).
#[derive(Debug, Clone)]
pub struct Registers {
    file: Vec<u64>,
    /// Clock reading (ns) at which `Micros` was zero.
    pub micros_zero_ns: u64,
}

impl Default for Registers {
    fn default() -> Self {
        Self {
            file: vec![0; usize::from(slot::CONST)],
            micros_zero_ns: 0,
        }
    }
}

/// Time as one invocation sees it.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    /// Current clock reading, ns.
    pub now_ns: u64,
    /// Clock reading when the datapath started, ns (`Ack.now` counts from here).
    pub datapath_zero_ns: u64,
}

impl Registers {
    /// Report fields.
    pub fn report(&self) -> &[u64] {
        let r = usize::from(slot::REPORT);
        &self.file[r..r + MAX_REPORT_REGS]
    }

    /// One implicit register (see [`implicit`]).
    pub fn implicit(&self, i: u8) -> u64 {
        self.file[usize::from(slot::IMPLICIT + u16::from(i))]
    }

    /// Sets an implicit register (see [`implicit`]) without side effects.
    pub fn set_implicit(&mut self, i: u8, v: u64) {
        self.file[usize::from(slot::IMPLICIT + u16::from(i))] = v;
    }

    /// Sets a control register.
    pub fn set_control(&mut self, i: usize, v: u64) {
        self.file[usize::from(slot::CONTROL) + i] = v;
    }

    /// Applies the preamble for a program that was just switched to: its constants move in,
    /// volatile fields and volatile controls take their defaults, then non-volatile ones
    /// (libccp `reset_state` followed by `init_register_state`), then `Micros` restarts at zero.
    pub fn start_program(&mut self, program: &Program, now_ns: u64) {
        self.file.truncate(usize::from(slot::CONST));
        self.file.extend_from_slice(&program.consts);
        self.reset_volatile(program);
        for d in &program.defs {
            if matches!(d.kind, DefKind::Report | DefKind::Control) {
                self.write_def(d);
            }
        }
        self.micros_zero_ns = now_ns;
        self.set_implicit(implicit::MICROS, 0);
    }

    /// Resets volatile report fields and volatile controls after a report (libccp `reset_state`).
    pub fn reset_volatile(&mut self, program: &Program) {
        for d in &program.defs {
            if matches!(d.kind, DefKind::VolatileReport | DefKind::VolatileControl) {
                self.write_def(d);
            }
        }
    }

    fn write_def(&mut self, d: &Def) {
        let base = match d.kind {
            DefKind::VolatileReport | DefKind::Report => slot::REPORT,
            DefKind::VolatileControl | DefKind::Control => slot::CONTROL,
        };
        self.file[usize::from(base + u16::from(d.index))] = d.value;
    }

    /// Loads the ACK's measurements into the primitive slots (portus's alphabetical order;
    /// `Flow.rtt_sample_us` reads as `u32::MAX` when there is no sample, as in libccp).
    fn load_prims(&mut self, p: &Primitives, now: Now) {
        let rtt = if p.rtt_sample_us == 0 {
            u64::from(u32::MAX)
        } else {
            p.rtt_sample_us
        };
        let values = [
            u64::from(p.bytes_acked),
            u64::from(p.bytes_misordered),
            u64::from(p.ecn_bytes),
            u64::from(p.ecn_packets),
            u64::from(p.lost_pkts_sample),
            now.now_ns.wrapping_sub(now.datapath_zero_ns) / 1_000,
            u64::from(p.packets_acked),
            u64::from(p.packets_misordered),
            u64::from(p.bytes_in_flight),
            u64::from(p.bytes_pending),
            u64::from(p.packets_in_flight),
            p.rate_incoming,
            p.rate_outgoing,
            rtt,
            u64::from(p.was_timeout),
        ];
        let base = usize::from(slot::PRIM);
        self.file[base..base + NUM_PRIMITIVES].copy_from_slice(&values);
    }

    /// Every slot a validated program names exists once the program has started; a slot
    /// past the end reads as 0 rather than panicking.
    #[inline]
    fn read(&self, at: u16) -> u64 {
        self.file.get(usize::from(at)).copied().unwrap_or(0)
    }

    #[inline]
    fn write(&mut self, at: u16, value: u64, now: Now) {
        if at == slot::MICROS {
            // libccp subtracts the microsecond value from a nanosecond clock; kept as is so
            // programs behave the same on both datapaths (see docs).
            self.micros_zero_ns = now.now_ns.wrapping_sub(value);
        }
        if let Some(r) = self.file.get_mut(usize::from(at)) {
            *r = value;
        }
    }
}

/// Wrap-aware maximum over 32-bit sequence space (libccp `mymax64_wrap`).
fn max_wrap(a: u64, b: u64) -> u64 {
    let (a32, b32) = (a as u32, b as u32);
    let dist = |l: u32, r: u32| {
        if r > l {
            r - l
        } else {
            (u32::MAX - l).wrapping_add(r)
        }
    };
    if a == 0 {
        return b;
    }
    if b == 0 {
        return a;
    }
    if dist(b32, a32) < dist(a32, b32) {
        u64::from(a32)
    } else {
        u64::from(b32)
    }
}

/// libccp `myewma64(a, b, c)`: weight `a` (tenths) on the old value `b`, the rest on `c`.
fn ewma(weight: u64, old: u64, new: u64) -> u64 {
    if old == 0 {
        return new;
    }
    weight
        .wrapping_mul(old)
        .wrapping_add(EWMA_DENOM.wrapping_sub(weight).wrapping_mul(new))
        / EWMA_DENOM
}

#[inline]
fn exec(index: usize, ins: Instr, regs: &mut Registers, now: Now) -> Result<(), VmError> {
    let left = regs.read(ins.left);
    let right = regs.read(ins.right);
    let value = match ins.op {
        Op::Add => {
            let r = left.wrapping_add(right);
            if r < left {
                return Err(VmError::AddOverflow {
                    instr: index,
                    left,
                    right,
                });
            }
            r
        }
        Op::Sub => {
            let r = left.wrapping_sub(right);
            if r > left {
                return Err(VmError::SubUnderflow {
                    instr: index,
                    left,
                    right,
                });
            }
            r
        }
        Op::Mul => {
            let r = left.wrapping_mul(right);
            if r < left && right > 0 {
                return Err(VmError::MulOverflow {
                    instr: index,
                    left,
                    right,
                });
            }
            r
        }
        Op::Div => {
            if right == 0 {
                return Err(VmError::DivByZero { instr: index, left });
            }
            left / right
        }
        Op::Bind => right,
        Op::Equiv => u64::from(left == right),
        Op::Gt => u64::from(left > right),
        Op::Lt => u64::from(left < right),
        Op::Max => left.max(right),
        Op::Min => left.min(right),
        Op::MaxWrap => max_wrap(left, right),
        Op::Ewma => ewma(left, regs.read(ins.ret), right),
        Op::If => {
            if left == 0 {
                return Ok(());
            }
            right
        }
        Op::NotIf => {
            if left != 0 {
                return Ok(());
            }
            right
        }
        // Definitions only live in the preamble; executing one does nothing (as in libccp).
        Op::Def => return Ok(()),
    };
    regs.write(ins.ret, value, now);
    Ok(())
}

/// Runs one invocation of `program`'s `when` clauses over `regs`.
///
/// On success the caller reads `Cwnd`, `Rate` and `__shouldReport` from `regs.implicit`.
pub fn run(
    program: &Program,
    regs: &mut Registers,
    prims: &Primitives,
    now: Now,
) -> Result<(), VmError> {
    regs.load_prims(prims, now);
    regs.set_implicit(implicit::EXPR_FLAG, 0);
    regs.set_implicit(implicit::SHOULD_FALLTHROUGH, 0);
    regs.set_implicit(implicit::SHOULD_REPORT, 0);
    let micros = now.now_ns.wrapping_sub(regs.micros_zero_ns) / 1_000;
    regs.set_implicit(implicit::MICROS, micros);

    for ev in &program.events {
        for i in usize::from(ev.flag_start)..usize::from(ev.flag_end) {
            exec(i, program.instrs[i], regs, now)?;
        }
        if regs.implicit(implicit::EXPR_FLAG) != 0 {
            for i in usize::from(ev.body_start)..usize::from(ev.body_end) {
                exec(i, program.instrs[i], regs, now)?;
            }
        }
        if regs.implicit(implicit::EXPR_FLAG) != 0
            && regs.implicit(implicit::SHOULD_FALLTHROUGH) == 0
        {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_wrap_prefers_the_later_sequence_number() {
        assert_eq!(max_wrap(10, 20), 20);
        assert_eq!(max_wrap(20, 10), 20);
        assert_eq!(
            max_wrap(u64::from(u32::MAX) - 5, 3),
            3,
            "3 comes after 2^32-6"
        );
        assert_eq!(max_wrap(0, 7), 7);
        assert_eq!(max_wrap(7, 0), 7);
    }

    #[test]
    fn ewma_matches_libccp() {
        assert_eq!(ewma(8, 0, 100), 100, "empty register takes the sample");
        assert_eq!(ewma(8, 100, 200), (8 * 100 + 2 * 200) / 10);
        assert_eq!(ewma(10, 100, 200), 100);
    }
}
