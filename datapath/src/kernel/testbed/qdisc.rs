//! The bottleneck's rate and buffer: an `htb` class with a `bfifo` leaf on the router's
//! egress toward the receiver, set and read with `tc`.
//!
//! `htb` rather than `tbf` because a rate change (`tc class replace`) leaves the queue and its
//! packets alone, while changing `tbf` replaces its inner FIFO and drops what it holds.

use super::netns::run_tool;
use super::{MAX_FRAME_BYTES, TestbedError};

/// Handle of the `bfifo` leaf.
const LEAF: &str = "10:";

/// Installs (`install`) or changes the shaper: rate `rate_bps` (Ethernet frame bits), buffer
/// `limit_bytes`.
pub(crate) fn shape(
    ns: &str,
    dev: &str,
    rate_bps: u64,
    limit_bytes: u64,
    install: bool,
) -> Result<(), TestbedError> {
    if install {
        run_tool(
            "tc",
            &[
                "-n", ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default",
                "1",
            ],
        )?;
    }
    let rate = format!("{rate_bps}bit");
    let burst = format!("{}b", burst_bytes(rate_bps));
    let quantum = MAX_FRAME_BYTES.to_string();
    run_tool(
        "tc",
        &[
            "-n", ns, "class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
            "rate", &rate, "ceil", &rate, "burst", &burst, "cburst", &burst, "quantum", &quantum,
        ],
    )?;
    let limit = format!("{limit_bytes}b");
    run_tool(
        "tc",
        &[
            "-n", ns, "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", LEAF, "bfifo",
            "limit", &limit,
        ],
    )?;
    Ok(())
}

/// Token bucket depth: 1 ms at the rate, at least two full frames (so the shaper never stalls
/// a frame for want of tokens, and bursts stay short).
fn burst_bytes(rate_bps: u64) -> u64 {
    (rate_bps / 8 / 1000).max(2 * MAX_FRAME_BYTES)
}

/// Removes the shaper.
pub(crate) fn unshape(ns: &str, dev: &str) -> Result<(), TestbedError> {
    run_tool("tc", &["-n", ns, "qdisc", "del", "dev", dev, "root"]).map(drop)
}

/// Frames the `bfifo` leaf has dropped.
pub(crate) fn drops(ns: &str, dev: &str) -> Result<u64, TestbedError> {
    let out = run_tool("tc", &["-n", ns, "-s", "qdisc", "show", "dev", dev])?;
    parse_drops(&out, LEAF).ok_or(TestbedError::Parse {
        what: "the bottleneck's drop counter",
        output: out,
    })
}

/// The `dropped N` counter of the qdisc with handle `handle` in `tc -s qdisc show` output.
fn parse_drops(output: &str, handle: &str) -> Option<u64> {
    let mut in_block = false;
    for line in output.lines() {
        if let Some(head) = line.strip_prefix("qdisc ") {
            in_block = head.split_whitespace().nth(1) == Some(handle);
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some((_, after)) = line.split_once("(dropped ") {
            let n = after.split(|c: char| !c.is_ascii_digit()).next()?;
            return n.parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
qdisc htb 1: root refcnt 2 r2q 10 default 0x1 direct_packets_stat 0 direct_qlen 1000
 Sent 9087 bytes 12 pkt (dropped 4, overlimits 3 requeues 0)
 backlog 0b 0p requeues 0
qdisc bfifo 10: parent 1:1 limit 50000b
 Sent 9087 bytes 12 pkt (dropped 37, overlimits 0 requeues 0)
 backlog 1514b 1p requeues 0
";

    #[test]
    fn reads_the_leaf_drop_counter() {
        assert_eq!(parse_drops(SAMPLE, "10:"), Some(37));
        assert_eq!(parse_drops(SAMPLE, "1:"), Some(4));
        assert_eq!(parse_drops(SAMPLE, "20:"), None);
        assert_eq!(parse_drops("garbage", "10:"), None);
    }

    #[test]
    fn burst_is_a_millisecond_or_two_frames() {
        assert_eq!(burst_bytes(100_000_000), 12_500);
        assert_eq!(burst_bytes(1_000_000), 2 * MAX_FRAME_BYTES);
    }
}
