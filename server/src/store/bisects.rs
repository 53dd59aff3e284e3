//! `bisects`: one search over one range for one job and metric, with its status.

use chrono::{DateTime, Utc};
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
    /// The cap the budget was set under, once it was set from a prediction.
    pub budget_cap: Option<i32>,
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
                  b.max_runs, b.budget_cap, b.direction, b.magnitude_pct, b.job_spec_id,
                  b.first_parent, j.tbox_group,
                  coalesce((j.spec ->> 'runs_per_task')::int, 5) AS "runs_per_task!",
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
    // One index probe of `bisects_metric` per distinct metric (a loose index scan, which
    // PostgreSQL does not plan by itself), not a scan of every bisect as DISTINCT would be.
    sqlx::query_scalar!(
        r#"WITH RECURSIVE m AS (
               SELECT min(metric) AS metric FROM bisects
               UNION ALL
               SELECT (SELECT min(b.metric) FROM bisects b WHERE b.metric > m.metric)
               FROM m WHERE m.metric IS NOT NULL
           )
           SELECT metric AS "metric!" FROM m WHERE metric IS NOT NULL ORDER BY metric"#
    )
    .fetch_all(db)
    .await
}

/// A bisect's row as the API and the pages show it, with its repository and job.
#[derive(Debug)]
pub struct View {
    pub id: i64,
    pub repository: String,
    pub good_rev: String,
    pub bad_rev: String,
    pub good_sha: String,
    pub bad_sha: String,
    pub metric: String,
    pub direction: Option<String>,
    pub confidence: f64,
    pub max_runs: i32,
    pub status: BisectStatus,
    pub status_reason: Option<String>,
    pub testcase: String,
    pub tbox_group: String,
    pub job_hash: String,
    pub culprit_sha: Option<String>,
    pub culprit_confidence: Option<f64>,
    pub assessments: serde_json::Value,
    pub candidates_total: Option<i32>,
    pub candidates_remaining: Option<i32>,
    pub findings: Option<serde_json::Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

pub async fn view(db: &PgPool, bisect: i64) -> sqlx::Result<Option<View>> {
    sqlx::query_as!(
        View,
        r#"SELECT b.id, r.name AS repository, b.good_rev, b.bad_rev, b.good_sha, b.bad_sha,
                  b.metric, b.direction, b.confidence, b.max_runs, b.status AS "status: BisectStatus",
                  b.status_reason, j.testcase, j.tbox_group, j.hash AS job_hash, b.culprit_sha,
                  b.culprit_confidence, b.assessments, b.candidates_total, b.candidates_remaining,
                  b.findings, b.created_at, b.updated_at, b.finished_at
           FROM bisects b JOIN repositories r ON r.id = b.repository_id
           JOIN job_specs j ON j.id = b.job_spec_id
           WHERE b.id = $1"#,
        bisect,
    )
    .fetch_optional(db)
    .await
}

/// The bisect's stored runs, and its tasks still queued or running.
pub async fn progress_counts(db: &PgPool, bisect: i64) -> sqlx::Result<(i64, i64)> {
    let r = sqlx::query!(
        r#"SELECT (SELECT count(*) FROM runs WHERE bisect_id = $1) AS "runs!",
                  (SELECT count(*) FROM tasks WHERE bisect_id = $1 AND state IN ('queued', 'running'))
                      AS "pending!""#,
        bisect,
    )
    .fetch_one(db)
    .await?;
    Ok((r.runs, r.pending))
}

/// What the materials to reproduce a bisect are made from.
#[derive(Debug)]
pub struct ForMaterials {
    pub repository: String,
    pub web_url: Option<String>,
    pub good_sha: String,
    pub bad_sha: String,
    pub metric: String,
    pub direction: Option<String>,
    pub confidence: f64,
    pub first_parent: bool,
    pub culprit_sha: Option<String>,
    /// The kernel config the job names.
    pub kconfig: Option<String>,
}

pub async fn for_materials(db: &PgPool, bisect: i64) -> sqlx::Result<Option<ForMaterials>> {
    sqlx::query_as!(
        ForMaterials,
        "SELECT r.name AS repository, r.web_url, b.good_sha, b.bad_sha, b.metric, b.direction,
                b.confidence, b.first_parent, b.culprit_sha, j.spec ->> 'kconfig' AS kconfig
         FROM bisects b JOIN repositories r ON r.id = b.repository_id
         JOIN job_specs j ON j.id = b.job_spec_id WHERE b.id = $1",
        bisect,
    )
    .fetch_optional(db)
    .await
}

/// A submitted bisect, validated and resolved (or waiting for its fetch).
pub struct NewBisect<'a> {
    pub repository_id: i64,
    pub job_spec_id: i64,
    pub good_rev: &'a str,
    pub bad_rev: &'a str,
    /// Empty while `fetching`.
    pub good_sha: &'a str,
    pub bad_sha: &'a str,
    pub metric: &'a str,
    pub direction: Option<&'a str>,
    pub magnitude_pct: Option<f64>,
    pub confidence: f64,
    pub max_runs: i32,
    pub notify: serde_json::Value,
    pub submitted_by: Option<i64>,
    pub first_parent: bool,
    pub candidates_total: Option<i32>,
    pub use_merge_base: bool,
    /// The fetch generation a `fetching` bisect waits for.
    pub fetch_generation: Option<i64>,
    pub status: BisectStatus,
    /// The commits' subjects and authors are still to be stored (`server::details`).
    pub details_missing: bool,
}

