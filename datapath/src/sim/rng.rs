//! A small seeded generator (`xoshiro256++` seeded by `SplitMix64`), kept in-tree so that a seed
//! gives the same run on every machine and every version of every dependency.
//!
//! The suite's one `SplitMix64` is `ccp_algorithms::api::SplitMix64`; the seeding steps here
//! repeat it because this crate cannot depend on `ccp-algorithms`: the algorithms' tests
//! depend on this crate (DESIGN.md §2), so a dependency back would be a cycle.

/// Deterministic pseudo-random numbers.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Self {
            s: [next(), next(), next(), next()],
        }
    }

    /// A generator for stream `stream` of `seed` (independent per flow, per link, ...).
    pub fn derive(seed: u64, stream: u64) -> Self {
        Self::new(seed ^ stream.wrapping_mul(0xd6e8_feb8_6659_fd93))
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.next_f64() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_fair_coin() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        assert_eq!(a.next_u64(), b.next_u64());
        let mut r = Rng::derive(1, 2);
        let heads = (0..100_000).filter(|_| r.chance(0.3)).count();
        assert!((29_000..31_000).contains(&heads), "{heads}");
    }
}
