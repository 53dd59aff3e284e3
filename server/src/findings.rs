//! The engine's findings beside its decision: measured build and run costs going in, and the
//! measured change, change points and budget prediction coming out (stored on the bisect as
//! JSON for the API and the report).

use perfbisect_engine::{CandidateGraph, ChangePoint, Costs, Findings, Point};
use perfbisect_wire::findings::{
    BudgetPrediction, CandidateProbability, ChangePointView, EngineFindings, MeasuredCosts,
};
use std::collections::{BTreeSet, HashMap};

/// Median machine time of a build (a task's start to its first run) and of a run, over every
/// task of this job spec so far (earlier bisects of the same job included), and what a boot
/// adds: the median run that came first after a deployment (its boot is inside it) over the
/// median later one, where a runner says which is which (ssh; a VM a run boots every run).
pub async fn measured_costs(tx: &mut sqlx::PgConnection, job_spec: i64) -> sqlx::Result<Costs> {
    let m = crate::store::runs::median_costs(tx, job_spec).await?;
    Ok(Costs {
        build_secs: m.build.unwrap_or(0.0).max(0.0),
        // A run shorter than the clock's resolution still costs something.
        run_secs: m.run.map_or(0.0, |r| r.max(0.001)),
        boot_secs: match (m.first_after_deploy, m.later) {
            (Some(first), Some(later)) => (first - later).max(0.0),
            _ => 0.0,
        },
    })
}

/// Points whose build exists: a task for them (or paired with them) finished.
pub async fn built_points(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
    points: &HashMap<String, Point>,
) -> sqlx::Result<BTreeSet<Point>> {
    let shas = crate::store::tasks::built_shas(tx, bisect).await?;
    Ok(shas.iter().filter_map(|s| points.get(s).copied()).collect())
}

fn sha(graph: &CandidateGraph, c: usize) -> String {
    graph.id(c).to_string()
}

fn change_point(graph: &CandidateGraph, c: &ChangePoint) -> ChangePointView {
    ChangePointView {
        culprit: c.culprit.map(|k| sha(graph, k)),
        probability: c.probability,
        candidates: c
            .candidates
            .iter()
            .map(|&(k, p)| CandidateProbability {
                sha: sha(graph, k),
                probability: p,
            })
            .collect(),
        change: c.change,
        below_interest: c.below_interest,
    }
}

/// The engine's findings with commits named by sha.
pub fn to_wire(graph: &CandidateGraph, f: &Findings, costs: Costs) -> EngineFindings {
    EngineFindings {
        change: f.change,
        noise: f.noise,
        direction_contradicted: f.direction_contradicted,
        prediction: f.prediction.map(|p| BudgetPrediction {
            runs: p.runs,
            builds: p.builds,
            machine_secs: p.machine_secs,
            step_in_noise: Some(p.step_in_noise).filter(|d| d.is_finite()),
        }),
        changes: f.changes.iter().map(|c| change_point(graph, c)).collect(),
        more_than_one_change: f.misfit,
        verification_alpha: f.verification_alpha,
        verification_evalue: f.verification_evalue.filter(|e| e.is_finite()),
        costs: (costs.build_secs > 0.0 || costs.run_secs > 0.0).then_some(MeasuredCosts {
            build_secs: costs.build_secs,
            run_secs: costs.run_secs,
            boot_secs: (costs.boot_secs > 0.0).then_some(costs.boot_secs),
        }),
    }
}

/// One line per change point, for reasons and events: `abc123def456 (+2.01%)`.
pub fn describe_changes(changes: &[ChangePointView]) -> String {
    changes
        .iter()
        .map(|c| match &c.culprit {
            Some(s) => format!("{} ({:+.2}%)", &s[..12.min(s.len())], 100.0 * c.change),
            None if c.below_interest => format!(
                "{} ({:+.2}%, below the size of interest: not named)",
                c.candidates
                    .first()
                    .map_or("?", |x| &x.sha[..12.min(x.sha.len())]),
                100.0 * c.change
            ),
            None => format!(
                "one of {} ({:+.2}%)",
                c.candidates
                    .iter()
                    .take(5)
                    .map(|x| format!(
                        "{} {:.1}%",
                        &x.sha[..12.min(x.sha.len())],
                        100.0 * x.probability
                    ))
                    .collect::<Vec<_>>()
                    .join(", "),
                100.0 * c.change
            ),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub async fn store(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
    findings: &EngineFindings,
) -> sqlx::Result<()> {
    let json = serde_json::to_value(findings).unwrap_or(serde_json::Value::Null);
    crate::store::bisects::set_findings(tx, bisect, &json).await
}
