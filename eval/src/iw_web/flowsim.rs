//! One short flow alone on its subnet's path, on the `ccp-datapath` simulator.
//!
//! Flows are independent: each is simulated alone on a dumbbell whose bottleneck has the rate,
//! the one-way delay and the drop-tail buffer of its subnet in its time bin. Cross-flow
//! contention is not modelled (TCP-RL's testbed replays flows one by one too). The sender is the
//! simulator's built-in Reno or Cubic with the initial window the policy chose, and is unpaced,
//! so the first flight reaches the bottleneck as one burst: an IW larger than the buffer plus the
//! pipe loses packets there and may time out.
//!
//! The simulator is deterministic and, with no random loss, the outcome depends only on
//! (path, size in segments, IW, scheme); [`FlowCache`] memoizes on that key, which is what makes
//! the exhaustive Optimal affordable.

use std::collections::HashMap;
use std::sync::Mutex;

use ccp_datapath::runtime::DatapathConfig;
use ccp_datapath::sim::{FlowSpec, LinkRate, LinkSpec, Scheme, SimConfig, Simulation};

/// Segment size, bytes (TCP-RL's flow records use the MSS; 1448 is Linux's over Ethernet).
pub const MSS_BYTES: u32 = 1448;

/// Virtual time allowed to one flow, ns (generous: a 3 MB flow with timeouts on a 2 Mbit/s
/// path takes well under a minute).
const FLOW_DEADLINE_NS: u64 = 600_000_000_000;

/// The path of one subnet during one time bin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Path {
    /// Bottleneck rate, bits/s.
    pub rate_bps: u64,
    /// One-way propagation delay, µs (`RTT_min` is twice this plus serialization).
    pub one_way_delay_us: u64,
    /// Drop-tail buffer, packets.
    pub buffer_pkts: u32,
}

/// The built-in sender used by every policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sender {
    /// The simulator's Reno (the datapath runtime's fallback rule).
    Reno,
    /// The simulator's Linux-like Cubic (no `HyStart`).
    Cubic,
}

/// What one flow did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// Response time: first data sent to last ACK, µs.
    pub response_us: u64,
    /// Mean RTT over the flow's samples, µs.
    pub mean_rtt_us: f64,
    /// Smoothed RTT at the end (RFC 6298 EWMA over the samples), µs.
    pub srtt_us: f64,
    /// Packets dropped at the bottleneck.
    pub dropped: u64,
    /// Packets sent, retransmissions included.
    pub sent: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
}

/// Simulates one flow of `pkts` full segments with an IW of `iw_pkts` on `path`.
pub fn simulate(path: Path, pkts: u32, iw_pkts: u32, sender: Sender) -> Outcome {
    let scheme = match sender {
        Sender::Reno => Scheme::Reno,
        Sender::Cubic => Scheme::Cubic,
    };
    let cfg = SimConfig {
        seed: 1,
        duration_ns: FLOW_DEADLINE_NS,
        link: LinkSpec {
            rate: LinkRate::Constant {
                bps: path.rate_bps.max(1),
            },
            buffer_bytes: u64::from(path.buffer_pkts.max(1)) * u64::from(MSS_BYTES),
            loss: 0.0,
        },
        flows: vec![FlowSpec {
            scheme,
            start_ns: 0,
            size_bytes: Some(u64::from(pkts.max(1)) * u64::from(MSS_BYTES)),
            one_way_delay_ns: path.one_way_delay_us * 1000,
            mss_bytes: MSS_BYTES,
            init_cwnd_bytes: iw_pkts.max(1).saturating_mul(MSS_BYTES),
            on_off_ns: None,
        }],
        changes: Vec::new(),
        agent_latency_ns: 0,
        ack_aggregation_ns: 0,
        sample_interval_ns: 0,
        datapath: DatapathConfig {
            max_connections: 1,
            ..DatapathConfig::default()
        },
    };
    let result =
        Simulation::new(cfg, None).and_then(|sim| sim.with_model(crate::runner::sim_model()).run());
    let Some(r) = result.ok().and_then(|mut r| r.flows.pop()) else {
        // Built-in schemes need no agent and cannot fail; count it as a flow that never ended.
        return Outcome {
            response_us: FLOW_DEADLINE_NS / 1000,
            mean_rtt_us: 0.0,
            srtt_us: 0.0,
            dropped: 0,
            sent: 0,
            timeouts: 0,
        };
    };
    let end_ns = r.completion_ns.unwrap_or(FLOW_DEADLINE_NS);
    let mut srtt = None::<f64>;
    for &s in &r.rtt_samples_us {
        let s = f64::from(s);
        srtt = Some(srtt.map_or(s, |v| 0.875 * v + 0.125 * s));
    }
    let base_rtt_us = 2.0 * path.one_way_delay_us as f64;
    Outcome {
        response_us: end_ns.saturating_sub(r.start_ns).div_ceil(1000).max(1),
        mean_rtt_us: if r.rtt_samples_us.is_empty() {
            base_rtt_us.max(1.0)
        } else {
            r.mean_rtt_us()
        },
        srtt_us: srtt.unwrap_or(base_rtt_us).max(1.0),
        dropped: r.packets_dropped,
        sent: r.packets_sent,
        timeouts: r.timeouts,
    }
}

/// Key of a memoized outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    path: Path,
    pkts: u32,
    iw_pkts: u32,
    sender: Sender,
}

/// A thread-safe memo of [`simulate`] (exact: the simulator is deterministic).
#[derive(Debug, Default)]
pub struct FlowCache {
    map: Mutex<HashMap<Key, Outcome>>,
    misses: std::sync::atomic::AtomicU64,
    hits: std::sync::atomic::AtomicU64,
}

impl FlowCache {
    /// The outcome of one flow, simulated on a miss.
    pub fn get(&self, path: Path, pkts: u32, iw_pkts: u32, sender: Sender) -> Outcome {
        use std::sync::atomic::Ordering::Relaxed;
        let key = Key {
            path,
            pkts,
            iw_pkts,
            sender,
        };
        if let Some(o) = self.lock().get(&key) {
            self.hits.fetch_add(1, Relaxed);
            return *o;
        }
        let o = simulate(path, pkts, iw_pkts, sender);
        self.misses.fetch_add(1, Relaxed);
        self.lock().insert(key, o);
        o
    }

    /// Flows simulated (misses) and served from the memo (hits).
    pub fn counts(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.misses.load(Relaxed), self.hits.load(Relaxed))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Outcome>> {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Runs `f` over `items` on `threads` worker threads (scoped), results in input order.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.max(1).min(items.len().max(1));
    if threads == 1 {
        return items.iter().map(&f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|c| s.spawn(|| c.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bigger_iw_is_faster_on_a_deep_buffer_and_bursts_into_a_small_one() {
        let deep = Path {
            rate_bps: 50_000_000,
            one_way_delay_us: 40_000,
            buffer_pkts: 500,
        };
        let a = simulate(deep, 60, 10, Sender::Cubic);
        let b = simulate(deep, 60, 60, Sender::Cubic);
        assert!(b.response_us < a.response_us, "{a:?} {b:?}");
        assert_eq!(b.dropped, 0);
        let shallow = Path {
            buffer_pkts: 20,
            rate_bps: 5_000_000,
            ..deep
        };
        let c = simulate(shallow, 200, 200, Sender::Cubic);
        assert!(c.dropped > 0, "{c:?}");
    }
}
