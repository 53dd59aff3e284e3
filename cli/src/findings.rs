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
    if let Some(p) = &f.prediction {
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
