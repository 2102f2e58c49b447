//! A small seeded random source for the generator: splitmix64, the same
//! numbers on every platform, with independent streams per purpose so that
//! changing one knob (the rate) leaves the others' draws (the prompts) alone.

/// The generator's independent streams.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stream {
    /// Arrival times.
    Arrivals,
    /// Which active session sends the next request.
    Schedule,
    /// One session's shape and turns (the session's index is mixed in).
    Session(u64),
}

impl Stream {
    fn key(self) -> u64 {
        match self {
            Stream::Arrivals => 0xA11,
            Stream::Schedule => 0x5C4,
            Stream::Session(i) => 0x5E5_0000_0000 ^ i.wrapping_mul(0xD134_2543_DE82_EF95),
        }
    }
}

/// splitmix64 (Steele, Lea, Flood 2014).
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    pub(crate) fn new(seed: u64, stream: Stream) -> Self {
        let mut rng = Rng {
            state: seed ^ stream.key().wrapping_mul(0xA24B_AED4_963E_E407),
        };
        // One draw so that nearby seeds do not start from nearby states.
        rng.next_u64();
        rng
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`, 53 bits.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (`n` > 0), by the multiply-shift reduction.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub(crate) fn between(&mut self, lo: u32, hi: u32) -> u32 {
        debug_assert!(lo <= hi);
        lo + self.below(u64::from(hi - lo) + 1) as u32
    }

    /// True with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Exponentially distributed with the given mean.
    pub(crate) fn exponential(&mut self, mean: f64) -> f64 {
        // 1 - unit() is in (0, 1], so the logarithm is finite.
        -mean * (1.0 - self.unit()).ln()
    }
}

/// Ranks `0..n` drawn with probability proportional to `1 / (rank + 1)^s`.
#[derive(Debug, Clone)]
pub(crate) struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    pub(crate) fn new(n: u32, s: f64) -> Self {
        let mut total = 0.0;
        let mut cumulative: Vec<f64> = (1..=n)
            .map(|k| {
                total += f64::from(k).powf(-s);
                total
            })
            .collect();
        for c in &mut cumulative {
            *c /= total;
        }
        Zipf { cumulative }
    }

    pub(crate) fn draw(&self, rng: &mut Rng) -> u32 {
        let u = rng.unit();
        let rank = self.cumulative.partition_point(|&c| c <= u);
        rank.min(self.cumulative.len().saturating_sub(1)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_numbers_and_streams_differ() {
        let draw = |seed, stream| {
            let mut r = Rng::new(seed, stream);
            (0..4).map(|_| r.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(draw(1, Stream::Arrivals), draw(1, Stream::Arrivals));
        assert_ne!(draw(1, Stream::Arrivals), draw(2, Stream::Arrivals));
        assert_ne!(draw(1, Stream::Arrivals), draw(1, Stream::Schedule));
        assert_ne!(draw(1, Stream::Session(0)), draw(1, Stream::Session(1)));
    }

    #[test]
    fn draws_stay_in_their_ranges() {
        let mut r = Rng::new(3, Stream::Schedule);
        for _ in 0..10_000 {
            assert!((0.0..1.0).contains(&r.unit()));
            assert!(r.below(7) < 7);
            assert!((5..=9).contains(&r.between(5, 9)));
            assert!(r.exponential(10.0) >= 0.0);
        }
        assert_eq!(r.between(4, 4), 4);
    }

    #[test]
    fn the_exponential_mean_is_near_its_parameter() {
        let mut r = Rng::new(11, Stream::Arrivals);
        let n = 20_000;
        let mean = (0..n).map(|_| r.exponential(250.0)).sum::<f64>() / f64::from(n);
        assert!((mean - 250.0).abs() < 10.0, "mean {mean}");
    }

    #[test]
    fn zipf_favours_low_ranks_by_the_power_law() {
        let zipf = Zipf::new(10, 1.0);
        let mut r = Rng::new(5, Stream::Session(9));
        let mut counts = [0u32; 10];
        for _ in 0..50_000 {
            counts[zipf.draw(&mut r) as usize] += 1;
        }
        // P(rank 0) / P(rank 1) = 2 for s = 1; P(0) = 1 / H(10) = 0.341.
        let ratio = f64::from(counts[0]) / f64::from(counts[1]);
        assert!((ratio - 2.0).abs() < 0.15, "ratio {ratio}");
        let p0 = f64::from(counts[0]) / 50_000.0;
        assert!((p0 - 0.341).abs() < 0.01, "p0 {p0}");
        assert!(counts.iter().all(|&c| c > 0));
        // s = 0 is uniform.
        let flat = Zipf::new(4, 0.0);
        let mut c = [0u32; 4];
        for _ in 0..40_000 {
            c[flat.draw(&mut r) as usize] += 1;
        }
        assert!(c.iter().all(|&n| (9_000..11_000).contains(&n)), "{c:?}");
    }
}
