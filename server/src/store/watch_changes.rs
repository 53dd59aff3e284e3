//! `watch_changes`: the change points found in a series, each with what was done about it
//! (`action`: bisecting, duplicate, ignored, failed) and the bisect that answers it.

use perfbisect_wire::watch::ChangePoint;
use sqlx::{PgConnection, PgPool};

/// The seq of the first head after the series' last recorded change, if it has one.
pub async fn last_change_seq(
    tx: &mut PgConnection,
    watch: i64,
    branch: &str,
    metric: &str,
) -> sqlx::Result<Option<i32>> {
    sqlx::query_scalar!(
        "SELECT max(h.seq) FROM watch_changes c JOIN watch_heads h ON h.id = c.after_head_id
         WHERE c.watch_id = $1 AND c.ref_name = $2 AND c.metric = $3",
        watch,
        branch,
        metric,
    )
    .fetch_one(tx)
    .await
}

/// A change point as the analysis found it.
pub struct NewChange<'a> {
    pub watch: i64,
    pub branch: &'a str,
    pub metric: &'a str,
    /// The last head before the change, the first after it, and the head that showed it.
    pub before_head: i64,
    pub after_head: i64,
    pub detected_head: i64,
    pub relative: f64,
    pub confidence: f64,
    /// The detector's record of it (`perfbisect_changepoint::Change`).
    pub detection: serde_json::Value,
    pub action: &'a str,
    pub message: Option<&'a str>,
}

/// Records a change point; one already recorded at the same first head is kept as it is.
pub async fn record(tx: &mut PgConnection, c: &NewChange<'_>) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO watch_changes (watch_id, ref_name, metric, before_head_id, after_head_id,
             detected_head_id, relative, confidence, detection, action, message)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
         ON CONFLICT (watch_id, ref_name, metric, after_head_id) DO NOTHING",
        c.watch,
        c.branch,
        c.metric,
        c.before_head,
        c.after_head,
        c.detected_head,
        c.relative,
        c.confidence,
        c.detection,
        c.action,
        c.message,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// A change that should open a bisect and has none yet, with what its submission needs.
#[derive(Debug)]
pub struct Pending {
    pub id: i64,
    pub watch_id: i64,
    pub metric: String,
    pub relative: f64,
    pub repository_id: i64,
    pub repository: String,
    pub job_spec_id: i64,
    pub job_yaml: String,
    /// The addresses to notify, a JSON list.
    pub recipients: serde_json::Value,
    pub created_by: Option<i64>,
    /// The range: one measured commit wider on each side than the detected pair, where the
    /// series has one (`watch::open::open_pending`).
    pub good_sha: String,
    pub bad_sha: String,
}

impl Pending {
    /// The range's key in `watch_bisects`.
    pub fn range(&self) -> super::watch_bisects::Range<'_> {
        super::watch_bisects::Range {
            repository_id: self.repository_id,
            job_spec_id: self.job_spec_id,
            good_sha: &self.good_sha,
            bad_sha: &self.bad_sha,
        }
    }
}

/// Every pending change, oldest first.
pub async fn pending(db: &PgPool) -> sqlx::Result<Vec<Pending>> {
    sqlx::query_as!(
        Pending,
        r#"SELECT c.id, c.watch_id, c.metric, c.relative, w.repository_id, r.name AS repository,
                  w.job_spec_id, j.yaml AS job_yaml, w.recipients, w.created_by,
                  COALESCE(hg.sha, hb.sha) AS "good_sha!", COALESCE(hr.sha, ha.sha) AS "bad_sha!"
           FROM watch_changes c
           JOIN watches w ON w.id = c.watch_id
           JOIN repositories r ON r.id = w.repository_id
           JOIN job_specs j ON j.id = w.job_spec_id
           JOIN watch_heads hb ON hb.id = c.before_head_id
           JOIN watch_heads ha ON ha.id = c.after_head_id
           LEFT JOIN watch_heads hg ON hg.watch_id = hb.watch_id AND hg.ref_name = hb.ref_name
                                   AND hg.seq = hb.seq - 1
           LEFT JOIN watch_heads hr ON hr.watch_id = ha.watch_id AND hr.ref_name = ha.ref_name
                                   AND hr.seq = ha.seq + 1
           WHERE c.action = 'bisecting' AND c.bisect_id IS NULL
           ORDER BY c.id"#,
    )
    .fetch_all(db)
    .await
}

/// Locks the change until the transaction ends if it is still pending and no one else holds
/// it; whether it did.
pub async fn lock_pending(tx: &mut PgConnection, change: i64) -> sqlx::Result<bool> {
    let still = sqlx::query_scalar!(
        "SELECT id FROM watch_changes WHERE id = $1 AND action = 'bisecting' AND bisect_id IS NULL
         FOR UPDATE SKIP LOCKED",
        change,
    )
    .fetch_optional(tx)
    .await?;
    Ok(still.is_some())
}

/// The change opened `bisect`.
pub async fn opened(tx: &mut PgConnection, change: i64, bisect: i64) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE watch_changes SET bisect_id = $2 WHERE id = $1",
        change,
        bisect,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// The change's bisect could not be opened, for `message`.
pub async fn failed(tx: &mut PgConnection, change: i64, message: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE watch_changes SET action = 'failed', message = $2 WHERE id = $1",
        change,
        message,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// Links a change to the bisect that answers it: `why`, then the bisect's id.
pub async fn mark_duplicate(
    tx: &mut PgConnection,
    change: i64,
    bisect: i64,
    why: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE watch_changes SET action = 'duplicate', bisect_id = $2, message = $3 WHERE id = $1",
        change,
        bisect,
        format!("{why} {bisect}"),
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// Change points as the API and the pages show them, newest first: of one watch or of all;
/// `open` keeps those whose bisect is to be opened or still running. The levels before and
/// after are the detector's (`detection`), NaN where it recorded none.
pub async fn list(db: &PgPool, watch: Option<i64>, open: bool) -> sqlx::Result<Vec<ChangePoint>> {
    sqlx::query_as!(
        ChangePoint,
        r#"SELECT c.id, c.watch_id, w.name AS watch, c.ref_name AS branch, c.metric,
                  hb.sha AS before_sha, hb.seq AS before_seq, ha.sha AS after_sha, ha.seq AS after_seq,
                  hd.seq AS detected_seq,
                  coalesce((c.detection ->> 'before')::float8, 'NaN') AS "before!",
                  coalesce((c.detection ->> 'after')::float8, 'NaN') AS "after!",
                  c.relative * 100 AS "change_pct!", c.confidence, c.action, c.bisect_id,
                  b.status AS "bisect_status?", b.culprit_sha AS "culprit_sha?", c.message,
                  c.created_at
           FROM watch_changes c JOIN watches w ON w.id = c.watch_id
           JOIN watch_heads hb ON hb.id = c.before_head_id
           JOIN watch_heads ha ON ha.id = c.after_head_id
           JOIN watch_heads hd ON hd.id = c.detected_head_id
           LEFT JOIN bisects b ON b.id = c.bisect_id
           WHERE ($1::bigint IS NULL OR c.watch_id = $1)
             AND (NOT $2 OR (c.action IN ('bisecting', 'duplicate') AND (b.status IS NULL OR
                  b.status NOT IN ('found', 'not_reproduced', 'inconclusive', 'failed', 'cancelled'))))
           ORDER BY c.id DESC"#,
        watch,
        open,
    )
    .fetch_all(db)
    .await
}
