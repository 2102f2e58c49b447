//! What a Guard pool cost against its size (the production-size lanes,
//! `phase3_scale` and `phase3_scale_4g`): one row per pool size, with the
//! slowest pool registration (a worker's KVCR as it started), promotion,
//! handback and Guard service shutdown the run saw, from KVCR's own lines
//! and the harness's clock; `guard-costs.json` in the run directory, and
//! the report's table and chart. The run's own row comes first; the latest
//! row of each other run directory that has one (the other size's lane)
//! follows, so a report shows every size measured.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::errors::EvidenceError;
use super::report::{esc, ms};
use crate::telemetry::guard_costs::{LoggedCosts, Shutdown};

/// The run directory's record of its Guard pool costs.
pub const FILE: &str = "guard-costs.json";

const GIB: f64 = (1u64 << 30) as f64;

/// What a Guard pool of one size cost in one run, each step its slowest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolCostRow {
    /// The lane (test target) that ran.
    pub target: String,
    pub run_id: String,
    /// Bytes of one Guard's pools.
    pub pool_bytes: u64,
    pub registration_ms: Option<f64>,
    pub promotion_ms: Option<f64>,
    pub handback_ms: Option<f64>,
    pub shutdown_ms: Option<f64>,
    /// Pool files left once the Guard services stopped (a killed service's
    /// too; the verdict counts only the shutdown's own).
    pub pool_files_left: usize,
    /// The run's verdicts on its steps that failed, each with its numbers.
    pub violations: Vec<String>,
}

impl PoolCostRow {
    /// The row of a run's logged costs and its services' shutdowns.
    pub fn of(
        target: &str,
        run_id: &str,
        logged: &LoggedCosts,
        registrations_ms: &[f64],
        shutdowns: &[Shutdown],
    ) -> Self {
        let slowest = |values: &mut dyn Iterator<Item = f64>| values.reduce(f64::max);
        PoolCostRow {
            target: target.to_string(),
            run_id: run_id.to_string(),
            pool_bytes: logged.pool_bytes(),
            registration_ms: slowest(&mut registrations_ms.iter().copied()),
            promotion_ms: slowest(&mut logged.promotions.iter().map(|s| s.ms)),
            handback_ms: slowest(&mut logged.handbacks.iter().map(|s| s.ms)),
            shutdown_ms: slowest(&mut shutdowns.iter().map(|s| s.stop_ms)),
            pool_files_left: shutdowns
                .iter()
                .map(|s| s.pool_files_left.len())
                .max()
                .unwrap_or(0),
            violations: Vec::new(),
        }
    }

    fn gib(&self) -> f64 {
        self.pool_bytes as f64 / GIB
    }
}

/// A run's Guard pool costs: its row, the other sizes' rows, and what they
/// were read from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GuardCosts {
    /// This run's row first, then other runs' latest rows.
    pub rows: Vec<PoolCostRow>,
    /// Every step the run's Guard logs showed.
    pub logged: LoggedCosts,
    /// Each worker registration, ms.
    pub registrations_ms: Vec<f64>,
    /// Each Guard service that was running at teardown, and its shutdown.
    pub shutdowns: Vec<Shutdown>,
}

/// The report's section: a table of cost against pool size and its chart.
pub fn section(costs: Option<&GuardCosts>) -> Result<String, EvidenceError> {
    let Some(costs) = costs else {
        return Ok(String::new());
    };
    let mut rows: Vec<&PoolCostRow> = costs.rows.iter().collect();
    rows.sort_by(|a, b| {
        a.pool_bytes
            .cmp(&b.pool_bytes)
            .then(a.target.cmp(&b.target))
    });
    let mut o = String::from(
        "<section><h2>Guard pool cost against pool size</h2>\n<p>The slowest of each step in a \
         run: a worker's KVCR registering the pool with NIXL as it started, the Guard's \
         promotion and its handback to the replacement (KVCR's own lines), the Guard \
         service's shutdown (SIGTERM to exit, the harness's clock). ms.</p>\n\
         <table><thead><tr><th>pool</th><th>lane</th><th>run</th><th class=\"num\">registration</th>\
         <th class=\"num\">promotion</th><th class=\"num\">handback</th><th class=\"num\">shutdown</th>\
         <th class=\"num\">pool files left</th><th>verdict</th></tr></thead><tbody>\n",
    );
    for row in &rows {
        let verdict = match row.violations.is_empty() {
            true => "<span class=\"pill passed\">within KVCR's deadlines</span>".to_string(),
            false => format!(
                "<span class=\"pill failed\">failed</span><pre>{}</pre>",
                esc(&row.violations.join("\n"))
            ),
        };
        let _ = writeln!(
            o,
            "<tr><td>{:.2} GiB</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{verdict}</td></tr>",
            row.gib(),
            esc(&row.target),
            esc(&row.run_id),
            ms(row.registration_ms),
            ms(row.promotion_ms),
            ms(row.handback_ms),
            ms(row.shutdown_ms),
            row.pool_files_left,
        );
    }
    o.push_str("</tbody></table>\n");
    if let Some(svg) = super::charts::guard_costs(&rows)? {
        let _ = writeln!(o, "<div class=\"charts\">{svg}</div>");
    }
    o.push_str("</section>\n");
    Ok(o)
}

