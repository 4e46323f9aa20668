//! Window arithmetic shared by the window-based algorithms (Cubic, Vegas, Westwood+, Illinois):
//! windows are kept as fractional segments, floored at 2 segments and capped at 2^32 - 1 bytes,
//! and a NaN never escapes.

/// Smallest window, segments (the suite's floor; RFC 5681's loss window is 1).
pub const MIN_CWND_SEGMENTS: f64 = 2.0;

/// Largest window in segments for segment size `mss_bytes` (2^32 - 1 bytes).
pub(crate) fn max_cwnd(mss_bytes: u32) -> f64 {
    (f64::from(u32::MAX) / f64::from(mss_bytes)).max(MIN_CWND_SEGMENTS)
}

/// `w` segments within [2, max]; NaN becomes the floor.
pub(crate) fn clamp(w: f64, mss_bytes: u32) -> f64 {
    if w.is_nan() {
        return MIN_CWND_SEGMENTS;
    }
    w.clamp(MIN_CWND_SEGMENTS, max_cwnd(mss_bytes))
}

/// Bytes as fractional segments.
pub(crate) fn segments(bytes: u64, mss_bytes: u32) -> f64 {
    bytes as f64 / f64::from(mss_bytes)
}

/// A window in segments as bytes for the datapath, never below 2 segments.
pub(crate) fn bytes(cwnd: f64, mss_bytes: u32) -> u32 {
    let b = (cwnd * f64::from(mss_bytes)).round();
    // Saturating float-to-int cast; `clamp` keeps the window within range already.
    (b as u32).max(mss_bytes.saturating_mul(2))
}

/// A handoff's slow-start threshold (`u32::MAX` bytes: none) as segments (infinite: none).
pub(crate) fn ssthresh_from_bytes(ssthresh_bytes: u32, mss_bytes: u32) -> f64 {
    if ssthresh_bytes == u32::MAX {
        f64::INFINITY
    } else {
        clamp(segments(u64::from(ssthresh_bytes), mss_bytes), mss_bytes)
    }
}

/// A slow-start threshold in segments for a handoff (infinite: `u32::MAX`).
pub(crate) fn ssthresh_to_bytes(ssthresh: f64, mss_bytes: u32) -> u32 {
    if ssthresh.is_finite() {
        (ssthresh * f64::from(mss_bytes)) as u32
    } else {
        u32::MAX
    }
}

/// The window and threshold (segments) a window-based algorithm adopts from a handoff: once the
/// first slow start is over, the flow continues in avoidance from the handed-over window.
pub(crate) fn adopt(h: &crate::api::Handoff, mss_bytes: u32) -> (f64, f64) {
    let cwnd = clamp(segments(u64::from(h.cwnd_bytes), mss_bytes), mss_bytes);
    let ssthresh = ssthresh_from_bytes(h.ssthresh_bytes, mss_bytes);
    let ssthresh = if h.in_first_slow_start {
        ssthresh
    } else {
        ssthresh.min(cwnd)
    };
    (cwnd, ssthresh)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors_caps_and_nan() {
        assert!((clamp(f64::NAN, 1448) - 2.0).abs() < f64::EPSILON);
        assert!((clamp(0.5, 1448) - 2.0).abs() < f64::EPSILON);
        assert!((clamp(1e12, 1448) - f64::from(u32::MAX) / 1448.0).abs() < 1e-6);
        assert_eq!(bytes(10.0, 1448), 14_480);
        assert_eq!(bytes(0.0, 1448), 2896);
        assert!((segments(2896, 1448) - 2.0).abs() < f64::EPSILON);
        assert!(ssthresh_from_bytes(u32::MAX, 1448).is_infinite());
        assert_eq!(ssthresh_to_bytes(f64::INFINITY, 1448), u32::MAX);
        assert_eq!(
            ssthresh_to_bytes(ssthresh_from_bytes(14_480, 1448), 1448),
            14_480
        );
    }
}
