//! What to measure next, and when the answer is known: dispatches to `bayes` or `threshold`.

use crate::types::{Assessment, Decision, Explained, Findings, Settings, Strategy};
use crate::{CandidateGraph, Evidence};

/// The decision for the current evidence, plus the per-point assessments that explain it.
pub fn decide(
    graph: &CandidateGraph,
    evidence: &Evidence,
    settings: &Settings,
) -> (Decision, Vec<Assessment>) {
    let e = decide_explained(graph, evidence, settings);
    (e.decision, e.assessments)
}

/// [`decide`], with the engine's [`Findings`] (measured change, prediction, change points).
pub fn decide_explained(
    graph: &CandidateGraph,
    evidence: &Evidence,
    settings: &Settings,
) -> Explained {
    match settings.strategy {
        Strategy::Bayes => crate::bayes::decide(graph, evidence, settings),
        Strategy::Threshold => {
            let (decision, assessments) = crate::threshold::decide(graph, evidence, settings);
            Explained {
                decision,
                assessments,
                findings: Findings::default(),
            }
        }
    }
}
