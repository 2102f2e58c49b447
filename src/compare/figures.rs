//! The figures a comparison looks at, as data, and how each is read from a
//! phase1 run's `results.json`.
//!
//! | figure | samples of one run | statistic | worse when |
//! |---|---|---|---|
//! | `TC-05::<arm>::ttft_p50` / `ttft_p90` | each ok request's TTFT | p50 / p90 | higher |
//! | `TC-05::<arm>::tpot_p50` | each ok request's TPOT | p50 | higher |
//! | `TC-05::<arm>::itl_p50` | each ok request's median inter-token gap | p50 | higher |
//! | `TC-05::concurrency_sweep::c<N>::throughput` | the level's ok requests/s | mean | lower |
//! | `TC-05::concurrency_sweep::c<N>::ttft_p50` | each ok request's TTFT at that level | p50 | higher |
//! | `TC-05::concurrency_sweep::r<rate>::{throughput,ttft_p50}` | the same, for an open-loop level | as above | as above |
//! | `TC-06::guard_recovery_timing::{t1,t2,promotion}` | the run's t1, t2, Guard promotion time | p50 | higher |
//!
//! Arms are cold, local_hit, dram_hit and remote_hit. The request is the
//! sampling unit: ITL uses one value per request (its median gap) so that a
//! long stream does not count as many independent samples.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::errors::CompareError;
use super::stats::{quantile, Statistic};
use crate::evidence::{Arm, PerfSummary, RequestRecord, RESULTS_SCHEMA_VERSION};

/// Which way a figure gets worse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Lower is better (latencies): up is a regression.
    Lower,
    /// Higher is better (throughput): down is a regression.
    Higher,
}

/// What a figure is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FigureSpec {
    /// Stable id, also the JUnit testcase name (`TC-05::dram_hit::ttft_p50`).
    pub id: String,
    /// For people (`dram_hit TTFT p50`).
    pub label: String,
    /// Unit of the samples (`ms`, `req/s`).
    pub unit: String,
    /// The statistic compared.
    pub statistic: Statistic,
    /// Which way is better.
    pub better: Better,
}

impl FigureSpec {
    fn new(id: String, label: String, unit: &str, statistic: Statistic, better: Better) -> Self {
        FigureSpec {
            id,
            label,
            unit: unit.to_string(),
            statistic,
            better,
        }
    }
}

/// One figure's samples in one run.
#[derive(Debug, Clone, PartialEq)]
pub struct FigureValues {
    /// The figure.
    pub spec: FigureSpec,
    /// Its samples (at least one).
    pub values: Vec<f64>,
}

/// The run part of results.json that a comparison names.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RunInfo {
    /// The run id.
    pub run_id: String,
    /// The lane label (`cpu/agg/dense`).
    #[serde(default)]
    pub label: String,
}

/// What a comparison reads of a phase1 `results.json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RunResults {
    /// Layout version; must be [`RESULTS_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The run.
    pub run: RunInfo,
    /// Every request the perf cases sent.
    #[serde(default)]
    pub requests: Vec<RequestRecord>,
    /// Arms, sweep and recovery timeline.
    #[serde(default)]
    pub perf: PerfSummary,
}

impl RunResults {
    /// Reads `path`: a run directory or its `results.json`.
    pub fn read(path: &Path) -> Result<(Self, PathBuf), CompareError> {
        let file = if path.is_dir() {
            path.join("results.json")
        } else {
            path.to_path_buf()
        };
        let text = std::fs::read_to_string(&file).map_err(|source| CompareError::Read {
            path: file.clone(),
            source,
        })?;
        let results = Self::parse(&text).map_err(|message| CompareError::Parse {
            path: file.clone(),
            message,
        })?;
        Ok((results, file))
    }

