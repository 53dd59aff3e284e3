//! `runs`: one execution of the benchmark on one host at one commit, with every metric it
//! produced. Runs are stored; statistics are derived from them, never stored instead.

use chrono::{DateTime, Utc};
use perfbisect_wire::states::TaskState;
use sqlx::PgExecutor;

/// A run as a worker uploaded it, with the worker's token: checked against the token's host
/// and the task in the statement that stores it (`upload_batch`).
#[derive(Debug)]
pub struct NewUpload {
    /// The SHA-256 of the worker's token, as `hosts.token_hash` stores it.
    pub token_hash: String,
    pub task: i64,
    /// The commit the run measured, as the worker named it (runs of a paired task must).
    pub sha: Option<String>,
    pub iteration: i32,
    pub completed: bool,
    pub metrics: serde_json::Value,
    pub log: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    pub environment: serde_json::Value,
    /// False when the API refused the run already (a metric that is not a finite number):
    /// nothing is written for it, and its answer still says what the token and task are.
    pub writable: bool,
}

/// What an upload found and wrote.
#[derive(Debug)]
pub struct Uploaded {
    /// The token's host, if a host holds the token.
    pub host: Option<i64>,
    /// The task uploaded to, if it exists.
    pub target: Option<super::tasks::UploadTarget>,
    /// The run was stored (not stored before, and the host held the task).
    pub stored: bool,
    /// The host held the task, and its lease was renewed.
    pub renewed: bool,
}

