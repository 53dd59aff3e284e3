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

/// A task as a claim hands it out: the task, its owner's repository, job and metric, and the
/// iterations an earlier holder already stored (a task given back or interrupted keeps them).
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
    pub repository_url: String,
    pub spec: serde_json::Value,
    pub job_hash: String,
    pub metric: String,
    pub done_iterations: Vec<i32>,
    /// Deploy the commit afresh before the first run (`tasks.fresh_deploy`).
    pub fresh_deploy: bool,
}

/// What one look of a claim found.
#[derive(Debug)]
pub enum Look {
    /// No host holds this worker token (never issued, replaced by a new registration, or
    /// revoked): the caller is not a worker.
    UnknownToken,
    /// The host is quarantined or drained: it takes nothing.
    Barred { host_id: i64, host_group: String },
    /// Nothing queued for the host's group.
    Empty { host_id: i64, host_group: String },
    Claimed {
        host_id: i64,
        host_group: String,
        task: Box<ClaimedTask>,
    },
}

/// A row of a claim statement (`claim_batch`): the look's place in the batch (from 1), the
/// host of its token, and the task it took with its assignment, if any.
struct LookRow {
    ord: i64,
    host_id: i64,
    host_group: String,
    may: bool,
    task_id: Option<i64>,
    bisect_id: Option<i64>,
    watch_id: Option<i64>,
    sha: Option<String>,
    pair_sha: Option<String>,
    runs: Option<i32>,
    lease_expires_at: Option<DateTime<Utc>>,
    url: Option<String>,
    spec: Option<serde_json::Value>,
    job_hash: Option<String>,
    metric: Option<String>,
    done_iterations: Vec<i32>,
    fresh_deploy: Option<bool>,
}

impl LookRow {
    fn look(self) -> sqlx::Result<Look> {
        let (host_id, host_group) = (self.host_id, self.host_group);
        if !self.may {
            return Ok(Look::Barred {
                host_id,
                host_group,
            });
        }
        let Some(id) = self.task_id else {
            return Ok(Look::Empty {
                host_id,
                host_group,
            });
        };
        // A claimed task always has these; their absence would be a broken row, not "no task".
        let missing = |what: &str| {
            sqlx::Error::Protocol(format!("claimed task {id} came without its {what}"))
        };
        let task = ClaimedTask {
            id,
            bisect_id: self.bisect_id.unwrap_or(0),
            watch_id: self.watch_id,
            sha: self.sha.ok_or_else(|| missing("sha"))?,
            pair_sha: self.pair_sha,
            runs: self.runs.ok_or_else(|| missing("runs"))?,
            lease_expires_at: self.lease_expires_at.ok_or_else(|| missing("lease"))?,
            repository_url: self.url.ok_or_else(|| missing("repository"))?,
            spec: self.spec.ok_or_else(|| missing("job spec"))?,
            job_hash: self.job_hash.ok_or_else(|| missing("job hash"))?,
            metric: self.metric.ok_or_else(|| missing("metric"))?,
            done_iterations: self.done_iterations,
            fresh_deploy: self.fresh_deploy.unwrap_or(false),
        };
        Ok(Look::Claimed {
            host_id,
            host_group,
            task: Box::new(task),
        })
    }
}

