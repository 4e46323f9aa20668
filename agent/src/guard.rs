//! A filter in front of portus: every datagram from a datapath is checked before portus
//! decodes it, and only exactly one well-formed READY, CREATE or MEASURE gets through.
//!
//! portus 0.9 trusts what it receives. An INSTALL or UPDATE_FIELD sent *to* the agent panics
//! in portus's decoder (it has no decoder for messages an agent only sends); a header type is read as a `u16` and cut to a `u8`
//! (258 becomes INSTALL); a CREATE shorter than its fixed size, or whose algorithm name has no
//! NUL, slices out of range; and any message that fails to decode (a non-UTF-8 name, a MEASURE
//! body that is not a whole number of fields) ends the run loop ("The IPC channel has
//! closed"). A datagram whose header length is smaller than the datagram is parsed again from
//! where that length ends. [`Guarded`] wraps any [`Ipc`] (unix, shared memory, netlink, char device) and
//! drops all of these before portus sees them:
//!
//! | rule (in order)                                               | [`Reason`]          |
//! |---------------------------------------------------------------|---------------------|
//! | fewer than 8 bytes (no header; an empty datagram too)         | `short`             |
//! | filled the whole receive buffer (may have been cut)           | `truncated`         |
//! | header length differs from the bytes received                 | `length_mismatch`   |
//! | type (`u16`) is not READY (5), CREATE (0) or MEASURE (1)      | `unexpected_type`   |
//! | READY not 12 bytes, CREATE not 96, MEASURE not 16 + 8 n       | `bad_length`        |
//! | CREATE's MSS is 0 or above 65535 (not a TCP MSS)              | `bad_mss`           |
//! | CREATE's 64-byte name without a NUL, or not UTF-8 before it   | `bad_name`          |
//! | MEASURE's `num_fields` is not n, or n > 110 (libccp's limit)  | `bad_fields`        |
//!
//! A CREATE dropped for its MSS leaves that flow on the datapath's built-in fallback rule:
//! no algorithm ever sees it. Its later MEASUREs name a flow portus does not know and are
//! ignored there.
//!
//! Dropped datagrams are counted per reason in [`GuardCounters`] (shared with the caller
//! through an `Arc`). The first of each reason is logged at `warn`, then the 2nd, 4th, 8th...
//! (powers of two), so a flood costs a few log lines; [`GuardCounters::log_totals`] writes all
//! counts in one line, which the agent does when it stops.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use portus::ipc::Ipc;
use tracing::{info, warn};

/// Length of the common header: type `u16`, length `u16`, socket id `u32`, little-endian.
pub const HEADER_LEN: usize = 8;
/// CREATE (libccp `serialize.h`).
pub const CREATE: u16 = 0;
/// MEASURE (a report, or with no fields a flow's close).
pub const MEASURE: u16 = 1;
/// READY (a datapath started).
pub const READY: u16 = 5;
/// Size of READY: header and the datapath id.
pub const READY_LEN: usize = 12;
/// Size of CREATE: header, six `u32`s, the 64-byte NUL-padded algorithm name.
pub const CREATE_LEN: usize = 96;
/// Length of CREATE's algorithm name field.
pub const CREATE_NAME_LEN: usize = 64;
/// Size of MEASURE without fields: header, program uid, `num_fields`.
pub const MEASURE_BASE_LEN: usize = 16;
/// Most fields a MEASURE may carry (libccp `MAX_REPORT_REG`; portus keeps `num_fields` in a
/// `u8`, and portus programs define at most 16).
pub const MAX_MEASURE_FIELDS: usize = 110;
/// Largest MSS a CREATE may announce: a TCP MSS is a 16-bit option.
pub const MAX_MSS_BYTES: u32 = 65_535;

/// Offset of CREATE's MSS (after the header and `init_cwnd`).
const CREATE_MSS_AT: usize = 12;
/// Offset of CREATE's algorithm name.
const CREATE_NAME_AT: usize = 32;
/// Offset of MEASURE's `num_fields`.
const MEASURE_NUM_FIELDS_AT: usize = 12;

