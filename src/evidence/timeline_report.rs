//! The report's timeline: every event of the run ([`crate::events`]) in
//! order, with its time from the run's start, its trial and its text.

use std::fmt::Write;

use super::record::RunRecord;
use super::report::esc;
use crate::events::RunEvent;

/// The `<section>` of the timeline ("not run" without events).
pub(super) fn section(run: &RunRecord) -> String {
    let mut o = String::from("<section><h2>Timeline</h2>");
    if run.events.is_empty() {
        o.push_str("<p class=\"notrun\">not run — no events recorded</p></section>\n");
        return o;
    }
    o.push_str(
        "<table><thead><tr><th class=\"num\">+s</th><th>at (UTC)</th><th>event</th>\
         <th>trial</th><th>what</th></tr></thead><tbody>",
    );
    for e in &run.events {
        let from_start = (e.at.0 - run.started_at.0).as_seconds_f64();
        let class = match &e.kind {
            RunEvent::Warning { .. }
            | RunEvent::DisturbsExclusive { .. }
            | RunEvent::SetupFailed { .. }
            | RunEvent::EvidenceNotWritten { .. }
            | RunEvent::MachineClock { .. } => " class=\"expected\"",
            _ => "",
        };
        let _ = write!(
            o,
            "<tr{class}><td class=\"num\">{from_start:.1}</td><td>{}</td><td>{}</td><td>{}</td><td><pre>{}</pre></td></tr>",
            esc(&e.at.rfc3339()),
            esc(&e.kind.name()),
            esc(e.kind.trial().unwrap_or_default()),
            esc(&crate::events::console::text(&e.kind)),
        );
    }
    o.push_str("</tbody></table></section>\n");
    o
}
