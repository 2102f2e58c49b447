//! A small seeded generator (SplitMix64) for the bootstrap and the arrival
//! schedule. Written out rather than taken from a crate so that a seed gives
//! the same stream on every platform and every dependency update: a
//! comparison or a schedule is reproducible from its recorded seed.

/// SplitMix64 (Steele, Lea and Flood, 2014): a 64-bit state advanced by a
/// constant and mixed; statistically sound for resampling and arrivals.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose stream is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform index in `0..n` (Lemire's multiply-shift; the bias is below
    /// n / 2^64). `n` must be above 0.
    pub fn index(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// A uniform number in the open interval (0, 1): never 0, so its
    /// logarithm is finite.
    pub fn unit_open(&mut self) -> f64 {
        // 53 random bits, shifted by half a step off zero.
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A standard normal draw (Box–Muller), for the tests' simulations.
    #[cfg(test)]
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit_open(), self.unit_open());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_fixes_the_stream() {
        // The reference values of SplitMix64 with seed 0.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
        assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
    }

    #[test]
    fn indices_cover_the_range_evenly() {
        let mut r = SplitMix64::new(1);
        let mut counts = [0u32; 5];
        for _ in 0..50_000 {
            counts[r.index(5)] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn unit_open_never_reaches_its_ends() {
        let mut r = SplitMix64::new(2);
        let draws: Vec<f64> = (0..10_000).map(|_| r.unit_open()).collect();
        assert!(draws.iter().all(|&u| u > 0.0 && u < 1.0));
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
    }
}