/// Why a datagram was dropped (the table in the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Fewer than [`HEADER_LEN`] bytes.
    Short,
    /// The datagram filled the receive buffer: it may have been longer.
    Truncated,
    /// The header's length is not the number of bytes received.
    LengthMismatch,
    /// Not a message a datapath sends to the agent.
    UnexpectedType,
    /// The length is not the type's size.
    BadLength,
    /// CREATE's MSS is 0 or above [`MAX_MSS_BYTES`].
    BadMss,
    /// CREATE's algorithm name is not NUL-terminated UTF-8.
    BadName,
    /// MEASURE's `num_fields` disagrees with its body or exceeds [`MAX_MEASURE_FIELDS`].
    BadFields,
}

impl Reason {
    /// Every reason, in the order of the rules.
    pub const ALL: [Self; 8] = [
        Self::Short,
        Self::Truncated,
        Self::LengthMismatch,
        Self::UnexpectedType,
        Self::BadLength,
        Self::BadMss,
        Self::BadName,
        Self::BadFields,
    ];

    /// The reason's name in logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Short => "short",
            Self::Truncated => "truncated",
            Self::LengthMismatch => "length_mismatch",
            Self::UnexpectedType => "unexpected_type",
            Self::BadLength => "bad_length",
            Self::BadMss => "bad_mss",
            Self::BadName => "bad_name",
            Self::BadFields => "bad_fields",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A message header as received (before any check of its values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Message type, all 16 bits.
    pub typ: u16,
    /// Length the header claims, bytes.
    pub len: u16,
    /// Socket id.
    pub sid: u32,
}

/// A dropped datagram: why, its header when it had one, and the offending value for
/// [`Reason::BadMss`] (the MSS) and [`Reason::BadFields`] (`num_fields`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejection {
    /// The rule it broke.
    pub reason: Reason,
    /// Its header, if it had 8 bytes.
    pub header: Option<Header>,
    /// The MSS or `num_fields` found.
    pub value: Option<u32>,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Checks one received datagram against the rules of the module doc (all but `truncated`,
/// which needs the buffer's size). `Ok` with its header when portus may decode it.
pub fn check(datagram: &[u8]) -> Result<Header, Rejection> {
    let reject = |reason, header, value| {
        Err(Rejection {
            reason,
            header,
            value,
        })
    };
    if datagram.len() < HEADER_LEN {
        return reject(Reason::Short, None, None);
    }
    let h = Header {
        typ: u16_at(datagram, 0),
        len: u16_at(datagram, 2),
        sid: u32_at(datagram, 4),
    };
    let n = datagram.len();
    if usize::from(h.len) != n {
        return reject(Reason::LengthMismatch, Some(h), None);
    }
    match h.typ {
        READY if n == READY_LEN => Ok(h),
        CREATE if n == CREATE_LEN => {
            let mss = u32_at(datagram, CREATE_MSS_AT);
            if mss == 0 || mss > MAX_MSS_BYTES {
                return reject(Reason::BadMss, Some(h), Some(mss));
            }
            let name = &datagram[CREATE_NAME_AT..CREATE_NAME_AT + CREATE_NAME_LEN];
            match name.iter().position(|&c| c == 0) {
                Some(end) if std::str::from_utf8(&name[..end]).is_ok() => Ok(h),
                _ => reject(Reason::BadName, Some(h), None),
            }
        }
        MEASURE if n >= MEASURE_BASE_LEN && (n - MEASURE_BASE_LEN).is_multiple_of(8) => {
            let fields = (n - MEASURE_BASE_LEN) / 8;
            let num_fields = u32_at(datagram, MEASURE_NUM_FIELDS_AT);
            if usize::try_from(num_fields).ok() != Some(fields) || fields > MAX_MEASURE_FIELDS {
                return reject(Reason::BadFields, Some(h), Some(num_fields));
            }
            Ok(h)
        }
        READY | CREATE | MEASURE => reject(Reason::BadLength, Some(h), None),
        _ => reject(Reason::UnexpectedType, Some(h), None),
    }
}

/// Datagrams let through and dropped (per [`Reason`]), shared between the guard and whoever
/// reports them.
#[derive(Debug, Default)]
pub struct GuardCounters {
    accepted: AtomicU64,
    rejected: [AtomicU64; Reason::ALL.len()],
}

impl GuardCounters {
    /// Fresh counters, all zero.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Datagrams passed to portus.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Datagrams dropped for `reason`.
    pub fn rejected(&self, reason: Reason) -> u64 {
        self.rejected[reason.index()].load(Ordering::Relaxed)
    }

    /// Datagrams dropped for any reason.
    pub fn rejected_total(&self) -> u64 {
        Reason::ALL.iter().map(|&r| self.rejected(r)).sum()
    }

    /// Counts one rejection and returns the new count for its reason.
    fn reject(&self, reason: Reason) -> u64 {
        self.rejected[reason.index()].fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Logs every count in one line (`info`): `accepted`, `rejected` (the total) and one field
    /// per reason.
    pub fn log_totals(&self) {
        let r = |reason| self.rejected(reason);
        info!(
            accepted = self.accepted(),
            rejected = self.rejected_total(),
            short = r(Reason::Short),
            truncated = r(Reason::Truncated),
            length_mismatch = r(Reason::LengthMismatch),
            unexpected_type = r(Reason::UnexpectedType),
            bad_length = r(Reason::BadLength),
            bad_mss = r(Reason::BadMss),
            bad_name = r(Reason::BadName),
            bad_fields = r(Reason::BadFields),
            "ipc guard totals"
        );
    }
}

/// An [`Ipc`] that hands portus only datagrams [`check`] accepts; see the module doc.
pub struct Guarded<I: Ipc> {
    inner: I,
    counters: Arc<GuardCounters>,
}

impl<I: Ipc> Guarded<I> {
    /// Wraps `inner`, counting into `counters`.
    pub fn new(inner: I, counters: Arc<GuardCounters>) -> Self {
        Self { inner, counters }
    }

    /// The counters.
    pub fn counters(&self) -> &Arc<GuardCounters> {
        &self.counters
    }

    fn log(r: &Rejection, count: u64, size: usize, from: &I::Addr) {
        // The first of each reason, then at powers of two.
        if !count.is_power_of_two() {
            return;
        }
        let (typ, len, sid) = r.header.map_or((None, None, None), |h| {
            (Some(h.typ), Some(h.len), Some(h.sid))
        });
        if r.reason == Reason::BadMss {
            warn!(
                sid, mss = r.value, count, from = ?from,
                "CREATE with an MSS that is not a TCP MSS dropped: the flow stays on the \
                 datapath's fallback"
            );
        } else {
            warn!(
                reason = r.reason.name(), count, size, typ, len, sid, value = r.value,
                from = ?from,
                "malformed or unexpected datagram dropped"
            );
        }
    }
}

impl<I: Ipc> Ipc for Guarded<I> {
    type Addr = I::Addr;

    fn name() -> String {
        I::name()
    }

    fn send(&self, msg: &[u8], to: &Self::Addr) -> portus::Result<()> {
        self.inner.send(msg, to)
    }

    /// Receives until a datagram passes [`check`]; the inner `recv`'s errors and timeouts are
    /// returned as they are (portus then checks its stop flag and calls again).
    fn recv(&self, msg: &mut [u8]) -> portus::Result<(usize, Self::Addr)> {
        loop {
            let (n, from) = self.inner.recv(msg)?;
            let verdict = if n >= msg.len() {
                Err(Rejection {
                    reason: Reason::Truncated,
                    header: None,
                    value: None,
                })
            } else {
                check(&msg[..n])
            };
            match verdict {
                Ok(_) => {
                    self.counters.accepted.fetch_add(1, Ordering::Relaxed);
                    return Ok((n, from));
                }
                Err(r) => {
                    let count = self.counters.reject(r.reason);
                    Self::log(&r, count, n, &from);
                }
            }
        }
    }

    fn close(&mut self) -> portus::Result<()> {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::collections::VecDeque;
    use std::sync::Mutex;

    fn header(typ: u16, len: usize, sid: u32) -> Vec<u8> {
        let mut m = typ.to_le_bytes().to_vec();
        m.extend_from_slice(&u16::try_from(len).unwrap().to_le_bytes());
        m.extend_from_slice(&sid.to_le_bytes());
        m
    }

    fn ready() -> Vec<u8> {
        let mut m = header(READY, READY_LEN, 0);
        m.extend_from_slice(&7u32.to_le_bytes());
        m
    }

    fn create(mss: u32, name: &[u8]) -> Vec<u8> {
        let mut m = header(CREATE, CREATE_LEN, 42);
        for v in [14_480, mss, 1, 2, 3, 4u32] {
            m.extend_from_slice(&v.to_le_bytes());
        }
        let mut field = [0u8; CREATE_NAME_LEN];
        field[..name.len()].copy_from_slice(name);
        m.extend_from_slice(&field);
        m
    }

    fn measure(num_fields: u32, fields: usize) -> Vec<u8> {
        let mut m = header(MEASURE, MEASURE_BASE_LEN + 8 * fields, 42);
        m.extend_from_slice(&9u32.to_le_bytes());
        m.extend_from_slice(&num_fields.to_le_bytes());
        for f in 0..fields as u64 {
            m.extend_from_slice(&f.to_le_bytes());
        }
        m
    }

    fn reason(d: &[u8]) -> Option<Reason> {
        check(d).err().map(|r| r.reason)
    }

    #[test]
    fn the_three_datapath_messages_pass() {
        assert_eq!(check(&ready()).unwrap().typ, READY);
        let h = check(&create(1448, b"cubic")).unwrap();
        assert_eq!((h.typ, h.sid), (CREATE, 42));
        assert!(
            check(&create(1, b"")).is_ok(),
            "no name: the default algorithm"
        );
        assert!(check(&create(MAX_MSS_BYTES, "ünïcode".as_bytes())).is_ok());
        assert!(
            check(&create(536, &[b'x'; 63])).is_ok(),
            "63 bytes and the NUL"
        );
        assert!(check(&measure(0, 0)).is_ok(), "a close");
        assert!(check(&measure(5, 5)).is_ok());
        let most = u32::try_from(MAX_MEASURE_FIELDS).unwrap();
        assert!(check(&measure(most, MAX_MEASURE_FIELDS)).is_ok());
    }

    #[test]
    fn fewer_than_eight_bytes_is_short() {
        for n in 0..HEADER_LEN {
            assert_eq!(reason(&ready()[..n]), Some(Reason::Short), "{n} bytes");
        }
    }

    #[test]
    fn a_header_length_other_than_the_datagram_is_a_mismatch() {
        // Shorter (portus would parse the rest as a second message) and longer.
        let mut two = ready();
        two.extend_from_slice(&ready());
        assert_eq!(reason(&two), Some(Reason::LengthMismatch));
        let mut cut = create(1448, b"reno");
        cut.truncate(40);
        assert_eq!(reason(&cut), Some(Reason::LengthMismatch));
        let mut zero = measure(1, 1);
        zero[2..4].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(reason(&zero), Some(Reason::LengthMismatch));
    }

    #[test]
    fn only_ready_create_and_measure_are_expected() {
        // INSTALL, UPDATE_FIELD and CHANGE_PROG go the other way; 258 is INSTALL cut to a u8.
        for typ in [2u16, 3, 4, 6, 255, 256, 257, 258, 261, u16::MAX] {
            let mut m = header(typ, 24, 1);
            m.resize(24, 0);
            assert_eq!(reason(&m), Some(Reason::UnexpectedType), "type {typ}");
        }
    }

    #[test]
    fn each_type_has_its_size() {
        let sized = |typ, n| {
            let mut m = header(typ, n, 1);
            m.resize(n, 0);
            m
        };
        for n in [8, 11, 13, 16, 96] {
            assert_eq!(
                reason(&sized(READY, n)),
                Some(Reason::BadLength),
                "READY {n}"
            );
        }
        for n in [8, 12, 32, 95, 97, 104] {
            assert_eq!(
                reason(&sized(CREATE, n)),
                Some(Reason::BadLength),
                "CREATE {n}"
            );
        }
        for n in [8, 12, 15, 17, 20, 23, 25] {
            assert_eq!(
                reason(&sized(MEASURE, n)),
                Some(Reason::BadLength),
                "MEASURE {n}"
            );
        }
    }

    #[test]
    fn create_names_are_nul_terminated_utf8() {
        assert_eq!(
            reason(&create(1448, &[b'x'; 64])),
            Some(Reason::BadName),
            "no NUL"
        );
        assert_eq!(reason(&create(1448, &[0xff, 0xfe])), Some(Reason::BadName));
        // Bytes after the NUL are not part of the name.
        let mut m = create(1448, b"reno");
        m[CREATE_NAME_AT + 10] = 0xff;
        assert!(check(&m).is_ok());
    }

    #[test]
    fn create_mss_must_be_a_tcp_mss() {
        for mss in [0, MAX_MSS_BYTES + 1, 1 << 31, u32::MAX] {
            let r = check(&create(mss, b"copa")).unwrap_err();
            assert_eq!((r.reason, r.value), (Reason::BadMss, Some(mss)));
            assert_eq!(r.header.unwrap().sid, 42);
        }
    }

    #[test]
    fn measure_num_fields_matches_its_body_and_the_limit() {
        assert_eq!(reason(&measure(2, 3)), Some(Reason::BadFields));
        assert_eq!(reason(&measure(3, 2)), Some(Reason::BadFields));
        assert_eq!(reason(&measure(0, 1)), Some(Reason::BadFields));
        // portus keeps num_fields in a u8: 257 would read as 1.
        assert_eq!(reason(&measure(257, 1)), Some(Reason::BadFields));
        let over = MAX_MEASURE_FIELDS + 1;
        let r = check(&measure(u32::try_from(over).unwrap(), over)).unwrap_err();
        assert_eq!(r.reason, Reason::BadFields);
    }

    /// An IPC that plays back datagrams, then an error (a timeout) when none are left.
    struct Script(Mutex<VecDeque<Result<Vec<u8>, String>>>);

    impl Ipc for Script {
        type Addr = ();
        fn name() -> String {
            "script".into()
        }
        fn send(&self, _: &[u8], (): &()) -> portus::Result<()> {
            Ok(())
        }
        fn recv(&self, msg: &mut [u8]) -> portus::Result<(usize, ())> {
            match self.0.lock().unwrap().pop_front() {
                Some(Ok(d)) => {
                    let n = d.len().min(msg.len());
                    msg[..n].copy_from_slice(&d[..n]);
                    Ok((n, ()))
                }
                Some(Err(e)) => Err(portus::Error(e)),
                None => Err(portus::Error("timed out".into())),
            }
        }
        fn close(&mut self) -> portus::Result<()> {
            Ok(())
        }
    }

    fn guarded(items: Vec<Result<Vec<u8>, String>>) -> Guarded<Script> {
        Guarded::new(Script(Mutex::new(items.into())), GuardCounters::new())
    }

    #[test]
    fn recv_skips_rejected_datagrams_and_counts_each() {
        let install_24 = {
            let mut m = header(2, 24, 1);
            m.resize(24, 0);
            m
        };
        let g = guarded(vec![
            Ok(vec![]),
            Ok(install_24.clone()),
            Ok(create(0, b"copa")),
            Ok(ready()),
            Ok(install_24),
            Ok(measure(1, 1)),
        ]);
        let mut buf = [0u8; 1024];
        assert_eq!(g.recv(&mut buf).unwrap().0, READY_LEN);
        assert_eq!(&buf[..READY_LEN], &ready()[..]);
        assert_eq!(g.recv(&mut buf).unwrap().0, MEASURE_BASE_LEN + 8);
        let c = g.counters();
        assert_eq!(c.accepted(), 2);
        assert_eq!(c.rejected(Reason::Short), 1);
        assert_eq!(c.rejected(Reason::UnexpectedType), 2);
        assert_eq!(c.rejected(Reason::BadMss), 1);
        assert_eq!(c.rejected_total(), 4);
        c.log_totals();
    }

    #[test]
    fn recv_passes_the_inner_errors_through() {
        let g = guarded(vec![
            Ok(vec![1, 2, 3]),
            Err("interrupted".into()),
            Ok(ready()),
        ]);
        let mut buf = [0u8; 64];
        assert_eq!(g.recv(&mut buf).unwrap_err().0, "interrupted");
        assert_eq!(g.recv(&mut buf).unwrap().0, READY_LEN);
        assert_eq!(g.recv(&mut buf).unwrap_err().0, "timed out");
        assert_eq!(g.counters().rejected(Reason::Short), 1);
    }

    #[test]
    fn a_datagram_filling_the_buffer_is_truncated() {
        // A 16-byte buffer holds a MEASURE with no fields exactly: it may have been longer.
        let mut long = measure(1, 1);
        long[2..4].copy_from_slice(&16u16.to_le_bytes());
        let g = guarded(vec![Ok(long), Ok(ready())]);
        let mut buf = [0u8; 16];
        assert_eq!(g.recv(&mut buf).unwrap().0, READY_LEN);
        assert_eq!(g.counters().rejected(Reason::Truncated), 1);
    }
}
