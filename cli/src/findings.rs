//! The engine's findings as `perfbisect status` prints them: the change across the range as
//! (bad − good) / good, a contradicted direction, every change point when there are several
//! (with the candidate sets of those not pinned down), and what the target still costs.

use perfbisect_wire::api::Bisect;

fn pct(fraction: f64) -> String {
    crate::api::signed_pct(100.0 * fraction)
}

fn short(sha: &str) -> &str {
    &sha[..12.min(sha.len())]
}

/// The lines under the bisect's headline; empty when the engine has found nothing yet.
pub fn render(b: &Bisect) -> String {
    let Some(f) = &b.findings else {
        return String::new();
    };
    let mut out = String::new();
    if let Some(c) = f.change {
        out += &format!("  across the range: {} ((bad - good) / good)", pct(c));
        if let Some(n) = f.noise {
            out += &format!(", noise {:.2}% of a run", 100.0 * n);
        }
        out += "\n";
    }
    if f.direction_contradicted {
        out += &format!(
            "  the data contradict the stated direction ({})\n",
            b.direction.as_deref().unwrap_or("none")
        );
    }
    // A found or not-reproduced bisect met its target; the prediction carried from its last
    // advance would read as work still to do. An inconclusive one keeps it: what more costs.
    let met = perfbisect_wire::api::status_met_target(&b.status);
    if let Some(p) = f.prediction.as_ref().filter(|_| !met) {
        out += &format!(
            "  to reach the target: about {} more runs, {} builds",
            p.runs, p.builds
        );
        if let Some(s) = p.machine_secs {
            out += &format!(", {s:.0} s of machine time");
        }
        out += &format!(" (budget {} runs, {} used)\n", b.max_runs, b.runs_done);
    }
    if f.changes.len() > 1 || f.more_than_one_change {
        out += "\n  more than one change, in history order:\n";
        for c in &f.changes {
            match &c.culprit {
                Some(s) => {
                    out += &format!(
                        "    {:>8}  {}  ({:.1}%)\n",
                        pct(c.change),
                        short(s),
                        100.0 * c.probability
                    )
                }
                None => {
                    out += &format!(
                        "    {:>8}  one of {} commits ({:.1}% together):",
                        pct(c.change),
                        c.candidates.len(),
                        100.0 * c.probability
                    );
                    for k in &c.candidates {
                        out += &format!(" {} {:.1}%", short(&k.sha), 100.0 * k.probability);
                    }
                    out += "\n";
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bisect(status: &str) -> Bisect {
        serde_json::from_value(serde_json::json!({
            "id": 7, "repository": "r", "metric": "m", "direction": null, "confidence": 0.99,
            "max_runs": 400, "status": status, "status_reason": null, "testcase": "t",
            "tbox_group": "g", "job_hash": "h", "candidates_total": 10,
            "candidates_remaining": 1, "runs_done": 112, "tasks_pending": 0, "culprit": null,
            "commits": [], "created_at": "2026-12-07T00:00:00Z",
            "updated_at": "2026-12-07T00:00:00Z", "finished_at": null,
            "good": {"rev": "a", "sha": "a"}, "bad": {"rev": "b", "sha": "b"},
            "findings": {"change": 0.03, "noise": 0.02,
                         "prediction": {"runs": 40, "builds": 3, "machine_secs": null},
                         "verification_alpha": 0.01, "verification_evalue": null,
                         "costs": null}
        }))
        .expect("a bisect as the API serves it")
    }

    #[test]
    fn what_the_target_still_costs_is_shown_only_while_it_is_unmet() {
        for status in ["searching", "inconclusive"] {
            let text = render(&bisect(status));
            assert!(
                text.contains("to reach the target: about 40 more runs"),
                "{status}: {text}"
            );
        }
        for status in ["found", "not_reproduced"] {
            let text = render(&bisect(status));
            assert!(text.contains("across the range: +3.0%"), "{status}: {text}");
            assert!(!text.contains("to reach the target"), "{status}: {text}");
        }
    }
}
