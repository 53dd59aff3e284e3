//! A watch's series: the commits it measures on each branch, in order (`watch_heads`), their
//! values read from the stored runs, and how far each (watch, branch, metric) series was
//! analysed (`watch_series`). A head's value is derived (`watch::series`), never stored.

use chrono::{DateTime, Utc};
use perfbisect_wire::states::TaskState;
use sqlx::{PgConnection, PgExecutor};
use std::collections::HashMap;

/// One measured commit of a series, with the metric's value in each of its complete runs.
#[derive(Debug, Clone)]
pub struct Point {
    pub head_id: i64,
    pub seq: i32,
    pub sha: String,
    pub subject: String,
    pub kind: String,
    pub seen_at: DateTime<Utc>,
    /// The state of its task; `queued` when it has none.
    pub state: TaskState,
    /// In run order.
    pub runs: Vec<f64>,
}

/// The points of a series in order, `from_seq` on.
pub async fn points<'e>(
    db: impl PgExecutor<'e>,
    watch: i64,
    branch: &str,
    metric: &str,
    from_seq: i32,
) -> sqlx::Result<Vec<Point>> {
    sqlx::query_as!(
        Point,
        r#"SELECT h.id AS head_id, h.seq, h.sha, h.subject, h.kind, h.seen_at,
                  coalesce(t.state, 'queued') AS "state!: TaskState",
                  coalesce(array_agg((r.metrics ->> $3)::float8 ORDER BY r.iteration)
                           FILTER (WHERE r.completed AND r.metrics ? $3), '{}') AS "runs!"
           FROM watch_heads h
           LEFT JOIN tasks t ON t.watch_head_id = h.id
           LEFT JOIN runs r ON r.task_id = t.id
           WHERE h.watch_id = $1 AND h.ref_name = $2 AND h.seq >= $4
           GROUP BY h.id, t.id
           ORDER BY h.seq"#,
        watch,
        branch,
        metric,
        from_seq,
    )
    .fetch_all(db)
    .await
}

/// The branches a watch has measured, in name order.
pub async fn branches<'e>(db: impl PgExecutor<'e>, watch: i64) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!(
        "SELECT DISTINCT ref_name FROM watch_heads WHERE watch_id = $1 ORDER BY ref_name",
        watch,
    )
    .fetch_all(db)
    .await
}

/// The last head measured on each branch of the watch: branch → sha.
pub async fn last_heads<'e>(
    db: impl PgExecutor<'e>,
    watch: i64,
) -> sqlx::Result<HashMap<String, String>> {
    let rows = sqlx::query!(
        "SELECT DISTINCT ON (ref_name) ref_name, sha FROM watch_heads
         WHERE watch_id = $1 AND kind = 'head' ORDER BY ref_name, seq DESC",
        watch,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.ref_name, r.sha)).collect())
}

/// The `seq` the next commit recorded on the branch takes.
pub async fn next_seq(tx: &mut PgConnection, watch: i64, branch: &str) -> sqlx::Result<i32> {
    sqlx::query_scalar!(
        r#"SELECT coalesce(max(seq), -1) + 1 AS "seq!" FROM watch_heads
           WHERE watch_id = $1 AND ref_name = $2"#,
        watch,
        branch,
    )
    .fetch_one(tx)
    .await
}

/// A commit a poll records for measuring.
pub struct NewHead<'a> {
    pub watch: i64,
    pub branch: &'a str,
    pub seq: i32,
    pub sha: &'a str,
    /// `head`, `sample` or `backfill`.
    pub kind: &'a str,
    pub subject: &'a str,
}

/// Records the commit; its id, or `None` when the branch has it already.
pub async fn insert_head(tx: &mut PgConnection, h: &NewHead<'_>) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!(
        "INSERT INTO watch_heads (watch_id, ref_name, seq, sha, kind, subject)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (watch_id, ref_name, sha) DO NOTHING
         RETURNING id",
        h.watch,
        h.branch,
        h.seq,
        h.sha,
        h.kind,
        h.subject,
    )
    .fetch_optional(tx)
    .await
}

/// Locks the series' row (storing it first if it is new) until the transaction ends, and
/// reads the last `seq` analysed (-1 for none).
pub async fn lock_analyzed(
    tx: &mut PgConnection,
    watch: i64,
    branch: &str,
    metric: &str,
) -> sqlx::Result<i32> {
    sqlx::query!(
        "INSERT INTO watch_series (watch_id, ref_name, metric) VALUES ($1, $2, $3)
         ON CONFLICT DO NOTHING",
        watch,
        branch,
        metric,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query_scalar!(
        "SELECT analyzed_seq FROM watch_series WHERE watch_id = $1 AND ref_name = $2 AND metric = $3
         FOR UPDATE",
        watch,
        branch,
        metric,
    )
    .fetch_one(tx)
    .await
}

/// Records that the series was analysed up to `seq`.
pub async fn set_analyzed(
    tx: &mut PgConnection,
    watch: i64,
    branch: &str,
    metric: &str,
    seq: i32,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE watch_series SET analyzed_seq = $4 WHERE watch_id = $1 AND ref_name = $2 AND metric = $3",
        watch,
        branch,
        metric,
        seq,
    )
    .execute(tx)
    .await?;
    Ok(())
}
