//! The report's "Degraded link" section: remote-hit TTFT per link
//! condition against the clean link, with its bootstrap interval, from the
//! measurement a degraded-link case (TC-14) leaves under
//! [`TTFT_BY_CONDITION`]. Absent when no such case ran.

use std::fmt::Write;

use serde_json::Value;

use super::record::RunRecord;
use super::report::esc;

/// The measurement key: a list of per-condition summaries
/// (`verdict::degraded_link::ConditionSummary`).
pub const TTFT_BY_CONDITION: &str = "ttft_by_condition";

/// The section for `run`; empty when no case measured it.
pub fn section(run: &RunRecord) -> String {
    let measured: Vec<(&str, &Value)> = run
        .cases
        .iter()
        .filter_map(|c| {
            c.measurements
                .get(TTFT_BY_CONDITION)
                .map(|m| (c.name.as_str(), m))
        })
        .collect();
    render(&measured)
}

/// One table per case: condition, pulls, how they ended, the remote-hit
/// TTFT p50 with its interval, and its ratio to the clean link's.
pub fn render(measured: &[(&str, &Value)]) -> String {
    if measured.is_empty() {
        return String::new();
    }
    let mut o = String::from("<section><h2>Degraded link: remote-hit TTFT per condition</h2>");
    for (case, summaries) in measured {
        let _ = write!(
            o,
            "<p>{}</p><table><tr><th>condition</th><th>pulls</th><th>reconciled</th>\
             <th>failed cleanly</th><th>TTFT p50 ms</th><th>95 % interval</th><th>× clean</th></tr>",
            esc(case)
        );
        for s in summaries.as_array().into_iter().flatten() {
            let ttft = &s["remote_hit_ttft_ms"];
            let num = |v: &Value| v.as_f64().map_or("–".to_string(), |x| format!("{x:.1}"));
            let interval = match (
                ttft["interval"]["lo"].as_f64(),
                ttft["interval"]["hi"].as_f64(),
            ) {
                (Some(lo), Some(hi)) => format!("{lo:.1} – {hi:.1}"),
                _ => "–".into(),
            };
            let ratio = s["ratio_to_clean"]
                .as_f64()
                .map_or("–".to_string(), |r| format!("{r:.2}"));
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{interval}</td><td>{ratio}</td></tr>",
                esc(s["label"].as_str().unwrap_or("")),
                s["pulls"],
                s["reconciled"],
                s["failed_cleanly"],
                num(&ttft["value"]),
            );
        }
        o.push_str("</table>");
    }
    o.push_str("</section>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_condition_is_a_row_and_no_measurement_no_section() {
        let m = json!([
            {"condition": "clean", "label": "clean link", "pulls": 8, "reconciled": 8, "failed_cleanly": 0,
             "remote_hit_ttft_ms": {"n": 8, "value": 101.5, "interval": {"lo": 95.0, "hi": 110.25}},
             "ratio_to_clean": 1.0},
            {"condition": "loss", "label": "loss 3 % each way", "pulls": 8, "reconciled": 0, "failed_cleanly": 8,
             "remote_hit_ttft_ms": null, "ratio_to_clean": null}
        ]);
        let html = render(&[("degraded_link", &m)]);
        assert!(html.contains("<td>clean link</td><td>8</td><td>8</td><td>0</td><td>101.5</td><td>95.0 – 110.2</td><td>1.00</td>"), "{html}");
        assert!(html.contains("<td>loss 3 % each way</td><td>8</td><td>0</td><td>8</td><td>–</td><td>–</td><td>–</td>"), "{html}");
        assert_eq!(render(&[]), "");
    }
}
