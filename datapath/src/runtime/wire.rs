//! The CCP wire format, as libccp speaks it and portus serializes it.
//!
//! Every message starts with an 8-byte header: message type (`u16`), total length including the
//! header (`u16`) and socket id (`u32`), all little-endian. The datapath decodes the three
//! messages the agent sends (INSTALL, UPDATE_FIELD, CHANGE_PROG) and encodes the three it sends
//! (READY, CREATE, MEASURE).
//!
//! Decoding never trusts a length field: every count is checked against the bytes present and
//! against the datapath's limits before anything is allocated, and a bad message becomes a
//! [`WireError`] that names what was wrong.

use thiserror::Error;

use super::FlowInfo;

/// Length of the common header.
pub const HEADER_LEN: usize = 8;
/// Largest message libccp accepts (`BIGGEST_MSG_SIZE`); anything longer is rejected.
pub const MAX_MSG_LEN: usize = 32_678;
/// Size of a CREATE message.
pub const CREATE_MSG_LEN: usize = 96;
/// Size of a READY message.
pub const READY_MSG_LEN: usize = 12;
/// Length of the NUL-padded algorithm name in a CREATE message.
pub const CONG_ALG_LEN: usize = 64;
/// Size of one serialized event or instruction in an INSTALL message.
const INSTALL_ITEM_LEN: usize = 16;
/// Size of one serialized `(register, value)` update.
const UPDATE_LEN: usize = 13;

/// Message type numbers (libccp `serialize.h`).
pub mod msg_type {
    /// Datapath -> agent: a new flow.
    pub const CREATE: u16 = 0;
    /// Datapath -> agent: a report (or, with zero fields, a flow close).
    pub const MEASURE: u16 = 1;
    /// Agent -> datapath: install a fold program.
    pub const INSTALL: u16 = 2;
    /// Agent -> datapath: update control registers, cwnd or rate.
    pub const UPDATE_FIELD: u16 = 3;
    /// Agent -> datapath: switch a flow's program, with register updates.
    pub const CHANGE_PROG: u16 = 4;
    /// Datapath -> agent: a datapath (re)started.
    pub const READY: u16 = 5;
}

/// Errors decoding a message from the agent.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum WireError {
    /// Fewer bytes than the message needs.
    #[error("truncated message: need {needed} bytes, have {have}")]
    Truncated {
        /// Bytes the header or counts require.
        needed: usize,
        /// Bytes present.
        have: usize,
    },
    /// The header claims a length beyond what the datapath accepts.
    #[error("oversized message: {len} bytes (limit {MAX_MSG_LEN})")]
    Oversized {
        /// Claimed length.
        len: usize,
    },
    /// The header's length is smaller than the header itself.
    #[error("header length {len} is shorter than the header")]
    BadLength {
        /// Claimed length.
        len: usize,
    },
    /// A message type the datapath does not read.
    #[error("unknown or unexpected message type {0}")]
    UnknownType(u16),
    /// An opcode outside the instruction set.
    #[error("instruction {index}: unknown opcode {opcode}")]
    BadOpcode {
        /// Instruction position in the program.
        index: usize,
        /// The opcode found.
        opcode: u8,
    },
    /// A register type byte outside the register kinds.
    #[error("instruction {index}: unknown register type {reg_type}")]
    BadRegisterType {
        /// Instruction position in the program (or update position).
        index: usize,
        /// The type byte found.
        reg_type: u8,
    },
}

/// A raw register reference as serialized: type byte and index (or immediate value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawReg {
    /// Register kind (see [`reg_type`]).
    pub reg_type: u8,
    /// Register index, or the immediate value for immediates.
    pub value: u32,
}

/// Register type numbers (libccp `ccp_priv.h`, portus `lang/serialize.rs`).
pub mod reg_type {
    /// Control register, not reset on report.
    pub const NONVOLATILE_CONTROL: u8 = 0;
    /// Immediate value.
    pub const IMMEDIATE: u8 = 1;
    /// Implicit register (`__eventFlag`, `__shouldContinue`, `__shouldReport`, `Micros`, `Cwnd`, `Rate`).
    pub const IMPLICIT: u8 = 2;
    /// Local variable.
    pub const LOCAL: u8 = 3;
    /// Per-ACK measurement primitive (`Ack.*`, `Flow.*`).
    pub const PRIMITIVE: u8 = 4;
    /// Report field reset to its default after each report.
    pub const VOLATILE_REPORT: u8 = 5;
    /// Report field kept across reports.
    pub const NONVOLATILE_REPORT: u8 = 6;
    /// Temporary register.
    pub const TMP: u8 = 7;
    /// Control register reset to its default after each report.
    pub const VOLATILE_CONTROL: u8 = 8;
}

