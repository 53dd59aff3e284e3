//! `builds`: each build a worker reported for a task's commit, with its log.

use sqlx::PgPool;

/// A build as a worker reported it.
pub struct NewBuild<'a> {
    pub task: i64,
    pub host: i64,
    pub sha: &'a str,
    pub succeeded: bool,
    pub cached: bool,
    pub duration_secs: f64,
    pub log: &'a str,
}

/// Stores the build if `host` holds the task and the task measures that commit (checked in
/// the statement that writes). Returns whether it stored it.
pub async fn insert_held(db: &PgPool, b: &NewBuild<'_>) -> sqlx::Result<bool> {
    let inserted = sqlx::query!(
        "INSERT INTO builds (task_id, bisect_id, sha, host_id, succeeded, cached, duration_secs, log)
         SELECT t.id, t.bisect_id, $3, $2, $4, $5, $6, $7 FROM tasks t
         WHERE t.id = $1 AND t.host_id = $2 AND t.state = 'running'
           AND $3 IN (t.sha, coalesce(t.pair_sha, t.sha))",
        b.task,
        b.host,
        b.sha,
        b.succeeded,
        b.cached,
        b.duration_secs,
        b.log,
    )
    .execute(db)
    .await?;
    Ok(inserted.rows_affected() > 0)
}
