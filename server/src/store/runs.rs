//! `runs`: one execution of the benchmark on one host at one commit, with every metric it
//! produced. Runs are stored; statistics are derived from them, never stored instead.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

/// A run as a worker uploaded it, checked by the API.
pub struct NewRun<'a> {
    pub task: i64,
    pub bisect: Option<i64>,
    pub sha: &'a str,
    pub host: i64,
    pub iteration: i32,
    pub completed: bool,
    pub metrics: serde_json::Value,
    pub log: &'a str,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub environment: serde_json::Value,
}

/// What one upload wrote.
#[derive(Debug)]
pub struct Uploaded {
    /// The run was stored (not stored before, and the host held the task).
    pub stored: bool,
    /// The host held the task, and its lease was renewed.
    pub renewed: bool,
}

/// An upload in one statement (one round trip, one commit): the run stored if its host
/// still holds the task (the task row locked in the statement, so a lease that ran out since
/// the API's check leaves nothing written; an iteration stored before is not stored again),
/// the lease renewed for `lease_secs`, and for a stored run of a bisect a wake-up recorded
/// and NOTIFYed unless one was pending already (`store::wakeups::wake`'s row and payload,
/// and its reason to NOTIFY once). A connection is held for one
/// statement, not for a transaction of five round trips: with a thousand hosts uploading,
/// what uploads hold is what claims wait for.
pub async fn upload<'e>(
    db: impl PgExecutor<'e>,
    run: &NewRun<'_>,
    lease_secs: f64,
) -> sqlx::Result<Uploaded> {
    let row = sqlx::query!(
        r#"WITH held AS (
               SELECT id FROM tasks WHERE id = $1 AND host_id = $4 AND state = 'running'
               FOR UPDATE
           ), stored AS (
               INSERT INTO runs (task_id, bisect_id, sha, host_id, iteration, completed,
                                 metrics, log, started_at, finished_at, environment)
               SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 FROM held
               ON CONFLICT (task_id, iteration) DO NOTHING
               RETURNING bisect_id
           ), renewed AS (
               UPDATE tasks t SET lease_expires_at = now() + make_interval(secs => $12)
               FROM held WHERE t.id = held.id RETURNING t.id
           ), woken AS (
               INSERT INTO scheduler_wakeups (bisect_id, reason)
               SELECT bisect_id, $13 FROM stored WHERE bisect_id IS NOT NULL
               RETURNING bisect_id
           )
           SELECT EXISTS (SELECT 1 FROM stored) AS "stored!",
                  EXISTS (SELECT 1 FROM renewed) AS "renewed!",
                  (SELECT count(pg_notify($14, bisect_id::text)) FROM woken
                   WHERE NOT EXISTS (SELECT 1 FROM scheduler_wakeups p
                                     WHERE p.bisect_id = woken.bisect_id)) AS "woken!""#,
        run.task,
        run.bisect,
        run.sha,
        run.host,
        run.iteration,
        run.completed,
        run.metrics,
        run.log,
        run.started_at,
        run.finished_at,
        run.environment,
        lease_secs,
        super::wakeups::Reason::RunStored.as_str(),
        super::wakeups::CHANNEL,
    )
    .fetch_one(db)
    .await?;
    Ok(Uploaded {
        stored: row.stored,
        renewed: row.renewed,
    })
}

/// One run of a bisect as its evidence needs it.
#[derive(Debug)]
pub struct Sample {
    pub task_id: i64,
    pub sha: String,
    pub completed: bool,
    /// The bisect's metric, when the run reported it.
    pub value: Option<f64>,
    /// When it started, in seconds since the epoch.
    pub at: f64,
    pub host_id: i64,
}

/// Every run of `bisect` with its value of `metric`, in upload order within each task.
pub async fn samples(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
    metric: &str,
) -> sqlx::Result<Vec<Sample>> {
    sqlx::query_as!(
        Sample,
        r#"SELECT task_id, sha, completed, (metrics ->> $2)::float8 AS value,
                  EXTRACT(EPOCH FROM started_at)::float8 AS "at!", host_id FROM runs
           WHERE bisect_id = $1 ORDER BY task_id, iteration"#,
        bisect,
        metric,
    )
    .fetch_all(tx)
    .await
}

/// How many runs the bisect has stored (complete or not).
pub async fn count<'e>(db: impl PgExecutor<'e>, bisect: i64) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM runs WHERE bisect_id = $1"#,
        bisect
    )
    .fetch_one(db)
    .await
}

/// The bisect's complete runs that reported `metric`: commit and value, in upload order.
pub async fn values<'e>(
    db: impl PgExecutor<'e>,
    bisect: i64,
    metric: &str,
) -> sqlx::Result<Vec<(String, f64)>> {
    let rows = sqlx::query!(
        r#"SELECT sha, (metrics ->> $2)::float8 AS "value!" FROM runs
           WHERE bisect_id = $1 AND completed AND metrics ? $2 ORDER BY id"#,
        bisect,
        metric,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.sha, r.value)).collect())
}

/// Every run of the bisect: commit, whether it completed, its value of `metric`; in upload
/// order.
pub async fn outcomes(
    db: &sqlx::PgPool,
    bisect: i64,
    metric: &str,
) -> sqlx::Result<Vec<(String, bool, Option<f64>)>> {
    let rows = sqlx::query!(
        "SELECT sha, completed, (metrics ->> $2)::float8 AS value FROM runs
         WHERE bisect_id = $1 ORDER BY id",
        bisect,
        metric,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.sha, r.completed, r.value))
        .collect())
}

/// One stored run, as far as the measured change needs it (`change::measure`).
#[derive(Debug, Clone)]
pub struct ChangeRun {
    pub sha: String,
    pub task_sha: String,
    pub pair_sha: Option<String>,
    /// The bisected metric's value of a complete run; `None` for an incomplete one.
    pub value: Option<f64>,
}

/// Every run of the bisect with its task's commits, in upload order within each task.
pub async fn for_change<'e>(
    db: impl PgExecutor<'e>,
    bisect: i64,
    metric: &str,
) -> sqlx::Result<Vec<ChangeRun>> {
    sqlx::query_as!(
        ChangeRun,
        "SELECT r.sha, t.sha AS task_sha, t.pair_sha,
                CASE WHEN r.completed THEN (r.metrics ->> $2)::float8 END AS value
         FROM runs r JOIN tasks t ON t.id = r.task_id
         WHERE r.bisect_id = $1 ORDER BY r.task_id, r.iteration",
        bisect,
        metric,
    )
    .fetch_all(db)
    .await
}

/// Median machine time of a build (a task's start to its first run) and of a run, over
/// every task of this job spec so far (earlier bisects of the same job included).
pub async fn median_costs(
    tx: &mut sqlx::PgConnection,
    job_spec: i64,
) -> sqlx::Result<(Option<f64>, Option<f64>)> {
    let r = sqlx::query!(
        "SELECT
           (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM f.first_run - t.started_at))::float8
              FROM tasks t
              JOIN LATERAL (SELECT min(r.started_at) AS first_run FROM runs r WHERE r.task_id = t.id) f ON true
             WHERE t.job_spec_id = $1 AND t.started_at IS NOT NULL AND f.first_run IS NOT NULL) AS build,
           (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM r.finished_at - r.started_at))::float8
              FROM runs r JOIN tasks t ON t.id = r.task_id WHERE t.job_spec_id = $1) AS run",
        job_spec,
    )
    .fetch_one(tx)
    .await?;
    Ok((r.build, r.run))
}