/// One serialized instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawInstr {
    /// Opcode (see `program::Op`).
    pub opcode: u8,
    /// Destination register.
    pub ret: RawReg,
    /// Left operand.
    pub left: RawReg,
    /// Right operand.
    pub right: RawReg,
}

/// One serialized `when` clause: where its condition and body instructions are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawEvent {
    /// Index of the first condition instruction.
    pub flag_idx: u32,
    /// Number of condition instructions.
    pub num_flag_instrs: u32,
    /// Index of the first body instruction.
    pub body_idx: u32,
    /// Number of body instructions.
    pub num_body_instrs: u32,
}

/// One register update carried by UPDATE_FIELD or CHANGE_PROG.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawUpdate {
    /// Register type byte.
    pub reg_type: u8,
    /// Register index.
    pub reg_index: u32,
    /// New value.
    pub value: u64,
}

/// A decoded message from the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentMsg {
    /// Install a program for every flow.
    Install {
        /// Program uid the agent will refer to.
        program_uid: u32,
        /// The `when` clauses.
        events: Vec<RawEvent>,
        /// All instructions, definitions first.
        instrs: Vec<RawInstr>,
    },
    /// Stage register updates on one flow.
    UpdateField {
        /// Flow.
        sid: u32,
        /// Updates to stage.
        updates: Vec<RawUpdate>,
    },
    /// Switch one flow to another installed program.
    ChangeProg {
        /// Flow.
        sid: u32,
        /// Program to switch to.
        program_uid: u32,
        /// Updates applied together with the switch.
        updates: Vec<RawUpdate>,
    },
}

/// Limits the decoder enforces before allocating.
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    /// Most `when` clauses in one program.
    pub max_events: usize,
    /// Most instructions in one program.
    pub max_instrs: usize,
    /// Most updates in one message.
    pub max_updates: usize,
}

impl Default for DecodeLimits {
    /// libccp's limits: 256 expressions, 256 instructions, 222 mutable registers.
    fn default() -> Self {
        Self {
            max_events: 256,
            max_instrs: 256,
            max_updates: 222,
        }
    }
}

/// Errors that concern counts, reported separately so callers can log them precisely.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum LimitError {
    /// Too many `when` clauses.
    #[error("program has {0} events, more than the datapath accepts")]
    TooManyEvents(usize),
    /// Too many instructions.
    #[error("program has {0} instructions, more than the datapath accepts")]
    TooManyInstrs(usize),
    /// Too many updates.
    #[error("message carries {0} updates, more than the datapath accepts")]
    TooManyUpdates(usize),
}

/// Either kind of decode failure.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Malformed bytes.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// Well-formed but over a limit.
    #[error(transparent)]
    Limit(#[from] LimitError),
}

/// The common header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Message type.
    pub msg_type: u16,
    /// Total length including the header.
    pub len: usize,
    /// Socket (flow) id.
    pub sid: u32,
}

/// A little-endian reader over a byte slice that reports truncation instead of panicking.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let end = self.pos + N;
        let bytes = self.buf.get(self.pos..end).ok_or(WireError::Truncated {
            needed: end,
            have: self.buf.len(),
        })?;
        self.pos = end;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.take()?))
    }

    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.take()?))
    }

    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.take()?))
    }

    fn need(&self, more: usize) -> Result<(), WireError> {
        let needed = self.pos.saturating_add(more);
        if needed > self.buf.len() {
            return Err(WireError::Truncated {
                needed,
                have: self.buf.len(),
            });
        }
        Ok(())
    }

    fn reg(&mut self) -> Result<RawReg, WireError> {
        Ok(RawReg {
            reg_type: self.u8()?,
            value: self.u32()?,
        })
    }
}

/// Reads the header of the message at the start of `buf` and checks its length against `buf`.
pub fn decode_header(buf: &[u8]) -> Result<Header, WireError> {
    let mut r = Reader::new(buf);
    let msg_type = r.u16()?;
    let len = usize::from(r.u16()?);
    let sid = r.u32()?;
    if len < HEADER_LEN {
        return Err(WireError::BadLength { len });
    }
    if len > MAX_MSG_LEN {
        return Err(WireError::Oversized { len });
    }
    if len > buf.len() {
        return Err(WireError::Truncated {
            needed: len,
            have: buf.len(),
        });
    }
    Ok(Header { msg_type, len, sid })
}

