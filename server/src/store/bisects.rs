//! `bisects`: one search over one range for one job and metric, with its status.

use perfbisect_wire::states::BisectStatus;
use sqlx::{PgConnection, PgPool};

/// Is there a bisect with this id?
pub async fn exists(db: &PgPool, id: i64) -> sqlx::Result<bool> {
    let found = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM bisects WHERE id = $1) AS "found!""#,
        id
    )
    .fetch_one(db)
    .await?;
    Ok(found)
}

/// What an advance reads of its bisect and job.
#[derive(Debug)]
pub struct ForAdvance {
    pub status: BisectStatus,
    pub good_sha: String,
    pub metric: String,
    pub confidence: f64,
    pub max_runs: i32,
    pub direction: Option<String>,
    pub magnitude_pct: Option<f64>,
    pub job_spec_id: i64,
    pub first_parent: bool,
    pub tbox_group: String,
    /// The job's `runs_per_task`, 5 when it names none.
    pub runs_per_task: i32,
    pub assessed_round: i64,
}

pub async fn for_advance(tx: &mut PgConnection, bisect: i64) -> sqlx::Result<Option<ForAdvance>> {
    sqlx::query_as!(
        ForAdvance,
        r#"SELECT b.status AS "status: BisectStatus", b.good_sha, b.metric, b.confidence,
                  b.max_runs, b.direction, b.magnitude_pct, b.job_spec_id, b.first_parent,
                  j.tbox_group, coalesce((j.spec ->> 'runs_per_task')::int, 5) AS "runs_per_task!",
                  b.assessed_round
           FROM bisects b JOIN job_specs j ON j.id = b.job_spec_id
           WHERE b.id = $1"#,
        bisect,
    )
    .fetch_optional(tx)
    .await
}

/// Moves a bisect the scheduler works on to the status of the engine's phase, with the
/// engine's explanation when it gave one; a bisect that ended meanwhile keeps its status.
pub async fn set_phase(
    tx: &mut PgConnection,
    bisect: i64,
    status: BisectStatus,
    why: Option<&str>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE bisects SET status = $2, status_reason = coalesce($3, status_reason), updated_at = now()
         WHERE id = $1 AND status = ANY($4)",
        bisect,
        status.as_str(),
        why,
        super::SCHEDULED as &[BisectStatus],
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// Writes a bisect's final status, reason and culprit; its measured change is cleared for
/// its last advance to store again.
pub async fn finish(
    tx: &mut PgConnection,
    bisect: i64,
    status: BisectStatus,
    reason: &str,
    culprit: Option<(&str, f64)>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE bisects SET status = $2, status_reason = $3, culprit_sha = $4, culprit_confidence = $5,
                updated_at = now(), finished_at = now(), measured_change = NULL
         WHERE id = $1",
        bisect,
        status.as_str(),
        reason,
        culprit.map(|c| c.0),
        culprit.map(|c| c.1),
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// Locks the bisect's row against other writers (`FOR NO KEY UPDATE`: run and task inserts,
/// whose foreign keys take a key-share lock, do not wait) and reads its status.
pub async fn lock_status(tx: &mut PgConnection, bisect: i64) -> sqlx::Result<Option<BisectStatus>> {
    sqlx::query_scalar!(
        r#"SELECT status AS "status: BisectStatus" FROM bisects WHERE id = $1 FOR NO KEY UPDATE"#,
        bisect,
    )
    .fetch_optional(tx)
    .await
}

/// The job spec of the bisect, as submitted.
pub async fn job_yaml(db: &PgPool, bisect: i64) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar!(
        "SELECT j.yaml FROM bisects b JOIN job_specs j ON j.id = b.job_spec_id WHERE b.id = $1",
        bisect,
    )
    .fetch_optional(db)
    .await
}

/// What a new submission copies from an earlier bisect (the dashboard's "re-run").
#[derive(Debug)]
pub struct Submitted {
    pub repository: String,
    pub good_rev: String,
    pub bad_rev: String,
    pub yaml: String,
    pub metric: String,
    pub direction: Option<String>,
    pub magnitude_pct: Option<f64>,
    pub confidence: f64,
    pub max_runs: i32,
    /// The addresses to notify, a JSON list.
    pub notify: serde_json::Value,
}

pub async fn submitted(db: &PgPool, bisect: i64) -> sqlx::Result<Option<Submitted>> {
    sqlx::query_as!(
        Submitted,
        "SELECT r.name AS repository, b.good_rev, b.bad_rev, j.yaml, b.metric, b.direction,
                b.magnitude_pct, b.confidence, b.max_runs, b.notify
         FROM bisects b JOIN repositories r ON r.id = b.repository_id
         JOIN job_specs j ON j.id = b.job_spec_id
         WHERE b.id = $1",
        bisect,
    )
    .fetch_optional(db)
    .await
}

/// Every metric a bisect was submitted for, sorted (the list page's filter).
pub async fn metrics(db: &PgPool) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!("SELECT DISTINCT metric FROM bisects ORDER BY metric")
        .fetch_all(db)
        .await
}
