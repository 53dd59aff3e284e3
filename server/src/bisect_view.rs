//! One bisect as the API and the dashboard both show it: the stored row with per-commit
//! statistics derived from its runs (`load`), and the change a list row shows
//! (`summary_change`). Reads only; shared so a bisect reads the same on the page as in the API.

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store;
use chrono::Utc;
use perfbisect_engine::Summary;
use perfbisect_wire::api::{Bisect, CommitInfo, CommitStats, Culprit, Revision};
use std::collections::HashMap;

/// The full view of one bisect, with per-commit statistics derived from its runs.
pub async fn load(state: &AppState, id: i64) -> ApiResult<Bisect> {
    let b = store::bisects::view(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no bisect with id {id}")))?;
    let runs = store::runs::outcomes(&state.db, id, &b.metric).await?;
    let skipped = store::tasks::skipped(&state.db, id).await?;
    // Only the commits this view shows (measured, skipped, the culprit, the good endpoint):
    // a large range's other candidates are not read.
    let mut shown: Vec<&str> = runs.iter().map(|r| r.0.as_str()).collect();
    shown.extend(skipped.iter().map(|s| s.0.as_str()));
    shown.extend(b.culprit_sha.as_deref());
    shown.sort_unstable();
    shown.dedup();
    let commits = store::candidates::shown(&state.db, id, &shown).await?;
    let (runs_done, tasks_pending) = store::bisects::progress_counts(&state.db, id).await?;

    let mut samples: HashMap<&str, (Vec<f64>, usize)> = HashMap::new();
    for (sha, completed, value) in &runs {
        let entry = samples.entry(sha.as_str()).or_default();
        match (completed, value) {
            (true, Some(v)) => entry.0.push(*v),
            _ => entry.1 += 1,
        }
    }
    let skip_reasons: HashMap<&str, Option<String>> = skipped
        .iter()
        .map(|(s, r)| (s.as_str(), r.clone()))
        .collect();
    let mut assessed: HashMap<String, (String, Option<f64>)> = HashMap::new();
    if let Some(list) = b.assessments.as_array() {
        for a in list {
            if let Some(sha) = a["sha"].as_str() {
                let verdict = a["verdict"].as_str().unwrap_or("unknown").to_string();
                assessed.insert(sha.to_string(), (verdict, a["p"].as_f64()));
            }
        }
    }
    let candidates_total = match b.candidates_total {
        Some(n) => n as usize,
        None => store::candidates::count(&state.db, id).await? as usize,
    };
    let candidates_remaining = if b.culprit_sha.is_some() {
        1
    } else if let Some(n) = b.candidates_remaining {
        n as usize
    } else {
        remaining(&assessed, b.confidence)
    };
    let mut out = Vec::new();
    let mut culprit = None;
    for (idx, sha, subject, author) in &commits {
        if Some(sha) == b.culprit_sha.as_ref() {
            culprit = Some(Culprit {
                commit: CommitInfo {
                    sha: sha.clone(),
                    subject: subject.clone(),
                    author: author.clone(),
                },
                confidence: b.culprit_confidence.unwrap_or(0.0),
            });
        }
        let measured = samples.get(sha.as_str());
        let skip = skip_reasons.get(sha.as_str());
        if measured.is_none() && skip.is_none() && Some(sha) != b.culprit_sha.as_ref() {
            continue;
        }
        let (values, incomplete) = measured.cloned().unwrap_or_default();
        let summary = Summary::of(&values);
        let role = if *idx < 0 {
            "good_endpoint"
        } else if *sha == b.bad_sha {
            "bad_endpoint"
        } else {
            "candidate"
        };
        let (verdict, p) = if *idx < 0 {
            ("good".to_string(), None)
        } else if skip.is_some() {
            ("skipped".to_string(), None)
        } else {
            assessed
                .get(sha)
                .cloned()
                .unwrap_or(("unknown".into(), None))
        };
        out.push(CommitStats {
            sha: sha.clone(),
            subject: subject.clone(),
            role: role.into(),
            verdict,
            n: values.len(),
            incomplete_runs: incomplete,
            mean: summary.map(|s| s.mean),
            stddev: summary.filter(|s| s.n > 1).map(|s| s.stddev),
            min: summary.map(|s| s.min),
            median: summary.map(|s| s.median),
            max: summary.map(|s| s.max),
            culprit_probability: p,
            skip_reason: skip.cloned().flatten(),
        });
    }
    let measured_change = measured_change(state, &b).await?;
    let progress = {
        let is_final = b.status.is_final();
        let end = b.finished_at.unwrap_or_else(Utc::now);
        let inputs = |probabilities| crate::progress::Inputs {
            probabilities,
            candidates_total,
            runs_done: runs_done as usize,
            max_runs: b.max_runs.max(0) as usize,
            elapsed_secs: (end - b.created_at).num_milliseconds() as f64 / 1000.0,
            is_final,
        };
        // While the search runs, progress needs every candidate's probability: the advance
        // keeps them in brief on the row (`bisects.belief`). Once ended (or before the first
        // round), `bisects.assessments` holds the measured points' probabilities.
        let stored = if is_final {
            None
        } else {
            crate::store::summaries::belief(&state.db, id).await?
        };
        match stored {
            Some(belief) => crate::progress::with_belief(&belief, &inputs(&[])),
            None => {
                let probabilities: Vec<(&str, f64)> = assessed
                    .iter()
                    .filter_map(|(sha, (_, p))| p.map(|p| (sha.as_str(), p)))
                    .collect();
                crate::progress::compute(&inputs(&probabilities))
            }
        }
    };
    Ok(Bisect {
        measured_change,
        progress: Some(progress),
        id: b.id,
        repository: b.repository,
        good: Revision {
            rev: b.good_rev,
            sha: b.good_sha,
        },
        bad: Revision {
            rev: b.bad_rev,
            sha: b.bad_sha,
        },
        metric: b.metric,
        direction: b.direction,
        confidence: b.confidence,
        max_runs: b.max_runs as u32,
        status: b.status.as_str().to_string(),
        status_reason: b.status_reason,
        testcase: b.testcase,
        tbox_group: b.tbox_group,
        job_hash: b.job_hash,
        candidates_total,
        candidates_remaining,
        runs_done: runs_done as usize,
        tasks_pending: tasks_pending as usize,
        culprit,
        commits: out,
        created_at: b.created_at,
        updated_at: b.updated_at,
        finished_at: b.finished_at,
        findings: b.findings.and_then(|f| serde_json::from_value(f).ok()),
        materials: crate::materials::for_api(&state.db, id, &state.public_url).await?,
    })
}

/// The change shown for a bisect (`crate::change`): its culprit against the culprit's first
/// parent in the candidate set (or the good endpoint), else the endpoints.
async fn measured_change(
    state: &AppState,
    b: &store::bisects::View,
) -> ApiResult<Option<perfbisect_wire::api::MeasuredChange>> {
    change_between(
        state,
        b.id,
        &b.metric,
        &b.good_sha,
        &b.bad_sha,
        b.culprit_sha.as_deref(),
    )
    .await
}

/// The change of a list row (one bisect's summary), measured as on its own page: as the
/// advance stored it, else (not stored yet) from the runs.
pub async fn summary_change(
    state: &AppState,
    b: &crate::store::summaries::SummaryRow,
) -> ApiResult<Option<perfbisect_wire::api::MeasuredChange>> {
    if let Some(stored) = &b.measured_change {
        return Ok(stored.0.clone());
    }
    change_between(
        state,
        b.id,
        &b.metric,
        &b.good_sha,
        &b.bad_sha,
        b.culprit_sha.as_deref(),
    )
    .await
}

async fn change_between(
    state: &AppState,
    bisect: i64,
    metric: &str,
    good_sha: &str,
    bad_sha: &str,
    culprit_sha: Option<&str>,
) -> ApiResult<Option<perfbisect_wire::api::MeasuredChange>> {
    let kpi = state.mail.report.kpi_table();
    let mut db = state.db.acquire().await?;
    Ok(crate::change::of_bisect(
        &mut db,
        bisect,
        metric,
        good_sha,
        bad_sha,
        culprit_sha,
        &kpi,
    )
    .await?)
}

/// How many candidates are still in the running: with probabilities, the size of the smallest
/// set holding `confidence` of the mass (the credible set); without, the undecided ones.
fn remaining(assessed: &HashMap<String, (String, Option<f64>)>, confidence: f64) -> usize {
    let mut ps: Vec<f64> = assessed.values().filter_map(|(_, p)| *p).collect();
    if ps.is_empty() {
        return assessed.values().filter(|(v, _)| v == "unknown").count();
    }
    ps.sort_by(|a, b| b.total_cmp(a));
    let mut mass = 0.0;
    for (i, p) in ps.iter().enumerate() {
        mass += p;
        if mass >= confidence {
            return i + 1;
        }
    }
    ps.len()
}