/// Decodes one agent message from the start of `buf`; returns it and the bytes it used.
///
/// Only INSTALL, UPDATE_FIELD and CHANGE_PROG are accepted; any other type is
/// [`WireError::UnknownType`] (the caller may skip `header.len` bytes and go on).
pub fn decode_agent_msg(
    buf: &[u8],
    limits: &DecodeLimits,
) -> Result<(AgentMsg, usize), DecodeError> {
    let hdr = decode_header(buf)?;
    let body = &buf[HEADER_LEN..hdr.len];
    let msg = match hdr.msg_type {
        msg_type::INSTALL => decode_install(body, limits)?,
        msg_type::UPDATE_FIELD => {
            let mut r = Reader::new(body);
            let n = r.u32()? as usize;
            let updates = decode_updates(&mut r, n, limits)?;
            AgentMsg::UpdateField {
                sid: hdr.sid,
                updates,
            }
        }
        msg_type::CHANGE_PROG => {
            let mut r = Reader::new(body);
            let program_uid = r.u32()?;
            let n = r.u32()? as usize;
            let updates = decode_updates(&mut r, n, limits)?;
            AgentMsg::ChangeProg {
                sid: hdr.sid,
                program_uid,
                updates,
            }
        }
        other => return Err(WireError::UnknownType(other).into()),
    };
    Ok((msg, hdr.len))
}

fn decode_install(body: &[u8], limits: &DecodeLimits) -> Result<AgentMsg, DecodeError> {
    let mut r = Reader::new(body);
    let program_uid = r.u32()?;
    let num_events = r.u32()? as usize;
    let num_instrs = r.u32()? as usize;
    if num_events > limits.max_events {
        return Err(LimitError::TooManyEvents(num_events).into());
    }
    if num_instrs > limits.max_instrs {
        return Err(LimitError::TooManyInstrs(num_instrs).into());
    }
    r.need((num_events + num_instrs) * INSTALL_ITEM_LEN)?;
    let mut events = Vec::with_capacity(num_events);
    for _ in 0..num_events {
        events.push(RawEvent {
            flag_idx: r.u32()?,
            num_flag_instrs: r.u32()?,
            body_idx: r.u32()?,
            num_body_instrs: r.u32()?,
        });
    }
    let mut instrs = Vec::with_capacity(num_instrs);
    for _ in 0..num_instrs {
        let opcode = r.u8()?;
        let ret = r.reg()?;
        let left = r.reg()?;
        let right = r.reg()?;
        instrs.push(RawInstr {
            opcode,
            ret,
            left,
            right,
        });
    }
    Ok(AgentMsg::Install {
        program_uid,
        events,
        instrs,
    })
}

fn decode_updates(
    r: &mut Reader<'_>,
    n: usize,
    limits: &DecodeLimits,
) -> Result<Vec<RawUpdate>, DecodeError> {
    if n > limits.max_updates {
        return Err(LimitError::TooManyUpdates(n).into());
    }
    r.need(n * UPDATE_LEN)?;
    let mut updates = Vec::with_capacity(n);
    for _ in 0..n {
        updates.push(RawUpdate {
            reg_type: r.u8()?,
            reg_index: r.u32()?,
            value: r.u64()?,
        });
    }
    Ok(updates)
}

fn put_header(out: &mut Vec<u8>, msg_type: u16, len: usize, sid: u32) {
    out.extend_from_slice(&msg_type.to_le_bytes());
    // Every message this module encodes is bounded well below u16::MAX (see callers).
    out.extend_from_slice(&(len as u16).to_le_bytes());
    out.extend_from_slice(&sid.to_le_bytes());
}

/// Encodes READY (datapath id), replacing the contents of `out`.
pub fn encode_ready(out: &mut Vec<u8>, id: u32) {
    out.clear();
    put_header(out, msg_type::READY, READY_MSG_LEN, 0);
    out.extend_from_slice(&id.to_le_bytes());
}

