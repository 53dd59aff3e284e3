//! The task queue's writes on `tasks`: claim (`FOR UPDATE SKIP LOCKED`), lease renewal,
//! completion, expired leases and restarted hosts handed back, and the NOTIFY that wakes
//! long-polling workers. Every write of a worker's is fenced by `host_id = $me AND state =
//! 'running'`, so a host that no longer holds a task changes nothing.

use chrono::{DateTime, Utc};
use perfbisect_wire::states::TaskState;
use perfbisect_wire::worker::TaskOutcome;
use sqlx::PgExecutor;

/// NOTIFY channel raised whenever tasks are queued.
pub const CHANNEL: &str = "perfbisect_tasks";

#[derive(Debug)]
pub struct ClaimedTask {
    pub id: i64,
    /// 0 for a watch's measurement.
    pub bisect_id: i64,
    pub watch_id: Option<i64>,
    pub sha: String,
    pub pair_sha: Option<String>,
    pub runs: i32,
    pub lease_expires_at: DateTime<Utc>,
}

/// Takes the oldest queued task of `host_group` for `host_id` under a lease of `lease_secs`,
/// unless the host is drained or quarantined (checked in the statement itself: a long poll
/// that began before a drain takes nothing queued after it).
pub async fn claim<'e>(
    db: impl PgExecutor<'e>,
    host_id: i64,
    host_group: &str,
    lease_secs: f64,
) -> sqlx::Result<Option<ClaimedTask>> {
    sqlx::query_as!(
        ClaimedTask,
        r#"UPDATE tasks t SET state = 'running', host_id = $1, attempts = t.attempts + 1,
                  lease_expires_at = now() + make_interval(secs => $3), started_at = now()
           FROM (SELECT id FROM tasks WHERE state = 'queued' AND host_group = $2
                 AND EXISTS (SELECT 1 FROM hosts h WHERE h.id = $1
                             AND h.quarantined_at IS NULL AND h.drained_at IS NULL)
                 ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) c
           WHERE t.id = c.id
           RETURNING t.id, coalesce(t.bisect_id, 0) AS "bisect_id!", t.watch_id, t.sha,
                     t.pair_sha, t.runs, t.lease_expires_at AS "lease_expires_at!""#,
        host_id,
        host_group,
        lease_secs,
    )
    .fetch_optional(db)
    .await
}

/// Renews the lease of `task` held by `host`; `None` when the host no longer holds it.
pub async fn renew<'e>(
    db: impl PgExecutor<'e>,
    task: i64,
    host: i64,
    lease_secs: f64,
) -> sqlx::Result<Option<DateTime<Utc>>> {
    let row = sqlx::query!(
        "UPDATE tasks SET lease_expires_at = now() + make_interval(secs => $3)
         WHERE id = $1 AND host_id = $2 AND state = 'running' RETURNING lease_expires_at",
        task,
        host,
        lease_secs,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.and_then(|r| r.lease_expires_at))
}

/// Who a completed task belonged to: its bisect or its watch.
#[derive(Debug)]
pub struct Owner {
    pub bisect_id: Option<i64>,
    pub watch_id: Option<i64>,
}

/// What a worker reports at a task's end.
pub struct Completion<'a> {
    pub outcome: TaskOutcome,
    pub message: Option<&'a str>,
    pub log_tail: Option<&'a str>,
    pub failed_sha: Option<&'a str>,
}

/// Ends `task` held by `host`: `done`, `build_failed`, or after a worker-side error queued
/// again (`failed` after its last attempt). `None` when the host does not hold the task.
/// One statement (one round trip, one commit) also records the bisect's wake-up with its
/// NOTIFY (`store::wakeups::wake`'s row and payload) and, after an error, announces one task
/// queued in `host_group` (`queue::notify_queued_in`'s payload).
pub async fn complete<'e>(
    db: impl PgExecutor<'e>,
    task: i64,
    host: i64,
    host_group: &str,
    end: &Completion<'_>,
) -> sqlx::Result<Option<Owner>> {
    // The error outcome's state depends on the row's attempts, so it is decided in SQL; the
    // others are fixed. A requeued task has no holder and no end time.
    let (retry, fixed) = match end.outcome {
        TaskOutcome::Done => (false, TaskState::Done),
        TaskOutcome::BuildFailed => (false, TaskState::BuildFailed),
        TaskOutcome::Error => (true, TaskState::Failed),
    };
    let row = sqlx::query!(
        r#"WITH ended AS (
               UPDATE tasks SET
                   state = CASE WHEN NOT $6 THEN $7
                                WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
                   message = $3, log_tail = $4, failed_sha = $5,
                   finished_at = CASE WHEN $6 AND attempts < max_attempts THEN NULL ELSE now() END,
                   host_id = CASE WHEN $6 AND attempts < max_attempts THEN NULL ELSE host_id END
               WHERE id = $1 AND host_id = $2 AND state = 'running' RETURNING bisect_id, watch_id
           ), woken AS (
               INSERT INTO scheduler_wakeups (bisect_id, reason)
               SELECT bisect_id, $8 FROM ended WHERE bisect_id IS NOT NULL
               RETURNING bisect_id
           )
           SELECT e.bisect_id, e.watch_id,
                  (SELECT count(pg_notify($9, bisect_id::text)) FROM woken) AS "woken!",
                  (SELECT count(pg_notify($10, $11)) WHERE $6) AS "requeue_notices!"
           FROM ended e"#,
        task,
        host,
        end.message,
        end.log_tail,
        end.failed_sha,
        retry,
        fixed.as_str(),
        super::wakeups::Reason::TaskEnded.as_str(),
        super::wakeups::CHANNEL,
        CHANNEL,
        format!("{host_group}\t1"),
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| Owner {
        bisect_id: r.bisect_id,
        watch_id: r.watch_id,
    }))
}

