//! A (watch, branch, metric) series read from the stored runs. The value of a commit is the
//! mean of its complete runs, derived here every time: no table holds it.

use chrono::{DateTime, Utc};
use perfbisect_wire::watch::SeriesPoint;

/// One measured commit of a series, with what the analysis needs to know about it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PointRow {
    pub head_id: i64,
    pub seq: i32,
    pub sha: String,
    pub subject: String,
    pub kind: String,
    pub seen_at: DateTime<Utc>,
    /// The state of its task (`queued` … `done`); `queued` when it has none.
    pub state: String,
    pub runs: Vec<f64>,
}

impl PointRow {
    /// Whether its measurement is over (whatever came of it).
    pub fn finished(&self) -> bool {
        !matches!(self.state.as_str(), "queued" | "running")
    }

    pub fn mean(&self) -> Option<f64> {
        perfbisect_changepoint::head_value(&self.runs)
    }

    pub fn to_wire(&self) -> SeriesPoint {
        SeriesPoint {
            seq: self.seq,
            sha: self.sha.clone(),
            subject: self.subject.clone(),
            kind: self.kind.clone(),
            seen_at: self.seen_at,
            runs: self.runs.clone(),
            mean: self.mean(),
            state: self.state.clone(),
        }
    }
}

/// The points of a series in order, `from_seq` on.
pub async fn load<'e>(
    db: impl sqlx::PgExecutor<'e>,
    watch_id: i64,
    branch: &str,
    metric: &str,
    from_seq: i32,
) -> sqlx::Result<Vec<PointRow>> {
    sqlx::query_as(
        "SELECT h.id AS head_id, h.seq, h.sha, h.subject, h.kind, h.seen_at,
                coalesce(t.state, 'queued') AS state,
                coalesce(array_agg((r.metrics ->> $3)::float8 ORDER BY r.iteration)
                         FILTER (WHERE r.completed AND r.metrics ? $3), '{}') AS runs
         FROM watch_heads h
         LEFT JOIN tasks t ON t.watch_head_id = h.id
         LEFT JOIN runs r ON r.task_id = t.id
         WHERE h.watch_id = $1 AND h.ref_name = $2 AND h.seq >= $4
         GROUP BY h.id, t.id
         ORDER BY h.seq",
    )
    .bind(watch_id)
    .bind(branch)
    .bind(metric)
    .bind(from_seq)
    .fetch_all(db)
    .await
}

/// The branches a watch has measured, in name order.
pub async fn branches<'e>(
    db: impl sqlx::PgExecutor<'e>,
    watch_id: i64,
) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT DISTINCT ref_name FROM watch_heads WHERE watch_id = $1 ORDER BY ref_name",
    )
    .bind(watch_id)
    .fetch_all(db)
    .await
}
