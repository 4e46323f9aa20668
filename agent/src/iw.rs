//! The initial window at flow creation (issue 6): [`WithIw`] wraps any portus algorithm and,
//! before the algorithm sees a new flow, replaces the flow's `init_cwnd` with `iw * mss` from
//! the IW table, looked up by destination address.
//!
//! Why through `DatapathInfo` and not an UPDATE_FIELD: the wrapped algorithm installs its
//! program in `new_flow`, and the datapath discards an UPDATE_FIELD sent just before a
//! CHANGE_PROG. Every algorithm of the suite (and the selector) builds its `FlowStart` from
//! `DatapathInfo::init_cwnd` and sends that window inside its first CHANGE_PROG, so the IW
//! travels in the first program change, for datapaths that cannot consult the table
//! themselves.
//!
//! With a [`Learner`](crate::learn::Learner) installed (`iw.learn = true`), each flow is also
//! followed by a [`FlowTracker`] from its creation through its reports to its close, which
//! makes the flow record the learner learns from (see [`crate::learn`]).
//!
//! The table source, [`IwSource`], is defined in [`crate::learn`] beside the learner that
//! publishes into it (and re-exported here); this module adds flow creation's side. The
//! dependency goes one way: this module uses the learning loop, the loop knows nothing of
//! [`WithIw`].

use std::collections::HashMap;
use std::sync::Arc;

use ccp_algorithms::MeasuredFlow;
use portus::ipc::Ipc;
use portus::{CongAlg, Datapath, DatapathInfo, Flow, Report};

pub use crate::learn::IwSource;
use crate::learn::{FlowOpen, FlowTracker};

/// Flow creation's side of the source: the window a new flow starts with.
impl IwSource {
    /// `info` with `init_cwnd = iw * mss` for its destination (unchanged without a table).
    pub fn adjust(&self, info: DatapathInfo) -> DatapathInfo {
        let Some((table, order)) = self.current() else {
            return info;
        };
        let iw_pkts = table.lookup(order.decode(info.dst_ip));
        DatapathInfo {
            init_cwnd: iw_pkts.saturating_mul(info.mss.max(1)),
            ..info
        }
    }
}

/// A portus algorithm whose new flows start from the IW table's window.
#[derive(Debug)]
pub struct WithIw<A> {
    inner: Arc<A>,
    iw: IwSource,
}

impl<A> Clone for WithIw<A> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            iw: self.iw.clone(),
        }
    }
}

impl<A> WithIw<A> {
    /// Wraps `inner`; flows get their IW from `iw`.
    pub fn new(inner: A, iw: IwSource) -> Self {
        Self {
            inner: Arc::new(inner),
            iw,
        }
    }

    /// The wrapped algorithm.
    pub fn inner(&self) -> &A {
        &self.inner
    }
}

impl<I: Ipc, A: CongAlg<I>> CongAlg<I> for WithIw<A>
where
    A::Flow: MeasuredFlow,
{
    type Flow = IwFlow<A::Flow>;

    fn name() -> &'static str {
        A::name()
    }

    fn datapath_programs(&self) -> HashMap<&'static str, String> {
        self.inner.datapath_programs()
    }

    fn new_flow(&self, datapath: Datapath<I>, info: DatapathInfo) -> Self::Flow {
        let info = self.iw.adjust(info);
        let tracker = self.iw.learner().and_then(|learner| {
            let (_, order) = self.iw.current()?;
            let mss_bytes = info.mss.max(1);
            let open = FlowOpen {
                client: order.decode(info.dst_ip),
                dst_port: u16::try_from(info.dst_port).unwrap_or(0),
                mss_bytes,
                iw_pkts: (info.init_cwnd / mss_bytes).max(1),
            };
            Some(FlowTracker::new(learner, open))
        });
        IwFlow {
            inner: self.inner.new_flow(datapath, info),
            tracker,
        }
    }
}

/// A flow of [`WithIw`]: the wrapped algorithm's flow, followed by a [`FlowTracker`] when
/// learning is on.
pub struct IwFlow<F> {
    inner: F,
    tracker: Option<FlowTracker>,
}

impl<F> IwFlow<F> {
    /// The wrapped algorithm's flow.
    pub fn inner(&self) -> &F {
        &self.inner
    }
}

impl<F: Flow + MeasuredFlow> Flow for IwFlow<F> {
    fn on_report(&mut self, sock_id: u32, report: Report) {
        self.inner.on_report(sock_id, report);
        if let Some(t) = &mut self.tracker
            && let Some(m) = self.inner.take_measurement()
        {
            t.observe(&m);
        }
    }

    fn close(&mut self) {
        self.inner.close();
        if let Some(mut t) = self.tracker.take() {
            t.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use iw_controller::IwTable;

    use super::*;
    use crate::config::IpByteOrder;

    fn info(dst: Ipv4Addr, order: IpByteOrder) -> DatapathInfo {
        let dst_ip = match order {
            IpByteOrder::Host => u32::from(dst),
            IpByteOrder::Network => u32::from_le_bytes(dst.octets()),
        };
        DatapathInfo {
            sock_id: 1,
            init_cwnd: 14_480,
            mss: 1448,
            src_ip: 0,
            src_port: 4242,
            dst_ip,
            dst_port: 80,
        }
    }

    fn table() -> IwTable {
        IwTable::new(
            vec![(Ipv4Addr::new(10, 0, 0, 0), Ipv4Addr::new(10, 0, 0, 255), 25)],
            10,
            100,
        )
        .unwrap()
    }

    #[test]
    fn addresses_in_the_table_get_their_iw_others_the_default() {
        for order in [IpByteOrder::Host, IpByteOrder::Network] {
            let src = IwSource::new(Some((table(), order)));
            let inside = src.adjust(info(Ipv4Addr::new(10, 0, 0, 7), order));
            assert_eq!(inside.init_cwnd, 25 * 1448, "{order:?}");
            let outside = src.adjust(info(Ipv4Addr::new(10, 0, 1, 7), order));
            assert_eq!(outside.init_cwnd, 10 * 1448, "{order:?}");
            assert_eq!(outside.mss, 1448);
            assert_eq!(outside.dst_port, 80);
        }
    }

    #[test]
    fn no_table_leaves_init_cwnd_alone_and_replace_takes_effect() {
        let src = IwSource::new(None);
        let i = info(Ipv4Addr::new(10, 0, 0, 7), IpByteOrder::Host);
        assert_eq!(src.adjust(i.clone()).init_cwnd, 14_480);
        src.replace(Some((IwTable::uniform(40, 100), IpByteOrder::Host)));
        assert_eq!(src.adjust(i).init_cwnd, 40 * 1448);
    }

    #[test]
    fn the_adapter_starts_from_the_adjusted_window() {
        // What the wrapped algorithms do with it: `flow_start` reads `init_cwnd`.
        let src = IwSource::new(Some((table(), IpByteOrder::Host)));
        let start = ccp_algorithms::flow_start(
            &src.adjust(info(Ipv4Addr::new(10, 0, 0, 7), IpByteOrder::Host)),
        );
        assert_eq!(start.init_cwnd_bytes, 25 * 1448);
        let h = ccp_algorithms::Handoff::flow_start(&start);
        assert_eq!(h.cwnd_bytes, 25 * 1448);
    }
}