/// A task whose lease ran out, as it is now.
#[derive(Debug)]
pub struct Expired {
    pub id: i64,
    pub bisect_id: Option<i64>,
    pub state: TaskState,
}

/// Hands expired leases back to the queue (or fails the task after its last attempt).
pub async fn reap_expired<'e>(db: impl PgExecutor<'e>) -> sqlx::Result<Vec<Expired>> {
    sqlx::query_as!(
        Expired,
        r#"UPDATE tasks SET
               state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
               message = 'lease expired on host ' || coalesce(host_id::text, '?') || ' (attempt ' || attempts || ')',
               host_id = NULL, lease_expires_at = NULL,
               finished_at = CASE WHEN attempts >= max_attempts THEN now() END
           WHERE state = 'running' AND lease_expires_at < now()
           RETURNING id, bisect_id, state AS "state: TaskState""#,
    )
    .fetch_all(db)
    .await
}

/// A host that registers again has restarted: whatever it was running is not coming back.
/// Hands its running tasks back (or fails them after their last attempt); returns how many.
pub async fn release_restarted_host<'e>(
    db: impl PgExecutor<'e>,
    host_id: i64,
    host_name: &str,
) -> sqlx::Result<u64> {
    let done = sqlx::query!(
        "UPDATE tasks SET state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
                host_id = NULL, lease_expires_at = NULL,
                message = 'host ' || $1 || ' restarted during the task'
         WHERE host_id = $2 AND state = 'running'",
        host_name,
        host_id,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// NOTIFYs `payload` on `CHANNEL`: `group\tcount`, or empty for "look, any group".
pub async fn notify<'e>(db: impl PgExecutor<'e>, payload: &str) -> sqlx::Result<()> {
    sqlx::query!("SELECT pg_notify($1, $2)", CHANNEL, payload)
        .execute(db)
        .await?;
    Ok(())
}

/// A worker that shuts down gives `task` back: queued again without spending the attempt.
/// Returns the task's bisect (`Some(None)` for a watch's task); `None` when `host` does not
/// hold it.
pub async fn hand_back<'e>(
    db: impl PgExecutor<'e>,
    task: i64,
    host: i64,
    message: &str,
) -> sqlx::Result<Option<Option<i64>>> {
    let row = sqlx::query!(
        "UPDATE tasks SET state = 'queued', attempts = greatest(attempts - 1, 0), host_id = NULL,
                lease_expires_at = NULL, message = $3
         WHERE id = $1 AND host_id = $2 AND state = 'running' RETURNING bisect_id",
        task,
        host,
        message,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| r.bisect_id))
}

/// A task and the state it is in.
#[derive(Debug)]
pub struct TaskAt {
    pub bisect_id: Option<i64>,
    pub state: TaskState,
}

/// A restarted worker reports that `task`, which `host` (named `host_name`) held, was
/// interrupted: queued again, the attempt counted (the task may be what brought the host
/// down), or failed after its last. `None` when `host` does not hold it (any more).
pub async fn interrupt<'e>(
    db: impl PgExecutor<'e>,
    task: i64,
    host: i64,
    host_name: &str,
    message: &str,
) -> sqlx::Result<Option<TaskAt>> {
    sqlx::query_as!(
        TaskAt,
        r#"UPDATE tasks SET state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
                  host_id = NULL, lease_expires_at = NULL,
                  finished_at = CASE WHEN attempts >= max_attempts THEN now() END,
                  message = 'interrupted on host ' || $3 || ': ' || $4
           WHERE id = $1 AND host_id = $2 AND state = 'running'
           RETURNING bisect_id, state AS "state: TaskState""#,
        task,
        host,
        host_name,
        message,
    )
    .fetch_optional(db)
    .await
}

/// The task's bisect and state (`None`: no such task).
pub async fn task_at<'e>(db: impl PgExecutor<'e>, task: i64) -> sqlx::Result<Option<TaskAt>> {
    sqlx::query_as!(
        TaskAt,
        r#"SELECT bisect_id, state AS "state: TaskState" FROM tasks WHERE id = $1"#,
        task,
    )
    .fetch_optional(db)
    .await
}

/// Was `host` the last to hold `task` (`tasks.last_host_id`, kept by a trigger)?
pub async fn held_last<'e>(db: impl PgExecutor<'e>, task: i64, host: i64) -> sqlx::Result<bool> {
    let held = sqlx::query_scalar!(
        "SELECT last_host_id = $2 FROM tasks WHERE id = $1",
        task,
        host
    )
    .fetch_one(db)
    .await?;
    Ok(held.unwrap_or(false))
}
