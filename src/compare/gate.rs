//! What a comparison concludes as a CI gate, and the exit code of
//! `kvcr-e2e compare` and `compare-results` for each conclusion.
//!
//! | exit | meaning |
//! |---|---|
//! | 0 | pass: every figure has a verdict, none is a regression or missing, every round is clean evidence |
//! | 1 | a finding against head: a regression, or a figure one build does not have |
//! | 2 | nothing compared: a usage error, runs that cannot be read or paired, rounds that do not interleave |
//! | 3 | no verdict: a figure with too few round pairs, no figures at all, or a round whose run failed or left no run directory of its own |
//!
//! A finding outranks no verdict: a comparison with both exits 1, and its
//! summary lists both.

/// A comparison's conclusion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Every figure judged; no regression, nothing missing; clean rounds.
    Pass,
    /// A regression, or a figure missing from one build.
    Regression,
    /// Not enough evidence for a verdict ([`super::Comparison::without_verdict`]).
    NoVerdict,
}

/// Exit code when nothing could be compared (usage, unreadable or unpaired
/// runs, rounds out of order).
pub const EXIT_NOT_COMPARED: u8 = 2;

impl Gate {
    /// The process exit code.
    pub fn exit_code(self) -> u8 {
        match self {
            Gate::Pass => 0,
            Gate::Regression => 1,
            Gate::NoVerdict => 3,
        }
    }

    /// One word for the summary's last line.
    pub fn as_str(self) -> &'static str {
        match self {
            Gate::Pass => "PASS",
            Gate::Regression => "FAIL",
            Gate::NoVerdict => "NO VERDICT",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_conclusion_has_its_own_exit_code() {
        let codes = [
            Gate::Pass.exit_code(),
            Gate::Regression.exit_code(),
            EXIT_NOT_COMPARED,
            Gate::NoVerdict.exit_code(),
        ];
        assert_eq!(codes, [0, 1, 2, 3]);
    }
}
