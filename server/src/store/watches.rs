//! `watches`: watched branches, each measured head after head with one job. What a watch
//! measured and found is in `store::series` (its heads, how far each series is analysed),
//! `store::watch_changes` (the change points) and `store::watch_bisects` (their bisects).

use chrono::{DateTime, Utc};
use perfbisect_wire::watch::WatchMetric;
use sqlx::types::Json;
use sqlx::{PgConnection, PgPool};

/// A watch as the API creates it (validated there).
pub struct NewWatch<'a> {
    pub name: &'a str,
    pub repository_id: i64,
    pub ref_pattern: &'a str,
    pub job_spec_id: i64,
    pub metrics: serde_json::Value,
    pub host_group: &'a str,
    pub cadence_secs: i32,
    pub runs_per_head: i32,
    pub sample_commits: i32,
    pub backfill: i32,
    pub recipients: serde_json::Value,
    pub created_by: i64,
}

/// Stores a new watch; `None` when its name is taken.
pub async fn create(tx: &mut PgConnection, w: &NewWatch<'_>) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!(
        "INSERT INTO watches (name, repository_id, ref_pattern, job_spec_id, metrics, host_group,
             cadence_secs, runs_per_head, sample_commits, backfill, recipients, created_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
         ON CONFLICT (name) DO NOTHING RETURNING id",
        w.name,
        w.repository_id,
        w.ref_pattern,
        w.job_spec_id,
        w.metrics,
        w.host_group,
        w.cadence_secs,
        w.runs_per_head,
        w.sample_commits,
        w.backfill,
        w.recipients,
        w.created_by,
    )
    .fetch_optional(tx)
    .await
}

/// What a change of a watch sets; `None` leaves a field as it is.
#[derive(Default)]
pub struct Change<'a> {
    pub ref_pattern: Option<&'a str>,
    pub metrics: Option<serde_json::Value>,
    pub host_group: Option<&'a str>,
    pub cadence_secs: Option<i32>,
    pub runs_per_head: Option<i32>,
    pub sample_commits: Option<i32>,
    pub recipients: Option<serde_json::Value>,
    pub enabled: Option<bool>,
}

/// Changes a watch; false when there is none with this id.
pub async fn update(db: &PgPool, id: i64, c: &Change<'_>) -> sqlx::Result<bool> {
    let done = sqlx::query!(
        "UPDATE watches SET ref_pattern = coalesce($2, ref_pattern), metrics = coalesce($3, metrics),
             host_group = coalesce($4, host_group), cadence_secs = coalesce($5, cadence_secs),
             runs_per_head = coalesce($6, runs_per_head), sample_commits = coalesce($7, sample_commits),
             recipients = coalesce($8, recipients), enabled = coalesce($9, enabled), updated_at = now()
         WHERE id = $1",
        id,
        c.ref_pattern,
        c.metrics,
        c.host_group,
        c.cadence_secs,
        c.runs_per_head,
        c.sample_commits,
        c.recipients,
        c.enabled,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// A watch as the API and the pages list it, with its repository, job and how many commits
/// it measured.
#[derive(Debug)]
pub struct Listed {
    pub id: i64,
    pub name: String,
    pub repository: String,
    pub branch: String,
    pub testcase: String,
    pub job_hash: String,
    /// The metrics, a JSON list of `WatchMetric`s.
    pub metrics: serde_json::Value,
    pub host_group: String,
    pub cadence_secs: i32,
    pub runs_per_head: i32,
    pub sample_commits: i32,
    pub backfill: i32,
    /// The addresses to notify, a JSON list.
    pub recipients: serde_json::Value,
    pub enabled: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub polled_at: Option<DateTime<Utc>>,
    pub heads: i64,
}

/// The watch `id`, or every watch when `None`; in id order.
pub async fn list(db: &PgPool, id: Option<i64>) -> sqlx::Result<Vec<Listed>> {
    sqlx::query_as!(
        Listed,
        r#"SELECT w.id, w.name, r.name AS repository, w.ref_pattern AS branch, j.testcase,
                  j.hash AS job_hash, w.metrics, w.host_group, w.cadence_secs, w.runs_per_head,
                  w.sample_commits, w.backfill, w.recipients, w.enabled, w.created_at, w.updated_at,
                  w.polled_at,
                  (SELECT count(*) FROM watch_heads h WHERE h.watch_id = w.id) AS "heads!"
           FROM watches w JOIN repositories r ON r.id = w.repository_id
           JOIN job_specs j ON j.id = w.job_spec_id
           WHERE $1::bigint IS NULL OR w.id = $1 ORDER BY w.id"#,
        id,
    )
    .fetch_all(db)
    .await
}

/// The enabled watches whose cadence has passed since they were last polled, in id order.
pub async fn due(db: &PgPool) -> sqlx::Result<Vec<i64>> {
    sqlx::query_scalar!(
        "SELECT id FROM watches WHERE enabled
           AND (polled_at IS NULL OR polled_at + make_interval(secs => cadence_secs) <= now())
         ORDER BY id"
    )
    .fetch_all(db)
    .await
}

/// Every enabled watch, in id order.
pub async fn enabled(db: &PgPool) -> sqlx::Result<Vec<i64>> {
    sqlx::query_scalar!("SELECT id FROM watches WHERE enabled ORDER BY id")
        .fetch_all(db)
        .await
}

/// The metrics a watch analyses.
pub async fn metrics(db: &PgPool, id: i64) -> sqlx::Result<Vec<WatchMetric>> {
    let metrics = sqlx::query_scalar!(
        r#"SELECT metrics AS "metrics: Json<Vec<WatchMetric>>" FROM watches WHERE id = $1"#,
        id,
    )
    .fetch_one(db)
    .await?;
    Ok(metrics.0)
}

/// What a poll of a watch needs: where to fetch, which branches, what to queue.
#[derive(Debug)]
pub struct ForPoll {
    pub repository_id: i64,
    pub url: String,
    pub ref_pattern: String,
    pub job_spec_id: i64,
    pub host_group: String,
    pub runs_per_head: i32,
    pub sample_commits: i32,
    pub backfill: i32,
}

pub async fn for_poll(db: &PgPool, id: i64) -> sqlx::Result<ForPoll> {
    sqlx::query_as!(
        ForPoll,
        "SELECT w.repository_id, r.url, w.ref_pattern, w.job_spec_id, w.host_group, w.runs_per_head,
                w.sample_commits, w.backfill
         FROM watches w JOIN repositories r ON r.id = w.repository_id WHERE w.id = $1",
        id,
    )
    .fetch_one(db)
    .await
}

/// Locks the watch's row until the transaction ends (a poll recording heads).
pub async fn lock(tx: &mut PgConnection, id: i64) -> sqlx::Result<()> {
    sqlx::query_scalar!("SELECT id FROM watches WHERE id = $1 FOR UPDATE", id)
        .fetch_optional(tx)
        .await?;
    Ok(())
}

/// Records that the watch was polled now.
pub async fn polled(tx: &mut PgConnection, id: i64) -> sqlx::Result<()> {
    sqlx::query!("UPDATE watches SET polled_at = now() WHERE id = $1", id)
        .execute(tx)
        .await?;
    Ok(())
}