/// Uploads in one statement (one round trip, one commit for all). For each: the token's host
/// (its `last_seen_at` refreshed when stale), the task it uploads to, and the run stored if
/// it is valid for the task (the iteration within the task's runs, the commit one of the
/// task's, the bisect's metric in a completed run) and its host holds the task. The held
/// tasks are locked in the statement, in id order (so two statements never wait for each
/// other in a circle): a lease that ran out since it was read leaves nothing written, and an
/// iteration stored before is not stored again. Each held task's lease is renewed for
/// `lease_secs`, and each bisect with a stored run gets a wake-up, NOTIFYed unless one was
/// pending already (`store::wakeups::wake`'s row and payload). Answers in the order given.
///
/// The API judges each answer again with the same rules (`api::workers`) to say what was
/// wrong; the statement is the stricter of the two, so a run the API refuses is never stored.
pub async fn upload_batch<'e>(
    db: impl PgExecutor<'e>,
    uploads: &[&NewUpload],
    lease_secs: f64,
    seen_every_secs: f64,
) -> sqlx::Result<Vec<Uploaded>> {
    let tokens: Vec<String> = uploads.iter().map(|u| u.token_hash.clone()).collect();
    let tasks: Vec<i64> = uploads.iter().map(|u| u.task).collect();
    let shas: Vec<Option<String>> = uploads.iter().map(|u| u.sha.clone()).collect();
    let iterations: Vec<i32> = uploads.iter().map(|u| u.iteration).collect();
    let completed: Vec<bool> = uploads.iter().map(|u| u.completed).collect();
    let metrics: Vec<serde_json::Value> = uploads.iter().map(|u| u.metrics.clone()).collect();
    let logs: Vec<String> = uploads.iter().map(|u| u.log.clone()).collect();
    let started: Vec<DateTime<Utc>> = uploads.iter().map(|u| u.started_at).collect();
    let finished: Vec<DateTime<Utc>> = uploads.iter().map(|u| u.finished_at).collect();
    let environments: Vec<serde_json::Value> =
        uploads.iter().map(|u| u.environment.clone()).collect();
    let writable: Vec<bool> = uploads.iter().map(|u| u.writable).collect();
    let rows = sqlx::query!(
        r#"WITH input AS (
               SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::int4[], $5::bool[],
                                    $6::jsonb[], $7::text[], $8::timestamptz[],
                                    $9::timestamptz[], $10::jsonb[], $11::bool[])
                   WITH ORDINALITY AS u(token_hash, task_id, sha, iteration, completed, metrics,
                                        log, started_at, finished_at, environment, writable, n)
           ), seen AS (
               UPDATE hosts h SET last_seen_at = now() FROM input i
               WHERE h.token_hash = i.token_hash
                 AND h.last_seen_at < now() - make_interval(secs => $15)
           ), target AS (
               SELECT i.*, h.id AS host_id, t.id AS found, t.bisect_id, t.sha AS task_sha,
                      t.pair_sha, t.runs, t.state, t.host_id AS holder,
                      coalesce(b.metric, w.metrics -> 0 ->> 'name') AS metric
               FROM input i
               LEFT JOIN hosts h ON h.token_hash = i.token_hash
               LEFT JOIN tasks t ON t.id = i.task_id
               LEFT JOIN bisects b ON b.id = t.bisect_id
               LEFT JOIN watches w ON w.id = t.watch_id
           ), valid AS (
               SELECT g.*,
                      CASE WHEN g.sha IS NULL THEN
                               CASE WHEN g.pair_sha IS NULL THEN g.task_sha END
                           WHEN g.sha = g.task_sha OR g.sha = g.pair_sha THEN g.sha END
                          AS run_sha
               FROM target g
               WHERE g.writable AND g.holder = g.host_id AND g.state = 'running'
                 AND g.iteration >= 0
                 AND g.iteration < g.runs * CASE WHEN g.pair_sha IS NULL THEN 1 ELSE 2 END
                 AND (NOT g.completed OR g.metrics ? g.metric)
           ), held AS (
               SELECT t.id FROM tasks t
               WHERE (t.id, t.host_id) IN (SELECT task_id, host_id FROM valid
                                           WHERE run_sha IS NOT NULL)
                 AND t.state = 'running'
               ORDER BY t.id
               FOR UPDATE
           ), stored AS (
               INSERT INTO runs (task_id, bisect_id, sha, host_id, iteration, completed,
                                 metrics, log, started_at, finished_at, environment)
               SELECT v.task_id, v.bisect_id, v.run_sha, v.host_id, v.iteration, v.completed,
                      v.metrics, v.log, v.started_at, v.finished_at, v.environment
               FROM valid v JOIN held ON held.id = v.task_id
               WHERE v.run_sha IS NOT NULL
               ON CONFLICT (task_id, iteration) DO NOTHING
               RETURNING task_id, iteration, bisect_id
           ), renewed AS (
               UPDATE tasks t SET lease_expires_at = now() + make_interval(secs => $12)
               FROM held WHERE t.id = held.id RETURNING t.id
           ), woken AS (
               INSERT INTO scheduler_wakeups (bisect_id, reason)
               SELECT DISTINCT bisect_id, $13 FROM stored WHERE bisect_id IS NOT NULL
               RETURNING bisect_id
           )
           SELECT g.host_id AS "host_id?", g.found AS "found?", g.bisect_id AS "bisect_id?",
                  g.task_sha AS "task_sha?", g.pair_sha AS "pair_sha?", g.runs AS "runs?",
                  g.state AS "task_state?: TaskState", g.holder AS "holder?",
                  g.metric AS "metric?",
                  EXISTS (SELECT 1 FROM stored s
                          WHERE s.task_id = g.task_id AND s.iteration = g.iteration) AS "stored!",
                  coalesce(g.holder = g.host_id AND EXISTS (SELECT 1 FROM renewed r
                                                             WHERE r.id = g.task_id),
                           false) AS "renewed!",
                  (SELECT count(pg_notify($14, bisect_id::text)) FROM woken
                   WHERE NOT EXISTS (SELECT 1 FROM scheduler_wakeups p
                                     WHERE p.bisect_id = woken.bisect_id)) AS "woken!"
           FROM target g ORDER BY g.n"#,
        &tokens,
        &tasks,
        &shas as &[Option<String>],
        &iterations,
        &completed,
        &metrics,
        &logs,
        &started,
        &finished,
        &environments,
        &writable,
        lease_secs,
        super::wakeups::Reason::RunStored.as_str(),
        super::wakeups::CHANNEL,
        seen_every_secs,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Uploaded {
            host: r.host_id,
            target: match (r.found, r.task_sha, r.runs, r.task_state, r.metric) {
                (Some(_), Some(task_sha), Some(runs), Some(task_state), Some(metric)) => {
                    Some(super::tasks::UploadTarget {
                        bisect_id: r.bisect_id,
                        task_sha,
                        pair_sha: r.pair_sha,
                        runs,
                        task_state,
                        holder: r.holder,
                        metric,
                    })
                }
                _ => None,
            },
            stored: r.stored,
            renewed: r.renewed,
        })
        .collect())
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
    /// The worker's `runs_since_deploy` (absent from runners that deploy nothing).
    pub since_deploy: Option<i64>,
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
                  EXTRACT(EPOCH FROM started_at)::float8 AS "at!", host_id,
                  (environment ->> 'runs_since_deploy')::int8 AS since_deploy FROM runs
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

