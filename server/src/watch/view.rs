//! Watches as the API and the dashboard both show them: the watches, their series per
//! (branch, metric) and their change points. Reads only.

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use chrono::{DateTime, Utc};
use perfbisect_wire::watch::{ChangePoint, Series, Watch};

#[derive(sqlx::FromRow)]
struct WatchRow {
    id: i64,
    name: String,
    repository: String,
    branch: String,
    testcase: String,
    job_hash: String,
    metrics: serde_json::Value,
    host_group: String,
    cadence_secs: i32,
    runs_per_head: i32,
    sample_commits: i32,
    backfill: i32,
    recipients: serde_json::Value,
    enabled: bool,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    polled_at: Option<DateTime<Utc>>,
    heads: i64,
}

impl WatchRow {
    fn into_wire(self) -> Watch {
        Watch {
            id: self.id,
            name: self.name,
            repository: self.repository,
            branch: self.branch,
            testcase: self.testcase,
            job_hash: self.job_hash,
            metrics: serde_json::from_value(self.metrics).unwrap_or_default(),
            host_group: self.host_group,
            cadence_secs: self.cadence_secs as u32,
            runs_per_head: self.runs_per_head as u32,
            sample_commits: self.sample_commits as u32,
            backfill: self.backfill as u32,
            recipients: serde_json::from_value(self.recipients).unwrap_or_default(),
            enabled: self.enabled,
            created_at: self.created_at,
            updated_at: self.updated_at,
            polled_at: self.polled_at,
            heads: self.heads as u64,
        }
    }
}

pub async fn load_watches(state: &AppState, id: Option<i64>) -> ApiResult<Vec<Watch>> {
    let rows: Vec<WatchRow> = sqlx::query_as(
        "SELECT w.id, w.name, r.name AS repository, w.ref_pattern AS branch, j.testcase,
                j.hash AS job_hash, w.metrics, w.host_group, w.cadence_secs, w.runs_per_head,
                w.sample_commits, w.backfill, w.recipients, w.enabled, w.created_at, w.updated_at,
                w.polled_at, (SELECT count(*) FROM watch_heads h WHERE h.watch_id = w.id) AS heads
         FROM watches w JOIN repositories r ON r.id = w.repository_id
         JOIN job_specs j ON j.id = w.job_spec_id
         WHERE $1::bigint IS NULL OR w.id = $1 ORDER BY w.id",
    )
    .bind(id)
    .fetch_all(&state.db)
    .await?;
    Ok(rows.into_iter().map(WatchRow::into_wire).collect())
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
    for b in crate::watch::series::branches(&state.db, id).await? {
        if branch.is_some_and(|want| want != b) {
            continue;
        }
        for m in &watch.metrics {
            if metric.is_some_and(|want| want != m.name) {
                continue;
            }
            let points = crate::watch::series::load(&state.db, id, &b, &m.name, 0).await?;
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

#[derive(sqlx::FromRow)]
struct ChangeRow {
    id: i64,
    watch_id: i64,
    watch: String,
    branch: String,
    metric: String,
    before_sha: String,
    before_seq: i32,
    after_sha: String,
    after_seq: i32,
    detected_seq: i32,
    detection: serde_json::Value,
    relative: f64,
    confidence: f64,
    action: String,
    bisect_id: Option<i64>,
    bisect_status: Option<String>,
    culprit_sha: Option<String>,
    message: Option<String>,
    created_at: DateTime<Utc>,
}

/// Change points, newest first: of one watch or of all; `open` keeps those whose bisect is
/// to be opened or still running.
pub async fn load_changes(
    state: &AppState,
    watch: Option<i64>,
    open: bool,
) -> ApiResult<Vec<ChangePoint>> {
    let rows: Vec<ChangeRow> = sqlx::query_as(
        "SELECT c.id, c.watch_id, w.name AS watch, c.ref_name AS branch, c.metric,
                hb.sha AS before_sha, hb.seq AS before_seq, ha.sha AS after_sha, ha.seq AS after_seq,
                hd.seq AS detected_seq, c.detection, c.relative, c.confidence, c.action, c.bisect_id,
                b.status AS bisect_status, b.culprit_sha, c.message, c.created_at
         FROM watch_changes c JOIN watches w ON w.id = c.watch_id
         JOIN watch_heads hb ON hb.id = c.before_head_id
         JOIN watch_heads ha ON ha.id = c.after_head_id
         JOIN watch_heads hd ON hd.id = c.detected_head_id
         LEFT JOIN bisects b ON b.id = c.bisect_id
         WHERE ($1::bigint IS NULL OR c.watch_id = $1)
           AND (NOT $2 OR (c.action IN ('bisecting', 'duplicate') AND (b.status IS NULL OR
                b.status NOT IN ('found', 'not_reproduced', 'inconclusive', 'failed', 'cancelled'))))
         ORDER BY c.id DESC",
    )
    .bind(watch)
    .bind(open)
    .fetch_all(&state.db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let level = |k: &str| {
                r.detection
                    .get(k)
                    .and_then(|v| v.as_f64())
                    .unwrap_or(f64::NAN)
            };
            ChangePoint {
                id: r.id,
                watch_id: r.watch_id,
                watch: r.watch.clone(),
                branch: r.branch.clone(),
                metric: r.metric.clone(),
                before_sha: r.before_sha.clone(),
                before_seq: r.before_seq,
                after_sha: r.after_sha.clone(),
                after_seq: r.after_seq,
                detected_seq: r.detected_seq,
                before: level("before"),
                after: level("after"),
                change_pct: r.relative * 100.0,
                confidence: r.confidence,
                action: r.action.clone(),
                bisect_id: r.bisect_id,
                bisect_status: r.bisect_status.clone(),
                culprit_sha: r.culprit_sha.clone(),
                message: r.message.clone(),
                created_at: r.created_at,
            }
        })
        .collect())
}
