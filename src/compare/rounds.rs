//! Interleaved rounds: which build runs in which round.
//!
//! A comparison runs both builds in turns, ABBA ABBA … (base, head, head,
//! base, …): rounds 2k and 2k + 1 form pair k, one round of each build run
//! side by side. Over any two pairs each build runs once early and once
//! late, so a machine that drifts (warms up, gets a noisy neighbour) slows
//! both builds alike, and the statistics resample whole pairs
//! ([`super::stats`]).
//!
//! A linear drift of d per round gives the pairs' head − base differences
//! +d (AB), −d (BA), +d, −d …: it does not lean every pair the same way, it
//! cancels over each two pairs (an even pair count cancels it exactly; an
//! odd one leaves d / pairs) and only widens the interval. What ABBA cannot
//! cancel is curvature: a machine slower at both ends of an ABBA block (a
//! U shape) leans both of its pairs the same way. Over one block that looks
//! like a difference; over several blocks with different shapes it is
//! spread, which is why a verdict needs several pairs
//! ([`super::Rule::min_pairs`]).

use serde::{Deserialize, Serialize};

use super::errors::CompareError;

/// One of the two builds being compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Build {
    /// The reference build (A).
    Base,
    /// The build under test (B).
    Head,
}

impl Build {
    /// `base` or `head`.
    pub fn as_str(self) -> &'static str {
        match self {
            Build::Base => "base",
            Build::Head => "head",
        }
    }
}

/// A round of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Round {
    /// 0-based position in the plan.
    pub index: u32,
    /// The build it runs.
    pub build: Build,
}

impl Round {
    /// The pair it belongs to (`index / 2`).
    pub fn pair(&self) -> u32 {
        self.index / 2
    }
}

/// The rounds of a comparison, in the order they run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundPlan {
    rounds: Vec<Round>,
}

impl RoundPlan {
    /// ABBA… over `rounds` rounds: an even number, at least 2, so that every
    /// round has its partner.
    pub fn abba(rounds: u32) -> Result<Self, CompareError> {
        if rounds < 2 || rounds % 2 != 0 {
            return Err(CompareError::Rounds(rounds));
        }
        let build = |i: u32| match i % 4 {
            0 | 3 => Build::Base,
            _ => Build::Head,
        };
        Ok(RoundPlan {
            rounds: (0..rounds)
                .map(|index| Round {
                    index,
                    build: build(index),
                })
                .collect(),
        })
    }

    /// The rounds in running order.
    pub fn rounds(&self) -> &[Round] {
        &self.rounds
    }

    /// Round pairs.
    pub fn pairs(&self) -> u32 {
        self.rounds.len() as u32 / 2
    }

    /// The rounds of `build`, in running order.
    pub fn of(&self, build: Build) -> impl Iterator<Item = Round> + '_ {
        self.rounds
            .iter()
            .copied()
            .filter(move |r| r.build == build)
    }

    /// The sequence as letters, `ABBAAB…` (A = base, B = head).
    pub fn letters(&self) -> String {
        self.rounds
            .iter()
            .map(|r| match r.build {
                Build::Base => 'A',
                Build::Head => 'B',
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abba_alternates_and_pairs_one_of_each() {
        let plan = RoundPlan::abba(8).unwrap();
        assert_eq!(plan.letters(), "ABBAABBA");
        assert_eq!(plan.pairs(), 4);
        for pair in 0..plan.pairs() {
            let builds: Vec<Build> = plan
                .rounds()
                .iter()
                .filter(|r| r.pair() == pair)
                .map(|r| r.build)
                .collect();
            assert_eq!(builds.len(), 2);
            assert_ne!(builds[0], builds[1], "pair {pair}");
        }
        let base: Vec<u32> = plan.of(Build::Base).map(|r| r.index).collect();
        assert_eq!(base, vec![0, 3, 4, 7]);
        assert_eq!(RoundPlan::abba(2).unwrap().letters(), "AB");
        assert_eq!(RoundPlan::abba(6).unwrap().letters(), "ABBAAB");
    }

    #[test]
    fn an_odd_or_tiny_plan_is_refused() {
        for n in [0, 1, 3, 7] {
            let err = RoundPlan::abba(n).unwrap_err();
            assert!(err.to_string().contains("even"), "{err}");
        }
    }

    /// head − base of each pair when round i takes `f(i)` (the machine
    /// alone: both builds equal).
    fn pair_differences(pairs: u32, f: impl Fn(f64) -> f64) -> Vec<f64> {
        let plan = RoundPlan::abba(2 * pairs).unwrap();
        (0..pairs)
            .map(|p| {
                let at = |b| {
                    let r = plan.rounds().iter().find(|r| r.pair() == p && r.build == b);
                    f(f64::from(r.unwrap().index))
                };
                at(Build::Head) - at(Build::Base)
            })
            .collect()
    }

    #[test]
    fn linear_drift_alternates_across_pairs_and_cancels() {
        let d = pair_differences(6, |i| 100.0 + 3.0 * i);
        assert_eq!(d, vec![3.0, -3.0, 3.0, -3.0, 3.0, -3.0]);
        assert_eq!(d.iter().sum::<f64>(), 0.0);
        // An odd count leaves one pair's worth over all pairs.
        assert_eq!(pair_differences(5, |i| 3.0 * i).iter().sum::<f64>(), 3.0);
        // Curvature within a block (slow at both ends) leans both of its
        // pairs the same way: the live A-against-A pattern.
        let u = pair_differences(2, |i| 60.0 * (i - 1.5).abs().floor());
        assert_eq!(u, vec![-60.0, -60.0]);
    }

    #[test]
    fn each_build_averages_the_same_position() {
        // Over whole ABBA blocks both builds sit, on average, at the same
        // point in time: linear drift falls on both alike.
        let plan = RoundPlan::abba(8).unwrap();
        let mean = |b| plan.of(b).map(|r| f64::from(r.index)).sum::<f64>() / 4.0;
        assert_eq!(mean(Build::Base), mean(Build::Head));
    }
}
