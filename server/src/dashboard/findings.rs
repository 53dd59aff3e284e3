//! The engine's findings on the bisect page: every change point (when the range holds more
//! than one), the change across the range as (bad − good) / good, a stated direction the
//! data contradict, and the prediction of what the target still costs against the budget.

use super::format::{self, short_sha};
use perfbisect_wire::api::{Bisect, status_is_final, status_met_target};
use perfbisect_wire::findings::EngineFindings;
use std::collections::HashMap;

/// One commit of a change point.
pub struct StepCommit {
    pub sha: String,
    pub short: String,
    pub subject: String,
    pub p: String,
}

/// One change point, in history order.
pub struct StepView {
    /// `+10.0%`: (level after − level before) / good level.
    pub change: String,
    /// The culprit's probability, or the candidate set's.
    pub p: String,
    /// The culprit, when one commit holds the target.
    pub culprit: Option<StepCommit>,
    /// Otherwise the commits it may be.
    pub candidates: Vec<StepCommit>,
    /// Not named: its commit's own step is below the size the bisect looks for.
    pub below_interest: bool,
}

pub struct FindingsView {
    /// `+21.0%`.
    pub range_change: Option<String>,
    /// Noise of one run relative to the good level: `1.0%`.
    pub noise: Option<String>,
    /// The contradicted direction hint, as a sentence.
    pub contrary: Option<String>,
    /// The range holds more than one change.
    pub several: bool,
    pub steps: Vec<StepView>,
    /// `about 42 more runs, 3 builds and 5 min of machine time`; none once found or not
    /// reproduced (the target is met).
    pub prediction: Option<String>,
    /// `the budget: 120 runs, 80 used`.
    pub budget: String,
}

/// The findings of `b`, with the commits' subjects from `subjects` (sha → subject).
pub fn view(b: &Bisect, subjects: &HashMap<String, String>) -> Option<FindingsView> {
    let f: &EngineFindings = b.findings.as_ref()?;
    let commit = |sha: &str, p: f64| StepCommit {
        sha: sha.to_string(),
        short: short_sha(sha).to_string(),
        subject: subjects.get(sha).cloned().unwrap_or_default(),
        p: format::probability(p),
    };
    let steps = f
        .changes
        .iter()
        .map(|c| StepView {
            change: pct(c.change),
            p: format::probability(c.probability),
            culprit: c.culprit.as_deref().map(|s| commit(s, c.probability)),
            candidates: if c.culprit.is_some() {
                Vec::new()
            } else {
                c.candidates
                    .iter()
                    .map(|k| commit(&k.sha, k.probability))
                    .collect()
            },
            below_interest: c.below_interest,
        })
        .collect();
    let contrary = f.direction_contradicted.then(|| {
        let stated = b.direction.as_deref().unwrap_or("the other way");
        match f.change {
            Some(c) => format!(
                "The data contradict the stated direction ({stated}): the metric changed by {} \
                 from good to bad.",
                pct(c)
            ),
            None => format!("The data contradict the stated direction ({stated})."),
        }
    });
    let prediction = f
        .prediction
        .as_ref()
        .filter(|_| !status_met_target(&b.status))
        .map(|p| {
            let time = p
                .machine_secs
                .map(|s| {
                    format!(
                        " and {} of machine time",
                        format::duration(s.round() as i64)
                    )
                })
                .unwrap_or_default();
            format!("about {} more runs, {} builds{time}", p.runs, p.builds)
        });
    let left = (b.max_runs as usize).saturating_sub(b.runs_done);
    let budget = if status_is_final(&b.status) {
        format!("{} runs, {} used", b.max_runs, b.runs_done)
    } else {
        format!("{} runs, {left} left", b.max_runs)
    };
    Some(FindingsView {
        range_change: f.change.map(pct),
        noise: f.noise.map(|n| format!("{:.2}%", 100.0 * n)),
        contrary,
        several: f.changes.len() > 1 || f.more_than_one_change,
        steps,
        prediction,
        budget,
    })
}

/// Every sha the findings name, to look their subjects up.
pub fn shas(b: &Bisect) -> Vec<String> {
    let Some(f) = &b.findings else {
        return Vec::new();
    };
    f.changes
        .iter()
        .flat_map(|c| {
            c.culprit
                .iter()
                .cloned()
                .chain(c.candidates.iter().map(|k| k.sha.clone()))
        })
        .collect()
}

fn pct(fraction: f64) -> String {
    crate::change::signed_pct(100.0 * fraction)
}
