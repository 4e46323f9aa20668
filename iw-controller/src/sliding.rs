//! The sliding decision space of TCP-RL (`PAPERS.md` §1.1, "Sliding decision space").
//!
//! The bandit keeps a fixed number of arms (initial windows). At each decision the best arm is
//! the one with the highest discounted mean reward, ties broken by the smallest padding (the most
//! exploited arm). If the best arm is the largest, the space slides up: `largest + delta` is added
//! and the smallest arm dropped; if it is the smallest, the space slides down: `smallest - delta`
//! (never below 1) is added and the largest dropped; otherwise the list is kept. This module is
//! the rule alone, on plain IW lists; [`crate::bandit::DiscountedUcb`] applies it and keeps the
//! discounted statistics of the arms that stay.
//!
//! Deviation: a slide that would leave `[1, max_iw]` is clamped to the bound, and when the bound
//! is already an arm the list is kept (the paper has no upper bound and no floor).

/// The outcome of one sliding decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slide {
    /// Keep the list unchanged.
    Keep,
    /// Add `add` (a new, larger arm) and remove `drop` (the smallest arm).
    Up {
        /// The new arm, packets.
        add: u32,
        /// The removed arm, packets.
        drop: u32,
    },
    /// Add `add` (a new, smaller arm, at least 1) and remove `drop` (the largest arm).
    Down {
        /// The new arm, packets.
        add: u32,
        /// The removed arm, packets.
        drop: u32,
    },
}

/// The sliding rule: what to do given the current arms (any order, distinct), the best arm, the
/// step `delta` and the largest allowed IW `max_iw`.
///
/// Returns [`Slide::Keep`] when `best` is neither extreme, when there are fewer than two arms,
/// or when the new arm would coincide with an existing arm after clamping to `[1, max_iw]`.
pub fn slide(arms_pkts: &[u32], best_pkts: u32, delta_pkts: u32, max_iw_pkts: u32) -> Slide {
    let (Some(&smallest), Some(&largest)) = (arms_pkts.iter().min(), arms_pkts.iter().max()) else {
        return Slide::Keep;
    };
    if smallest == largest || delta_pkts == 0 {
        return Slide::Keep;
    }
    if best_pkts == largest {
        let add = largest.saturating_add(delta_pkts).min(max_iw_pkts.max(1));
        if arms_pkts.contains(&add) {
            return Slide::Keep;
        }
        return Slide::Up {
            add,
            drop: smallest,
        };
    }
    if best_pkts == smallest {
        let add = smallest.saturating_sub(delta_pkts).max(1);
        if arms_pkts.contains(&add) {
            return Slide::Keep;
        }
        return Slide::Down { add, drop: largest };
    }
    Slide::Keep
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARMS: [u32; 4] = [5, 10, 15, 20];

    /// §1.1: best is the largest -> add largest + Delta, drop the smallest.
    #[test]
    fn best_largest_slides_up() {
        assert_eq!(slide(&ARMS, 20, 5, 1000), Slide::Up { add: 25, drop: 5 });
    }

    /// §1.1: best is the smallest -> add smallest - Delta, drop the largest.
    #[test]
    fn best_smallest_slides_down() {
        assert_eq!(slide(&ARMS, 5, 1, 1000), Slide::Down { add: 4, drop: 20 });
    }

    /// §1.1: best strictly inside -> keep the list.
    #[test]
    fn best_inside_keeps() {
        assert_eq!(slide(&ARMS, 10, 5, 1000), Slide::Keep);
        assert_eq!(slide(&ARMS, 15, 5, 1000), Slide::Keep);
    }

    /// The floor: smallest - Delta never goes below 1; at 1 already, the list is kept.
    #[test]
    fn slide_down_floors_at_one() {
        assert_eq!(slide(&ARMS, 5, 5, 1000), Slide::Down { add: 1, drop: 20 });
        assert_eq!(
            slide(&[3, 8, 13], 3, 5, 1000),
            Slide::Down { add: 1, drop: 13 }
        );
        assert_eq!(slide(&[1, 6, 11], 1, 5, 1000), Slide::Keep);
    }

    /// The ceiling: largest + Delta is clamped to the configured maximum IW.
    #[test]
    fn slide_up_clamps_at_max() {
        assert_eq!(slide(&ARMS, 20, 5, 22), Slide::Up { add: 22, drop: 5 });
        assert_eq!(slide(&ARMS, 20, 5, 20), Slide::Keep);
    }

    #[test]
    fn degenerate_lists_keep() {
        assert_eq!(slide(&[], 5, 5, 100), Slide::Keep);
        assert_eq!(slide(&[7], 7, 5, 100), Slide::Keep);
        assert_eq!(slide(&ARMS, 20, 0, 100), Slide::Keep);
    }
}
