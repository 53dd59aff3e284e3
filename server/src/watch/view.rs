//! Watches as the API and the dashboard both show them: the watches, their series per
//! (branch, metric) and their change points. Reads only.

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store::{series, watch_changes, watches};
use perfbisect_wire::watch::{ChangePoint, Series, Watch};

fn watch_to_wire(w: watches::Listed) -> Watch {
    Watch {
        id: w.id,
        name: w.name,
        repository: w.repository,
        branch: w.branch,
        testcase: w.testcase,
        job_hash: w.job_hash,
        metrics: serde_json::from_value(w.metrics).unwrap_or_default(),
        host_group: w.host_group,
        cadence_secs: w.cadence_secs as u32,
        runs_per_head: w.runs_per_head as u32,
        sample_commits: w.sample_commits as u32,
        backfill: w.backfill as u32,
        recipients: serde_json::from_value(w.recipients).unwrap_or_default(),
        enabled: w.enabled,
        created_at: w.created_at,
        updated_at: w.updated_at,
        polled_at: w.polled_at,
        heads: w.heads as u64,
    }
}

pub async fn load_watches(state: &AppState, id: Option<i64>) -> ApiResult<Vec<Watch>> {
    let rows = watches::list(&state.db, id).await?;
    Ok(rows.into_iter().map(watch_to_wire).collect())
}

/// One watch as the API shows it; 404 when there is none.
pub async fn load_watch(state: &AppState, id: i64) -> ApiResult<Watch> {
    load_watches(state, Some(id))
        .await?
        .pop()
        .ok_or_else(|| ApiError::NotFound(format!("no watch with id {id}")))
}

/// Every watch, for the dashboard.
pub async fn all_watches(state: &AppState) -> ApiResult<Vec<Watch>> {
    load_watches(state, None).await
}

/// The series of a watch per (branch, metric), with their change points.
pub async fn load_series(
    state: &AppState,
    id: i64,
    branch: Option<&str>,
    metric: Option<&str>,
) -> ApiResult<Vec<Series>> {
    let watch = load_watch(state, id).await?;
    let changes = load_changes(state, Some(id), false).await?;
    let mut out = Vec::new();
    for b in series::branches(&state.db, id).await? {
        if branch.is_some_and(|want| want != b) {
            continue;
        }
        for m in &watch.metrics {
            if metric.is_some_and(|want| want != m.name) {
                continue;
            }
            let points = series::points(&state.db, id, &b, &m.name, 0).await?;
            out.push(Series {
                watch_id: id,
                branch: b.clone(),
                metric: m.name.clone(),
                points: points.iter().map(|p| p.to_wire()).collect(),
                changes: changes
                    .iter()
                    .filter(|c| c.branch == b && c.metric == m.name)
                    .cloned()
                    .collect(),
            });
        }
    }
    Ok(out)
}

/// Change points, newest first: of one watch or of all; `open` keeps those whose bisect is
/// to be opened or still running.
pub async fn load_changes(
    state: &AppState,
    watch: Option<i64>,
    open: bool,
) -> ApiResult<Vec<ChangePoint>> {
    Ok(watch_changes::list(&state.db, watch, open).await?)
}