/// Looks of claims, many in one statement (one round trip, one commit): for each worker
/// token hash of `token_hashes`, the host holding it (checked at this instant, so a token
/// replaced or revoked claims nothing from the next look on), not quarantined or drained (also
/// checked here: a long poll that began before a drain takes nothing queued after it), takes
/// the oldest queued task of its host group left by the hosts before it in the list, under a
/// lease of `lease_secs`, and gets everything its assignment needs (repository, job, metric,
/// iterations already stored). Where `seen` holds, the host's `last_seen_at` is refreshed when
/// older than `seen_every_secs` (what `hosts::authenticate` does for the other worker
/// requests). The answer has a look per token hash, in their order.
///
/// One statement for many looks is what lets a thousand hosts claim at the same instant (a
/// lab's start): each look alone is cheap, but a thousand of them queue for the pool's
/// connections; a batch of them locks its tasks with one `SKIP LOCKED` scan per host group.
pub async fn claim_batch<'e>(
    db: impl PgExecutor<'e>,
    token_hashes: &[String],
    seen: &[bool],
    lease_secs: f64,
    seen_every_secs: f64,
) -> sqlx::Result<Vec<Look>> {
    let rows = sqlx::query_as!(
        LookRow,
        r#"WITH req AS (
               SELECT r.token_hash, r.seen, r.ord
               FROM unnest($1::text[], $3::bool[]) WITH ORDINALITY AS r(token_hash, seen, ord)
           ), h AS (
               SELECT req.ord, hosts.id, hosts.host_group, hosts.last_seen_at, req.seen,
                      hosts.quarantined_at IS NULL AND hosts.drained_at IS NULL AS may
               FROM req JOIN hosts ON hosts.token_hash = req.token_hash
           ), seen AS (
               UPDATE hosts SET last_seen_at = now() FROM h
               WHERE h.seen AND hosts.id = h.id
                 AND h.last_seen_at < now() - make_interval(secs => $4)
           ), wants AS (
               SELECT ord, id, host_group,
                      row_number() OVER (PARTITION BY host_group ORDER BY ord) AS n
               FROM h WHERE may
           ), groups AS (
               SELECT host_group, count(*) AS n FROM wants GROUP BY host_group
           ), c AS (
               SELECT t.id, t.host_group,
                      row_number() OVER (PARTITION BY t.host_group ORDER BY t.id) AS n
               FROM groups g CROSS JOIN LATERAL (
                   SELECT q.id, q.host_group FROM tasks q
                   WHERE q.state = 'queued' AND q.host_group = g.host_group
                   ORDER BY q.id FOR UPDATE SKIP LOCKED LIMIT g.n
               ) t
           ), k AS (
               UPDATE tasks t SET state = 'running', host_id = w.id,
                      attempts = t.attempts + 1,
                      lease_expires_at = now() + make_interval(secs => $2), started_at = now()
               FROM c JOIN wants w ON w.host_group = c.host_group AND w.n = c.n
               WHERE t.id = c.id
               RETURNING w.ord, t.id, t.bisect_id, t.watch_id, t.sha, t.pair_sha, t.runs,
                         t.lease_expires_at, t.fresh_deploy
           )
           SELECT h.ord AS "ord!", h.id AS "host_id!", h.host_group AS "host_group!",
                  h.may AS "may!",
                  k.id AS "task_id?", k.bisect_id AS "bisect_id?", k.watch_id,
                  k.sha AS "sha?", k.pair_sha, k.runs AS "runs?",
                  k.lease_expires_at AS "lease_expires_at?", k.fresh_deploy AS "fresh_deploy?",
                  o.url AS "url?", o.spec AS "spec?", o.hash AS "job_hash?", o.metric AS "metric?",
                  ARRAY(SELECT iteration FROM runs WHERE task_id = k.id ORDER BY iteration)
                      AS "done_iterations!"
           FROM h
           LEFT JOIN k ON k.ord = h.ord
           LEFT JOIN LATERAL (
               SELECT r.url, j.spec, j.hash, s.metric FROM (
                   SELECT repository_id, job_spec_id, metric FROM bisects WHERE id = k.bisect_id
                   UNION ALL
                   SELECT repository_id, job_spec_id, metrics -> 0 ->> 'name' FROM watches
                   WHERE id = k.watch_id) s
               JOIN repositories r ON r.id = s.repository_id
               JOIN job_specs j ON j.id = s.job_spec_id
           ) o ON true"#,
        token_hashes,
        lease_secs,
        seen,
        seen_every_secs,
    )
    .fetch_all(db)
    .await?;
    let mut looks: Vec<Option<Look>> = token_hashes.iter().map(|_| None).collect();
    for row in rows {
        let at = usize::try_from(row.ord - 1)
            .ok()
            .filter(|&i| i < looks.len())
            .ok_or_else(|| sqlx::Error::Protocol(format!("a claim row for look {}", row.ord)))?;
        looks[at] = Some(row.look()?);
    }
    // No host holds a token that has no row.
    Ok(looks
        .into_iter()
        .map(|l| l.unwrap_or(Look::UnknownToken))
        .collect())
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

/// What a worker reports at a task's end, with the worker's token.
#[derive(Debug)]
pub struct Completion {
    /// The SHA-256 of the worker's token, as `hosts.token_hash` stores it.
    pub token_hash: String,
    pub task: i64,
    pub outcome: TaskOutcome,
    pub message: Option<String>,
    pub log_tail: Option<String>,
    pub failed_sha: Option<String>,
}

/// What a completion found and did.
#[derive(Debug)]
pub struct Completed {
    /// The token's host, if a host holds the token.
    pub host: Option<i64>,
    /// The task's owner when this completion ended it (its host held it); `None` when not.
    pub owner: Option<Owner>,
}

