//! Tasks as the API and the dashboard show them: a bisect's tasks, and one task with every
//! run (metrics, environment, log) and every build (log) it produced; what the scheduler
//! reads of them, and queueing (a bisect's tasks, a watch's). The lifecycle of a queued task
//! (claim, lease, completion) is `store::queue`.

use chrono::{DateTime, Utc};
use perfbisect_wire::states::{Phase, TaskState};
use perfbisect_wire::tasks::{TaskBuild, TaskDetail, TaskRun, TaskSummary};
use perfbisect_wire::worker::RunEnvironment;
use sqlx::PgPool;
use sqlx::types::Json;
use std::collections::BTreeMap;

struct TaskRow {
    id: i64,
    bisect_id: i64,
    sha: String,
    pair_sha: Option<String>,
    phase: Phase,
    state: TaskState,
    runs: i32,
    attempts: i32,
    host: Option<String>,
    message: Option<String>,
    log_tail: Option<String>,
    created_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
    started_at: Option<DateTime<Utc>>,
    runs_stored: i64,
    runs_completed: i64,
    fresh_deploy: bool,
}

impl TaskRow {
    fn summary(self) -> (TaskSummary, Option<String>) {
        (
            TaskSummary {
                id: self.id,
                bisect_id: self.bisect_id,
                sha: self.sha,
                pair_sha: self.pair_sha,
                phase: self.phase.as_str().to_string(),
                state: self.state.as_str().to_string(),
                runs_requested: self.runs as u32,
                attempts: self.attempts as u32,
                host: self.host,
                message: self.message,
                created_at: self.created_at,
                finished_at: self.finished_at,
                runs_stored: self.runs_stored as u32,
                runs_completed: self.runs_completed as u32,
                started_at: self.started_at,
                duration_secs: self.started_at.map(|s| {
                    (self.finished_at.unwrap_or_else(Utc::now) - s).num_milliseconds() as f64
                        / 1000.0
                }),
                fresh_deploy: self.fresh_deploy,
            },
            self.log_tail,
        )
    }
}

/// The task query with `$tail` (a literal WHERE/ORDER BY) appended, and its arguments.
/// (`bisect_id!`: the API's and the pages' task views belong to bisects.)
macro_rules! select_tasks {
    ($tail:literal $(, $arg:expr)*) => {
        sqlx::query_as!(
            TaskRow,
            r#"SELECT t.id, t.bisect_id AS "bisect_id!", t.sha, t.pair_sha,
                   t.phase AS "phase: Phase", t.state AS "state: TaskState", t.runs, t.attempts,
                   h.name AS "host?", t.message, t.log_tail, t.created_at, t.finished_at,
                   t.started_at,
                   (SELECT count(*) FROM runs r WHERE r.task_id = t.id) AS "runs_stored!",
                   (SELECT count(*) FROM runs r WHERE r.task_id = t.id AND r.completed)
                       AS "runs_completed!",
                   t.fresh_deploy
               FROM tasks t LEFT JOIN hosts h ON h.id = t.host_id "# + $tail
            $(, $arg)*
        )
    };
}

/// The tasks of a bisect, oldest first.
pub async fn of_bisect(db: &PgPool, bisect: i64) -> sqlx::Result<Vec<TaskSummary>> {
    let rows = select_tasks!("WHERE t.bisect_id = $1 ORDER BY t.id", bisect)
        .fetch_all(db)
        .await?;
    Ok(rows.into_iter().map(|r| r.summary().0).collect())
}

struct RunRow {
    iteration: i32,
    sha: String,
    host: String,
    completed: bool,
    metrics: Json<BTreeMap<String, f64>>,
    environment: Json<RunEnvironment>,
    log: String,
    started_at: DateTime<Utc>,
    finished_at: DateTime<Utc>,
}

struct BuildRow {
    sha: String,
    host: String,
    succeeded: bool,
    cached: bool,
    duration_secs: f64,
    log: String,
    reported_at: DateTime<Utc>,
}

