//! The engine's stored findings (`bisects.findings`) as the report reads them: commits
//! named with their subjects, the contradicted direction, the budget and the cost of more.

use perfbisect_report::{
    Budget, Candidate, ChangeStep, Commit, Cost, RangeFindings, StatedDirection,
};
use perfbisect_wire::findings::EngineFindings;

/// `None` when nothing was stored (a bisect that ended before the engine saw both
/// endpoints, or one stored before findings existed).
pub fn range_findings(
    stored: Option<&serde_json::Value>,
    direction: Option<&str>,
    (max_runs, runs_done): (i32, i64),
    commit: impl Fn(&str) -> Commit,
) -> Option<RangeFindings> {
    let f: EngineFindings = serde_json::from_value(stored?.clone()).ok()?;
    let contradicted = match (f.direction_contradicted, direction) {
        (true, Some("increase")) => Some(StatedDirection::Increase),
        (true, Some("decrease")) => Some(StatedDirection::Decrease),
        _ => None,
    };
    Some(RangeFindings {
        change: f.change,
        changes: f
            .changes
            .iter()
            .map(|c| ChangeStep {
                culprit: c.culprit.as_deref().map(&commit),
                probability: c.probability,
                candidates: c
                    .candidates
                    .iter()
                    .map(|k| Candidate {
                        commit: commit(&k.sha),
                        probability: k.probability,
                    })
                    .collect(),
                change: c.change,
                below_interest: c.below_interest,
            })
            .collect(),
        more_than_one_change: f.more_than_one_change,
        contradicted,
        more: f.prediction.as_ref().map(|p| Cost {
            runs: p.runs,
            builds: p.builds,
            machine_secs: p.machine_secs,
        }),
        budget: Some(Budget {
            max_runs: max_runs.max(0) as u32,
            runs_done: runs_done.max(0) as u32,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contrary_hint_names_the_stated_direction() {
        let json = serde_json::json!({
            "change": -0.03, "noise": 0.01, "direction_contradicted": true,
            "prediction": {"runs": 10, "builds": 2, "machine_secs": null},
            "changes": [{"culprit": "ab", "probability": 0.995, "candidates": [], "change": -0.03}],
            "more_than_one_change": false, "verification_alpha": 0.01,
            "verification_evalue": null, "costs": null
        });
        let commit = |sha: &str| Commit {
            sha: sha.into(),
            subject: format!("subject of {sha}"),
            author: None,
        };
        let f = range_findings(Some(&json), Some("increase"), (100, 40), commit).unwrap();
        assert_eq!(f.contradicted, Some(StatedDirection::Increase));
        assert_eq!(
            f.changes[0].culprit.as_ref().unwrap().subject,
            "subject of ab"
        );
        assert_eq!(f.more.unwrap().runs, 10);
        assert_eq!(
            f.budget,
            Some(Budget {
                max_runs: 100,
                runs_done: 40
            })
        );
        assert!(range_findings(None, None, (1, 1), commit).is_none());
    }
}