/// Ends tasks in one statement (one round trip, one commit for all): each `done`,
/// `build_failed`, or after a worker-side error queued again (`failed` after its last
/// attempt), if the token's host (its `last_seen_at` refreshed when stale) holds it; the
/// first of two completions of one task ends it. Each bisect concerned gets a wake-up,
/// NOTIFYed unless one was pending already (`store::wakeups::wake`'s row and payload), and
/// the tasks queued again are announced per host group (`queue::notify_queued_in`'s
/// payload). Answers in the order given.
pub async fn complete_batch<'e>(
    db: impl PgExecutor<'e>,
    ends: &[&Completion],
    seen_every_secs: f64,
) -> sqlx::Result<Vec<Completed>> {
    let tokens: Vec<String> = ends.iter().map(|e| e.token_hash.clone()).collect();
    let tasks: Vec<i64> = ends.iter().map(|e| e.task).collect();
    // The error outcome's state depends on the row's attempts, so it is decided in SQL; the
    // others are fixed. A requeued task has no holder and no end time.
    let retry: Vec<bool> = ends
        .iter()
        .map(|e| e.outcome == TaskOutcome::Error)
        .collect();
    let fixed: Vec<String> = ends
        .iter()
        .map(|e| match e.outcome {
            TaskOutcome::Done => TaskState::Done,
            TaskOutcome::BuildFailed => TaskState::BuildFailed,
            TaskOutcome::Error => TaskState::Failed,
        })
        .map(|s| s.as_str().to_string())
        .collect();
    let messages: Vec<Option<String>> = ends.iter().map(|e| e.message.clone()).collect();
    let tails: Vec<Option<String>> = ends.iter().map(|e| e.log_tail.clone()).collect();
    let failed: Vec<Option<String>> = ends.iter().map(|e| e.failed_sha.clone()).collect();
    let rows = sqlx::query!(
        r#"WITH input AS (
               SELECT * FROM unnest($1::text[], $2::int8[], $3::bool[], $4::text[], $5::text[],
                                    $6::text[], $7::text[])
                   WITH ORDINALITY AS u(token_hash, task_id, retry, fixed, message, log_tail,
                                        failed_sha, n)
           ), seen AS (
               UPDATE hosts h SET last_seen_at = now() FROM input i
               WHERE h.token_hash = i.token_hash
                 AND h.last_seen_at < now() - make_interval(secs => $11)
           ), who AS (
               SELECT i.*, h.id AS host_id, h.host_group
               FROM input i LEFT JOIN hosts h ON h.token_hash = i.token_hash
           ), first AS (
               SELECT DISTINCT ON (task_id) * FROM who WHERE host_id IS NOT NULL
               ORDER BY task_id, n
           ), ended AS (
               UPDATE tasks t SET
                   state = CASE WHEN NOT f.retry THEN f.fixed
                                WHEN t.attempts >= t.max_attempts THEN 'failed'
                                ELSE 'queued' END,
                   message = f.message, log_tail = f.log_tail, failed_sha = f.failed_sha,
                   finished_at = CASE WHEN f.retry AND t.attempts < t.max_attempts THEN NULL
                                      ELSE now() END,
                   host_id = CASE WHEN f.retry AND t.attempts < t.max_attempts THEN NULL
                                  ELSE t.host_id END
               FROM first f
               WHERE t.id = f.task_id AND t.host_id = f.host_id AND t.state = 'running'
               RETURNING f.n, t.bisect_id, t.watch_id, t.state, f.host_group
           ), woken AS (
               INSERT INTO scheduler_wakeups (bisect_id, reason)
               SELECT DISTINCT bisect_id, $8 FROM ended WHERE bisect_id IS NOT NULL
               RETURNING bisect_id
           )
           SELECT w.host_id AS "host_id?", e.n IS NOT NULL AS "ended!",
                  e.bisect_id AS "bisect_id?", e.watch_id AS "watch_id?",
                  (SELECT count(pg_notify($9, bisect_id::text)) FROM woken
                   WHERE NOT EXISTS (SELECT 1 FROM scheduler_wakeups p
                                     WHERE p.bisect_id = woken.bisect_id)) AS "woken!",
                  (SELECT count(pg_notify($10, host_group || E'\t' || queued))
                   FROM (SELECT host_group, count(*) AS queued FROM ended
                         WHERE state = 'queued' GROUP BY host_group) q) AS "requeue_notices!"
           FROM who w LEFT JOIN ended e ON e.n = w.n ORDER BY w.n"#,
        &tokens,
        &tasks,
        &retry,
        &fixed,
        &messages as &[Option<String>],
        &tails as &[Option<String>],
        &failed as &[Option<String>],
        super::wakeups::Reason::TaskEnded.as_str(),
        super::wakeups::CHANNEL,
        CHANNEL,
        seen_every_secs,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Completed {
            host: r.host_id,
            owner: r.ended.then_some(Owner {
                bisect_id: r.bisect_id,
                watch_id: r.watch_id,
            }),
        })
        .collect())
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