/// One task with its runs and builds (`None`: no such task).
pub async fn detail(db: &PgPool, id: i64) -> sqlx::Result<Option<TaskDetail>> {
    let row = select_tasks!("WHERE t.id = $1", id)
        .fetch_optional(db)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let (task, log_tail) = row.summary();
    let runs = sqlx::query_as!(
        RunRow,
        r#"SELECT r.iteration, r.sha, h.name AS host, r.completed,
                  r.metrics AS "metrics: Json<BTreeMap<String, f64>>",
                  r.environment AS "environment: Json<RunEnvironment>", r.log,
                  r.started_at, r.finished_at
           FROM runs r JOIN hosts h ON h.id = r.host_id WHERE r.task_id = $1 ORDER BY r.iteration"#,
        id,
    )
    .fetch_all(db)
    .await?;
    let builds = sqlx::query_as!(
        BuildRow,
        "SELECT b.sha, h.name AS host, b.succeeded, b.cached, b.duration_secs, b.log, b.reported_at
         FROM builds b JOIN hosts h ON h.id = b.host_id WHERE b.task_id = $1 ORDER BY b.id",
        id,
    )
    .fetch_all(db)
    .await?;
    Ok(Some(TaskDetail {
        task,
        log_tail,
        runs: runs
            .into_iter()
            .map(|r| TaskRun {
                iteration: r.iteration as u32,
                sha: r.sha,
                host: r.host,
                completed: r.completed,
                metrics: r.metrics.0,
                environment: r.environment.0,
                log: r.log,
                started_at: r.started_at,
                finished_at: r.finished_at,
            })
            .collect(),
        builds: builds
            .into_iter()
            .map(|b| TaskBuild {
                sha: b.sha,
                host: b.host,
                succeeded: b.succeeded,
                cached: b.cached,
                duration_secs: b.duration_secs,
                log: b.log,
                reported_at: b.reported_at,
            })
            .collect(),
    }))
}

/// What an upload is checked against: the task, its holder and its owner's metric
/// (`store::runs::upload_batch` reads it).
#[derive(Debug)]
pub struct UploadTarget {
    pub bisect_id: Option<i64>,
    pub task_sha: String,
    pub pair_sha: Option<String>,
    pub runs: i32,
    pub task_state: TaskState,
    pub holder: Option<i64>,
    pub metric: String,
}

/// A queued or running task, as the queue page lists it.
#[derive(Debug)]
pub struct Open {
    pub id: i64,
    pub bisect_id: Option<i64>,
    pub watch_id: Option<i64>,
    pub sha: String,
    pub pair_sha: Option<String>,
    pub host_group: String,
    pub phase: Phase,
    pub state: TaskState,
    pub runs: i32,
    pub attempts: i32,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub host: Option<String>,
}

/// At most `limit` queued and running tasks, by group, running first, oldest first.
pub async fn open(db: &PgPool, limit: i64) -> sqlx::Result<Vec<Open>> {
    sqlx::query_as!(
        Open,
        r#"SELECT t.id, t.bisect_id, t.watch_id, t.sha, t.pair_sha, t.host_group,
                  t.phase AS "phase: Phase", t.state AS "state: TaskState", t.runs, t.attempts,
                  t.created_at, t.started_at, h.name AS "host?"
           FROM tasks t LEFT JOIN hosts h ON h.id = t.host_id
           WHERE t.state IN ('queued', 'running')
           ORDER BY t.host_group, t.state DESC, t.id LIMIT $1"#,
        limit,
    )
    .fetch_all(db)
    .await
}

/// A task of a bisect as its evidence needs it.
#[derive(Debug)]
pub struct ForEvidence {
    pub id: i64,
    pub sha: String,
    pub pair_sha: Option<String>,
    pub state: TaskState,
    pub runs: i32,
    pub failed_sha: Option<String>,
}

/// Every task of `bisect`, oldest first.
pub async fn for_evidence(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
) -> sqlx::Result<Vec<ForEvidence>> {
    sqlx::query_as!(
        ForEvidence,
        r#"SELECT id, sha, pair_sha, state AS "state: TaskState", runs, failed_sha FROM tasks
           WHERE bisect_id = $1 ORDER BY id"#,
        bisect,
    )
    .fetch_all(tx)
    .await
}

/// A task that failed on every attempt.
#[derive(Debug)]
pub struct Lost {
    pub id: i64,
    pub sha: String,
    pub message: Option<String>,
}

/// The bisect's first task that failed on every attempt, if any.
pub async fn first_lost(tx: &mut sqlx::PgConnection, bisect: i64) -> sqlx::Result<Option<Lost>> {
    sqlx::query_as!(
        Lost,
        "SELECT id, sha, message FROM tasks WHERE bisect_id = $1 AND state = 'failed'
         ORDER BY id LIMIT 1",
        bisect,
    )
    .fetch_optional(tx)
    .await
}

