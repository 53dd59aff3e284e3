//! `watches`: watched branches, each measured head after head with one job.

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
