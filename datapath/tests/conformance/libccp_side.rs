//! The libccp side: its datapath and flow callbacks, and its clock pointed at the virtual one.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use ccp_datapath::runtime::Primitives;

use crate::VCLOCK_NS;

// ---------------------------------------------------------------------------------------------
// libccp side.

pub(crate) type Sent = Arc<Mutex<Vec<Vec<u8>>>>;

pub(crate) struct LibOps(pub(crate) Sent);

impl libccp::DatapathOps for LibOps {
    fn send_msg(&mut self, msg: &[u8]) {
        self.0.lock().unwrap().push(msg.to_vec());
    }
}

/// libccp's per-flow callbacks: the last cwnd and rate set during the current invocation.
#[derive(Default)]
pub(crate) struct LibFlow {
    pub(crate) cwnd: Option<u32>,
    pub(crate) rate: Option<u32>,
}

impl libccp::CongestionOps for LibFlow {
    fn set_cwnd(&mut self, cwnd: u32) {
        self.cwnd = Some(cwnd);
    }

    fn set_rate_abs(&mut self, rate: u32) {
        self.rate = Some(rate);
    }
}

/// `struct ccp_datapath` from libccp's `ccp.h`, field for field.
#[repr(C)]
struct RawCcpDatapath {
    set_cwnd: *const (),
    set_rate_abs: *const (),
    send_msg: *const (),
    log: *const (),
    time_zero: u64,
    now: Option<extern "C" fn() -> u64>,
    since_usecs: Option<extern "C" fn(u64) -> u64>,
    after_usecs: Option<extern "C" fn(u64) -> u64>,
    max_connections: usize,
    ccp_active_connections: *mut (),
    fto_us: u64,
    last_msg_sent: u64,
    in_fallback: bool,
    max_programs: usize,
    programs: *mut (),
    impl_: *mut (),
}

extern "C" fn virtual_now() -> u64 {
    VCLOCK_NS.load(Ordering::SeqCst)
}

extern "C" fn virtual_since_usecs(then: u64) -> u64 {
    virtual_now().wrapping_sub(then) / 1_000
}

extern "C" fn virtual_after_usecs(usecs: u64) -> u64 {
    virtual_now().wrapping_add(usecs.wrapping_mul(1_000))
}

/// Points libccp's clock callbacks at the virtual clock. Refuses (panics) if the struct does
/// not look like the one in `ccp.h` with the values `libccp::DatapathBuilder::init` sets.
pub(crate) fn use_virtual_clock(dp: &mut libccp::Datapath) {
    assert_eq!(
        size_of::<libccp::Datapath>(),
        size_of::<RawCcpDatapath>(),
        "libccp::Datapath is not a bare struct ccp_datapath"
    );
    let raw = std::ptr::from_mut(dp).cast::<RawCcpDatapath>();
    // SAFETY: `libccp::Datapath` is a newtype over bindgen's `#[repr(C)] ccp_datapath`, which
    // `RawCcpDatapath` mirrors (sizes checked above, field values checked below before any
    // write). We hold the only reference, and no connection exists yet.
    let raw = unsafe { &mut *raw };
    assert!(
        raw.max_connections == 1024
            && raw.max_programs == 10
            && raw.fto_us == 1000
            && !raw.in_fallback
            && !raw.programs.is_null()
            && !raw.impl_.is_null()
            && !raw.ccp_active_connections.is_null()
            && raw.now.is_some()
            && raw.since_usecs.is_some()
            && raw.after_usecs.is_some()
            && !raw.set_cwnd.is_null()
            && !raw.set_rate_abs.is_null()
            && !raw.send_msg.is_null()
            && !raw.log.is_null(),
        "libccp's struct ccp_datapath layout is not the one this test knows"
    );
    raw.now = Some(virtual_now);
    raw.since_usecs = Some(virtual_since_usecs);
    raw.after_usecs = Some(virtual_after_usecs);
    raw.time_zero = virtual_now();
    raw.last_msg_sent = 0;
}

pub(crate) fn lib_prims(p: &Primitives) -> libccp::Primitives {
    libccp::Primitives::default()
        .with_bytes_acked(p.bytes_acked)
        .with_packets_acked(p.packets_acked)
        .with_bytes_misordered(p.bytes_misordered)
        .with_packets_misordered(p.packets_misordered)
        .with_ecn_bytes(p.ecn_bytes)
        .with_ecn_packets(p.ecn_packets)
        .with_lost_pkts_sample(p.lost_pkts_sample)
        .with_was_timeout(p.was_timeout)
        .with_rtt_sample_us(p.rtt_sample_us)
        .with_rate_outgoing(p.rate_outgoing)
        .with_rate_incoming(p.rate_incoming)
        .with_bytes_in_flight(p.bytes_in_flight)
        .with_packets_in_flight(p.packets_in_flight)
        .with_snd_cwnd(p.snd_cwnd)
        .with_snd_rate(p.snd_rate)
        .with_bytes_pending(p.bytes_pending)
}