/// Tasks of the job whose builds `median_costs` reads: the most recent ones.
pub const COST_TASKS: i64 = 256;
/// Runs of the job whose durations `median_costs` reads: those of the most recent tasks.
pub const COST_RUNS: i64 = 1024;

/// Median machine time of a build (a task's start to its first run) and of a run, over the
/// job's most recent tasks (`COST_TASKS` built, `COST_RUNS` runs; earlier bisects of the same
/// job included). A window, not the whole history: one job can run for months, and every
/// advance reads these (the scan of all 15,000 tasks of the fleet loadtest's one job took an
/// advance 120-160 ms); and a window follows a lab whose builds or hosts got faster.
pub async fn median_costs(tx: &mut sqlx::PgConnection, job_spec: i64) -> sqlx::Result<MedianCosts> {
    let r = sqlx::query!(
        "SELECT
           (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY b.secs)::float8
              FROM (SELECT extract(epoch FROM f.first_run - t.started_at) AS secs
                      FROM tasks t
                      JOIN LATERAL (SELECT min(r.started_at) AS first_run
                                      FROM runs r WHERE r.task_id = t.id) f ON true
                     WHERE t.job_spec_id = $1 AND t.started_at IS NOT NULL
                       AND f.first_run IS NOT NULL
                     ORDER BY t.id DESC LIMIT $2) b) AS build,
           d.run, d.first_after_deploy, d.later
         FROM (
           -- One scan of the job's recent runs for the three medians of a run's duration.
           SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY r.secs)::float8 AS run,
                  percentile_cont(0.5) WITHIN GROUP (ORDER BY r.secs)
                      FILTER (WHERE r.completed AND r.since = 0)::float8 AS first_after_deploy,
                  percentile_cont(0.5) WITHIN GROUP (ORDER BY r.secs)
                      FILTER (WHERE r.completed AND r.since > 0)::float8 AS later
             FROM (SELECT extract(epoch FROM r.finished_at - r.started_at) AS secs, r.completed,
                          (r.environment ->> 'runs_since_deploy')::int8 AS since
                     FROM tasks t JOIN runs r ON r.task_id = t.id
                    WHERE t.job_spec_id = $1
                    ORDER BY t.id DESC LIMIT $3) r
         ) d",
        job_spec,
        COST_TASKS,
        COST_RUNS,
    )
    .fetch_one(tx)
    .await?;
    Ok(MedianCosts {
        build: r.build,
        run: r.run,
        first_after_deploy: r.first_after_deploy,
        later: r.later,
    })
}

/// Median durations, in seconds, of a job's builds and runs (`None`: none yet). A run of
/// `first_after_deploy` holds its boot (the ssh runner times a run from before it boots);
/// `later` runs followed another run of the same deployment.
#[derive(Debug, Clone, Copy, Default)]
pub struct MedianCosts {
    pub build: Option<f64>,
    pub run: Option<f64>,
    pub first_after_deploy: Option<f64>,
    pub later: Option<f64>,
}
