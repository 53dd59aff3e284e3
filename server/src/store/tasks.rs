//! Tasks as the API and the dashboard show them: a bisect's tasks, and one task with every
//! run (metrics, environment, log) and every build (log) it produced. Reads only.

use chrono::{DateTime, Utc};
use perfbisect_wire::tasks::{TaskBuild, TaskDetail, TaskRun, TaskSummary};
use sqlx::PgPool;

#[derive(sqlx::FromRow)]
struct TaskRow {
    id: i64,
    bisect_id: i64,
    sha: String,
    pair_sha: Option<String>,
    phase: String,
    state: String,
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
}

impl TaskRow {
    fn summary(self) -> (TaskSummary, Option<String>) {
        (
            TaskSummary {
                id: self.id,
                bisect_id: self.bisect_id,
                sha: self.sha,
                pair_sha: self.pair_sha,
                phase: self.phase,
                state: self.state,
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
            },
            self.log_tail,
        )
    }
}

const TASK_SELECT: &str =
    "SELECT t.id, t.bisect_id, t.sha, t.pair_sha, t.phase, t.state, t.runs, t.attempts,
        h.name AS host, t.message, t.log_tail, t.created_at, t.finished_at, t.started_at,
        (SELECT count(*) FROM runs r WHERE r.task_id = t.id) AS runs_stored,
        (SELECT count(*) FROM runs r WHERE r.task_id = t.id AND r.completed) AS runs_completed
 FROM tasks t LEFT JOIN hosts h ON h.id = t.host_id";

/// The tasks of a bisect, oldest first.
pub async fn of_bisect(db: &PgPool, bisect: i64) -> sqlx::Result<Vec<TaskSummary>> {
    let rows: Vec<TaskRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{TASK_SELECT} WHERE t.bisect_id = $1 ORDER BY t.id"
    )))
    .bind(bisect)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| r.summary().0).collect())
}

#[derive(sqlx::FromRow)]
struct RunRow {
    iteration: i32,
    sha: String,
    host: String,
    completed: bool,
    #[sqlx(json)]
    metrics: std::collections::BTreeMap<String, f64>,
    #[sqlx(json)]
    environment: perfbisect_wire::worker::RunEnvironment,
    log: String,
    started_at: DateTime<Utc>,
    finished_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
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
    let row: Option<TaskRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{TASK_SELECT} WHERE t.id = $1"
    )))
    .bind(id)
    .fetch_optional(db)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let (task, log_tail) = row.summary();
    let runs: Vec<RunRow> = sqlx::query_as(
        "SELECT r.iteration, r.sha, h.name AS host, r.completed, r.metrics, r.environment, r.log,
                r.started_at, r.finished_at
         FROM runs r JOIN hosts h ON h.id = r.host_id WHERE r.task_id = $1 ORDER BY r.iteration",
    )
    .bind(id)
    .fetch_all(db)
    .await?;
    let builds: Vec<BuildRow> = sqlx::query_as(
        "SELECT b.sha, h.name AS host, b.succeeded, b.cached, b.duration_secs, b.log, b.reported_at
         FROM builds b JOIN hosts h ON h.id = b.host_id WHERE b.task_id = $1 ORDER BY b.id",
    )
    .bind(id)
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
                metrics: r.metrics,
                environment: r.environment,
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