/// One step's value in a row.
type StepOf = fn(&PoolCostRow) -> Option<f64>;

/// The points of each step's series: (pool GiB, ms), by pool size.
pub(crate) fn series(rows: &[&PoolCostRow]) -> Vec<(&'static str, Vec<(f64, f64)>)> {
    let steps: [(&'static str, StepOf); 4] = [
        ("registration", |r| r.registration_ms),
        ("promotion", |r| r.promotion_ms),
        ("handback", |r| r.handback_ms),
        ("shutdown", |r| r.shutdown_ms),
    ];
    steps
        .iter()
        .map(|(name, value)| {
            let mut points: Vec<(f64, f64)> = rows
                .iter()
                .filter_map(|r| value(r).map(|v| (r.gib(), v)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            (*name, points)
        })
        .filter(|(_, points)| !points.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::guard_costs::Step;

    fn row(target: &str, gib: u64, promotion: f64) -> PoolCostRow {
        PoolCostRow {
            target: target.into(),
            run_id: format!("run-{gib}"),
            pool_bytes: gib << 30,
            registration_ms: Some(100.0 * gib as f64),
            promotion_ms: Some(promotion),
            handback_ms: Some(20.0),
            shutdown_ms: None,
            pool_files_left: 0,
            violations: vec![],
        }
    }

    #[test]
    fn a_row_holds_each_steps_slowest() {
        let logged = LoggedCosts {
            pool_sizes_bytes: vec![1 << 30],
            promotions: vec![
                Step {
                    who: "0".into(),
                    ms: 40.0,
                },
                Step {
                    who: "1".into(),
                    ms: 90.0,
                },
            ],
            handbacks: vec![Step {
                who: "0".into(),
                ms: 12.5,
            }],
            ..LoggedCosts::default()
        };
        let shutdown = Shutdown {
            service: "guard".into(),
            stop_ms: 640.0,
            needed_sigkill: false,
            exit: Some("exit status: 0".into()),
            pool_files_left: vec!["/p/kvcr-a".into()],
            killed_service_pools: vec!["/p/kvcr-a".into()],
        };
        let r = PoolCostRow::of("phase3_scale", "r1", &logged, &[300.0, 350.0], &[shutdown]);
        assert_eq!(r.pool_bytes, 1 << 30);
        assert_eq!(r.registration_ms, Some(350.0));
        assert_eq!(r.promotion_ms, Some(90.0));
        assert_eq!(r.handback_ms, Some(12.5));
        assert_eq!(r.shutdown_ms, Some(640.0));
        assert_eq!(r.pool_files_left, 1);
        let none = PoolCostRow::of("t", "r", &LoggedCosts::default(), &[], &[]);
        assert_eq!((none.registration_ms, none.shutdown_ms), (None, None));
    }

    #[test]
    fn the_section_tables_and_charts_every_size_in_order() {
        let mut slow = row("phase3_scale_4g", 4, 310.0);
        slow.violations = vec!["a promotion took 2500 ms, past <the deadline>".into()];
        let costs = GuardCosts {
            rows: vec![slow, row("phase3_scale", 1, 80.0)],
            ..GuardCosts::default()
        };
        let html = section(Some(&costs)).unwrap();
        let one = html.find("<td>1.00 GiB</td>").unwrap();
        let four = html.find("<td>4.00 GiB</td>").unwrap();
        assert!(one < four, "rows by pool size");
        assert!(html.contains("<td class=\"num\">310.0</td>"));
        assert!(html.contains("within KVCR's deadlines"));
        assert!(html.contains("past &lt;the deadline&gt;"));
        assert!(html.contains("<svg"), "a chart");
        assert!(html.contains("Guard pool cost against pool size"));
        assert_eq!(section(None).unwrap(), "");
    }

    #[test]
    fn series_are_by_pool_size_and_skip_missing_steps() {
        let (a, b) = (row("x", 4, 300.0), row("y", 1, 80.0));
        let s = series(&[&a, &b]);
        let names: Vec<&str> = s.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["registration", "promotion", "handback"]);
        assert_eq!(s[1].1, vec![(1.0, 80.0), (4.0, 300.0)]);
    }
}