pub async fn insert(tx: &mut PgConnection, b: &NewBisect<'_>) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        "INSERT INTO bisects (repository_id, job_spec_id, good_rev, bad_rev, good_sha, bad_sha, metric,
                              direction, magnitude_pct, confidence, max_runs, notify, submitted_by,
                              first_parent, candidates_total, use_merge_base, fetch_generation, status,
                              details_missing)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
         RETURNING id",
        b.repository_id,
        b.job_spec_id,
        b.good_rev,
        b.bad_rev,
        b.good_sha,
        b.bad_sha,
        b.metric,
        b.direction,
        b.magnitude_pct,
        b.confidence,
        b.max_runs,
        b.notify,
        b.submitted_by,
        b.first_parent,
        b.candidates_total,
        b.use_merge_base,
        b.fetch_generation,
        b.status.as_str(),
        b.details_missing,
    )
    .fetch_one(tx)
    .await
}

/// What the measured change of a bisect is computed for: metric, endpoints, culprit.
#[derive(Debug)]
pub struct ChangeSides {
    pub metric: String,
    pub good_sha: String,
    pub bad_sha: String,
    pub culprit_sha: Option<String>,
}

pub async fn change_sides(tx: &mut PgConnection, bisect: i64) -> sqlx::Result<Option<ChangeSides>> {
    sqlx::query_as!(
        ChangeSides,
        "SELECT metric, good_sha, bad_sha, culprit_sha FROM bisects WHERE id = $1",
        bisect,
    )
    .fetch_optional(tx)
    .await
}

/// Stores the engine's findings on the bisect's row.
pub async fn set_findings(
    tx: &mut PgConnection,
    bisect: i64,
    findings: &serde_json::Value,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE bisects SET findings = $2 WHERE id = $1",
        bisect,
        findings
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// The budget prediction stored with the bisect's last findings.
pub async fn last_prediction(
    tx: &mut PgConnection,
    bisect: i64,
) -> sqlx::Result<Option<serde_json::Value>> {
    let v = sqlx::query_scalar!(
        "SELECT findings -> 'prediction' FROM bisects WHERE id = $1",
        bisect
    )
    .fetch_optional(tx)
    .await?;
    Ok(v.flatten())
}

/// A bisect's budget as stored: its runs, the ceiling, the steps it was set for, and the
/// step size it was based on.
#[derive(Debug)]
pub struct StoredBudget {
    pub max_runs: i32,
    pub budget_cap: Option<i32>,
    pub budget_steps: i32,
    pub budget_basis: Option<f64>,
}

/// The bisect's budget, for rows that have one (`budget_steps` set).
pub async fn budget(tx: &mut PgConnection, bisect: i64) -> sqlx::Result<Option<StoredBudget>> {
    sqlx::query_as!(
        StoredBudget,
        r#"SELECT max_runs, budget_cap, budget_steps AS "budget_steps!", budget_basis FROM bisects
           WHERE id = $1 AND budget_steps IS NOT NULL"#,
        bisect,
    )
    .fetch_optional(tx)
    .await
}

pub async fn set_budget(tx: &mut PgConnection, bisect: i64, b: &StoredBudget) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE bisects SET max_runs = $2, budget_cap = $3, budget_steps = $4, budget_basis = $5
         WHERE id = $1",
        bisect,
        b.max_runs,
        b.budget_cap,
        b.budget_steps,
        b.budget_basis,
    )
    .execute(tx)
    .await?;
    Ok(())
}