    /// Parses results.json text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let results: RunResults = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if results.schema_version != RESULTS_SCHEMA_VERSION {
            return Err(format!(
                "schema_version {} (this kvcr-e2e reads {RESULTS_SCHEMA_VERSION})",
                results.schema_version
            ));
        }
        Ok(results)
    }

    /// Every figure this run has samples of, in report order.
    pub fn figures(&self) -> Vec<FigureValues> {
        let mut out = Vec::new();
        let mut push = |spec: FigureSpec, values: Vec<f64>| {
            let values: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
            if !values.is_empty() {
                out.push(FigureValues { spec, values });
            }
        };
        let ok = |r: &&RequestRecord| r.ok;
        for arm in Arm::ALL {
            let mine: Vec<&RequestRecord> = self
                .requests
                .iter()
                .filter(ok)
                .filter(|r| r.arm == Some(arm))
                .collect();
            let id = |m: &str| format!("TC-05::{arm}::{m}");
            let ttft: Vec<f64> = mine.iter().filter_map(|r| r.ttft_ms).collect();
            let ms = "ms";
            let (p50, p90, lower) = (Statistic::P50, Statistic::P90, Better::Lower);
            let label = |m: &str| format!("{arm} {m}");
            push(
                FigureSpec::new(id("ttft_p50"), label("TTFT p50"), ms, p50, lower),
                ttft.clone(),
            );
            push(
                FigureSpec::new(id("ttft_p90"), label("TTFT p90"), ms, p90, lower),
                ttft,
            );
            push(
                FigureSpec::new(id("tpot_p50"), label("TPOT p50"), ms, p50, lower),
                mine.iter().filter_map(|r| r.tpot_ms).collect(),
            );
            push(
                FigureSpec::new(id("itl_p50"), label("ITL p50"), ms, p50, lower),
                mine.iter()
                    .filter_map(|r| quantile(&mut r.itl_ms.clone(), 0.5))
                    .collect(),
            );
        }
        for level in &self.perf.sweep {
            // `c4` for a closed-loop level, `r8` for an open-loop one.
            let key = level.key();
            let shown = match &level.open_loop {
                Some(o) => format!("rate={}/s", o.rate_per_s),
                None => format!("c={}", level.concurrency),
            };
            let id = |m: &str| format!("TC-05::concurrency_sweep::{key}::{m}");
            push(
                FigureSpec::new(
                    id("throughput"),
                    format!("sweep {shown} throughput"),
                    "req/s",
                    Statistic::Mean,
                    Better::Higher,
                ),
                vec![level.request_throughput_per_s],
            );
            push(
                FigureSpec::new(
                    id("ttft_p50"),
                    format!("sweep {shown} TTFT p50"),
                    "ms",
                    Statistic::P50,
                    Better::Lower,
                ),
                self.requests
                    .iter()
                    .filter(ok)
                    .filter(|r| level.holds(r))
                    .filter_map(|r| r.ttft_ms)
                    .collect(),
            );
        }
        if let Some(t) = &self.perf.recovery {
            for (name, label, value) in [
                ("t1", "TC-06 t1 (Guard serves)", t.t1_ms),
                ("t2", "TC-06 t2 (replacement serves)", t.t2_ms),
                ("promotion", "TC-06 Guard promotion", t.promotion_ms),
            ] {
                push(
                    FigureSpec::new(
                        format!("TC-06::guard_recovery_timing::{name}"),
                        label.to_string(),
                        "ms",
                        Statistic::P50,
                        Better::Lower,
                    ),
                    value.into_iter().collect(),
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{RecoveryTimeline, SweepLevel};

    fn request(arm: Option<Arm>, concurrency: Option<u32>, ttft: f64, ok: bool) -> RequestRecord {
        RequestRecord {
            case: "TC-05".into(),
            arm,
            concurrency,
            ttft_ms: Some(ttft),
            tpot_ms: Some(ttft / 10.0),
            itl_ms: vec![1.0, 2.0, 9.0],
            e2el_ms: Some(ttft * 2.0),
            prompt_tokens: 64,
            output_tokens: 8,
            worker_id: None,
            ok,
            error: None,
            request_id: None,
            first_token_monotonic_ns: None,
            first_token_offset_ms: None,
            sent_at_ms: None,
            rate_per_s: None,
            schedule: None,
        }
    }

    pub(crate) fn sample_run() -> RunResults {
        let mut requests = vec![
            request(Some(Arm::Cold), None, 40.0, true),
            request(Some(Arm::Cold), None, 44.0, true),
            request(Some(Arm::Cold), None, 999.0, false),
            request(Some(Arm::DramHit), None, 20.0, true),
        ];
        requests.push(request(None, Some(2), 30.0, true));
        let sweep = SweepLevel::from_requests(2, &requests[4..], 0.5);
        RunResults {
            schema_version: RESULTS_SCHEMA_VERSION,
            run: RunInfo {
                run_id: "run-1".into(),
                label: "cpu/agg/dense".into(),
            },
            requests,
            perf: PerfSummary {
                sweep: vec![sweep],
                recovery: Some(RecoveryTimeline {
                    t1_ms: Some(800.0),
                    t2_ms: None,
                    promotion_ms: Some(450.0),
                    ..RecoveryTimeline::default()
                }),
                ..PerfSummary::default()
            },
        }
    }

    #[test]
    fn figures_of_a_run_in_report_order() {
        let figures = sample_run().figures();
        let ids: Vec<&str> = figures.iter().map(|f| f.spec.id.as_str()).collect();
        assert_eq!(
            ids,
            vec![
                "TC-05::cold::ttft_p50",
                "TC-05::cold::ttft_p90",
                "TC-05::cold::tpot_p50",
                "TC-05::cold::itl_p50",
                "TC-05::dram_hit::ttft_p50",
                "TC-05::dram_hit::ttft_p90",
                "TC-05::dram_hit::tpot_p50",
                "TC-05::dram_hit::itl_p50",
                "TC-05::concurrency_sweep::c2::throughput",
                "TC-05::concurrency_sweep::c2::ttft_p50",
                "TC-06::guard_recovery_timing::t1",
                "TC-06::guard_recovery_timing::promotion",
            ]
        );
        // Only ok requests; ITL is one median per request.
        assert_eq!(figures[0].values, vec![40.0, 44.0]);
        assert_eq!(figures[3].values, vec![2.0, 2.0]);
        assert_eq!(figures[8].values, vec![2.0]); // 1 request in 0.5 s
        assert_eq!(figures[8].spec.better, Better::Higher);
        assert_eq!(figures[9].values, vec![30.0]);
        assert_eq!(figures[10].values, vec![800.0]);
    }

    #[test]
    fn a_real_results_file_parses_and_a_wrong_schema_is_refused() {
        let text = include_str!("testdata/results-tc05-tc06.json");
        let run = RunResults::parse(text).unwrap();
        let figures = run.figures();
        assert!(figures
            .iter()
            .any(|f| f.spec.id == "TC-05::local_hit::ttft_p50"));
        assert!(figures
            .iter()
            .any(|f| f.spec.id == "TC-06::guard_recovery_timing::t1"));
        let bumped = text.replacen("\"schema_version\": 1", "\"schema_version\": 99", 1);
        let err = RunResults::parse(&bumped).unwrap_err();
        assert!(err.contains("schema_version 99"), "{err}");
    }
}
