//! The datapath's clock, injected so one runtime serves virtual and real time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// A monotonic clock in nanoseconds. The runtime reads it once per invocation and per timer
/// check; it never sleeps on it.
pub trait Clock {
    /// Current time, ns, from an arbitrary fixed origin. Must not go backwards.
    fn now_ns(&self) -> u64;
}

/// Wall-clock time from [`Instant`], counted from the clock's creation.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose zero is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        // u64 nanoseconds last 584 years.
        self.origin.elapsed().as_nanos() as u64
    }
}

/// A clock that moves only when told to: virtual time for simulators and tests.
/// Clones share the same time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now_ns: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at `start_ns`.
    pub fn new(start_ns: u64) -> Self {
        Self {
            now_ns: Arc::new(AtomicU64::new(start_ns)),
        }
    }

    /// Sets the time; a value earlier than the current time is ignored.
    pub fn set_ns(&self, now_ns: u64) {
        self.now_ns.fetch_max(now_ns, Ordering::Relaxed);
    }

    /// Moves the time forward by `delta_ns`.
    pub fn advance_ns(&self, delta_ns: u64) {
        self.now_ns.fetch_add(delta_ns, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.now_ns.load(Ordering::Relaxed)
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_never_goes_back() {
        let c = ManualClock::new(100);
        let c2 = c.clone();
        c.advance_ns(50);
        assert_eq!(c2.now_ns(), 150);
        c.set_ns(120);
        assert_eq!(c.now_ns(), 150);
        c.set_ns(1_000);
        assert_eq!(c2.now_ns(), 1_000);
    }
}