/// A build failure of one of the bisect's endpoints (`good` or `bad`): the commit, and the
/// build log's tail (or the task's message).
pub async fn broken_endpoint(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
    good: &str,
    bad: &str,
) -> sqlx::Result<Option<(String, Option<String>)>> {
    let row = sqlx::query!(
        r#"SELECT coalesce(failed_sha, sha) AS "sha!", coalesce(log_tail, message) AS log FROM tasks
           WHERE bisect_id = $1 AND state = 'build_failed' AND coalesce(failed_sha, sha) IN ($2, $3)
           LIMIT 1"#,
        bisect,
        good,
        bad,
    )
    .fetch_optional(tx)
    .await?;
    Ok(row.map(|r| (r.sha, r.log)))
}

/// A task the scheduler queues for a bisect.
pub struct NewTask<'a> {
    pub bisect: i64,
    pub sha: &'a str,
    /// The commit a verification task interleaves with `sha` on one host.
    pub pair_sha: Option<&'a str>,
    pub job_spec_id: i64,
    pub host_group: &'a str,
    pub runs: i32,
    pub phase: Phase,
    /// Deploy the commit afresh before the first run (`Request::fresh_deploy`).
    pub fresh_deploy: bool,
}

pub async fn queue(tx: &mut sqlx::PgConnection, t: &NewTask<'_>) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO tasks (bisect_id, sha, pair_sha, job_spec_id, host_group, runs, phase,
                            fresh_deploy)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        t.bisect,
        t.sha,
        t.pair_sha,
        t.job_spec_id,
        t.host_group,
        t.runs,
        t.phase.as_str(),
        t.fresh_deploy,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// A task a watch queues to measure one of its heads.
pub struct NewWatchTask<'a> {
    pub watch: i64,
    pub head: i64,
    pub sha: &'a str,
    pub job_spec_id: i64,
    pub host_group: &'a str,
    pub runs: i32,
}

pub async fn queue_for_watch(
    tx: &mut sqlx::PgConnection,
    t: &NewWatchTask<'_>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO tasks (watch_id, watch_head_id, sha, job_spec_id, host_group, runs, phase)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        t.watch,
        t.head,
        t.sha,
        t.job_spec_id,
        t.host_group,
        t.runs,
        Phase::Watch.as_str(),
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// A bisect that ended has no more work: its open tasks are cancelled (a running one's
/// worker learns it at its next heartbeat).
pub async fn cancel_open(tx: &mut sqlx::PgConnection, bisect: i64) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE tasks SET state = 'cancelled', finished_at = now()
         WHERE bisect_id = $1 AND state IN ('queued', 'running')",
        bisect,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// A task as the bisect page lists it.
#[derive(Debug)]
pub struct Recent {
    pub id: i64,
    pub sha: String,
    pub pair_sha: Option<String>,
    pub phase: Phase,
    pub state: TaskState,
    pub runs: i32,
    pub host: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Runs stored so far.
    pub stored: i64,
}

/// The bisect's latest `limit` tasks, newest first.
pub async fn recent(db: &PgPool, bisect: i64, limit: i64) -> sqlx::Result<Vec<Recent>> {
    sqlx::query_as!(
        Recent,
        r#"SELECT t.id, t.sha, t.pair_sha, t.phase AS "phase: Phase", t.state AS "state: TaskState",
                  t.runs, h.name AS "host?", t.started_at, t.finished_at,
                  (SELECT count(*) FROM runs r WHERE r.task_id = t.id) AS "stored!"
           FROM tasks t LEFT JOIN hosts h ON h.id = t.host_id
           WHERE t.bisect_id = $1 ORDER BY t.id DESC LIMIT $2"#,
        bisect,
        limit,
    )
    .fetch_all(db)
    .await
}

/// The commits of the bisect whose build failed, with the build log's tail (or the task's
/// message).
pub async fn skipped(db: &PgPool, bisect: i64) -> sqlx::Result<Vec<(String, Option<String>)>> {
    let rows = sqlx::query!(
        "SELECT sha, coalesce(log_tail, message) AS reason FROM tasks
         WHERE bisect_id = $1 AND state = 'build_failed'",
        bisect,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.sha, r.reason)).collect())
}

/// The commits a done task of the bisect built (its commit, and its pair's).
pub async fn built_shas(tx: &mut sqlx::PgConnection, bisect: i64) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!(
        r#"SELECT sha AS "sha!" FROM tasks WHERE bisect_id = $1 AND state = 'done'
           UNION SELECT pair_sha FROM tasks
                 WHERE bisect_id = $1 AND state = 'done' AND pair_sha IS NOT NULL"#,
        bisect,
    )
    .fetch_all(tx)
    .await
}