/// Encodes CREATE for flow `sid`, replacing the contents of `out`.
/// Names longer than 63 bytes are cut at a character boundary.
pub fn encode_create(out: &mut Vec<u8>, sid: u32, info: &FlowInfo) {
    out.clear();
    put_header(out, msg_type::CREATE, CREATE_MSG_LEN, sid);
    for v in [
        info.init_cwnd_bytes,
        info.mss_bytes,
        info.src_ip,
        info.src_port,
        info.dst_ip,
        info.dst_port,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let mut name = [0u8; CONG_ALG_LEN];
    if let Some(alg) = &info.alg {
        let mut end = alg.len().min(CONG_ALG_LEN - 1);
        while !alg.is_char_boundary(end) {
            end -= 1;
        }
        name[..end].copy_from_slice(&alg.as_bytes()[..end]);
    }
    out.extend_from_slice(&name);
}

/// Encodes MEASURE for flow `sid`, replacing the contents of `out`.
///
/// A MEASURE with no fields and program uid 0 is how a datapath tells the agent a flow closed.
/// At most [`super::program::MAX_REPORT_REGS`] fields are written.
pub fn encode_measure(out: &mut Vec<u8>, sid: u32, program_uid: u32, fields: &[u64]) {
    out.clear();
    let fields = &fields[..fields.len().min(super::program::MAX_REPORT_REGS)];
    let len = HEADER_LEN + 8 + fields.len() * 8;
    put_header(out, msg_type::MEASURE, len, sid);
    out.extend_from_slice(&program_uid.to_le_bytes());
    out.extend_from_slice(&(fields.len() as u32).to_le_bytes());
    for f in fields {
        out.extend_from_slice(&f.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> DecodeLimits {
        DecodeLimits::default()
    }

    #[test]
    fn header_rejects_short_and_long_lengths() {
        assert_eq!(
            decode_header(&[2, 0, 4, 0, 0, 0, 0, 0]),
            Err(WireError::BadLength { len: 4 })
        );
        assert_eq!(
            decode_header(&[2, 0, 0xff, 0xff, 0, 0, 0, 0]),
            Err(WireError::Oversized { len: 0xffff })
        );
        assert_eq!(
            decode_header(&[2, 0, 20, 0, 0, 0, 0, 0]),
            Err(WireError::Truncated {
                needed: 20,
                have: 8
            })
        );
        assert!(matches!(
            decode_header(&[2, 0, 20]),
            Err(WireError::Truncated { .. })
        ));
    }

    #[test]
    fn install_counts_are_checked_before_allocation() {
        // Claims a billion instructions in a 20-byte message.
        let mut m = vec![2, 0, 20, 0, 1, 0, 0, 0];
        m.extend_from_slice(&7u32.to_le_bytes());
        m.extend_from_slice(&0u32.to_le_bytes());
        m.extend_from_slice(&1_000_000_000u32.to_le_bytes());
        assert_eq!(
            decode_agent_msg(&m, &limits()),
            Err(DecodeError::Limit(LimitError::TooManyInstrs(1_000_000_000)))
        );
        // Within limits but more than the bytes present.
        let mut m = vec![2, 0, 20, 0, 1, 0, 0, 0];
        m.extend_from_slice(&7u32.to_le_bytes());
        m.extend_from_slice(&1u32.to_le_bytes());
        m.extend_from_slice(&3u32.to_le_bytes());
        assert!(matches!(
            decode_agent_msg(&m, &limits()),
            Err(DecodeError::Wire(WireError::Truncated { .. }))
        ));
    }

    #[test]
    fn unknown_type_is_an_error_not_a_panic() {
        let mut m = vec![9, 0, 12, 0, 0, 0, 0, 0];
        m.extend_from_slice(&[1, 2, 3, 4]);
        assert_eq!(
            decode_agent_msg(&m, &limits()),
            Err(DecodeError::Wire(WireError::UnknownType(9)))
        );
    }

    #[test]
    fn ready_create_measure_have_libccp_sizes() {
        let mut out = Vec::new();
        encode_ready(&mut out, 42);
        assert_eq!(out, [5, 0, 12, 0, 0, 0, 0, 0, 42, 0, 0, 0]);
        encode_create(
            &mut out,
            3,
            &FlowInfo {
                alg: Some("x".repeat(100)),
                ..FlowInfo::default()
            },
        );
        assert_eq!(out.len(), CREATE_MSG_LEN);
        assert_eq!(out[8 + 24 + 62], b'x');
        assert_eq!(out[8 + 24 + 63], 0, "name stays NUL-terminated");
        encode_measure(&mut out, 3, 9, &[1, 2]);
        assert_eq!(out.len(), 8 + 8 + 16);
        assert_eq!(&out[0..4], &[1, 0, 32, 0]);
    }
}
