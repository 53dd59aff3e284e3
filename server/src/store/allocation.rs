//! What the host allocator reads: a group's live hosts, its active bisects with their
//! priorities, and how much work each already has outstanding.

use super::ACTIVE_STATUSES;

/// Hosts seen within this window count as alive for scheduling (and are not "stale" on the
/// dashboard). Idle workers long-poll well within it, busy ones heartbeat.
pub const LIVE_HOST_WINDOW_SECS: i64 = 120;

/// A host group as the allocator sees it.
#[derive(Debug, Clone)]
pub struct GroupLoad {
    pub live_hosts: i64,
    /// Active bisects of the group: (id, priority).
    pub bisects: Vec<(i64, i32)>,
}

pub async fn group_load(
    db: &mut sqlx::PgConnection,
    host_group: &str,
    live_window_secs: i64,
) -> sqlx::Result<GroupLoad> {
    let live_hosts: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM hosts WHERE host_group = $1
         AND last_seen_at > now() - make_interval(secs => $2)",
    )
    .bind(host_group)
    .bind(live_window_secs as f64)
    .fetch_one(&mut *db)
    .await?;
    let bisects: Vec<(i64, i32)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT b.id, b.priority FROM bisects b JOIN job_specs j ON j.id = b.job_spec_id
         WHERE j.tbox_group = $1 AND b.status IN {ACTIVE_STATUSES} ORDER BY b.id"
    )))
    .bind(host_group)
    .fetch_all(db)
    .await?;
    Ok(GroupLoad {
        live_hosts,
        bisects,
    })
}

/// Tasks of the bisect queued or running.
pub async fn outstanding<'e>(db: impl sqlx::PgExecutor<'e>, bisect: i64) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "SELECT count(*) FROM tasks WHERE bisect_id = $1 AND state IN ('queued', 'running')",
    )
    .bind(bisect)
    .fetch_one(db)
    .await
}

/// Cancels up to `n` of the bisect's queued tasks that no host ever started, newest first
/// (its share shrank); how many.
pub async fn trim_queued<'e>(
    db: impl sqlx::PgExecutor<'e>,
    bisect: i64,
    n: i64,
) -> sqlx::Result<u64> {
    Ok(sqlx::query(
        "UPDATE tasks SET state = 'cancelled', finished_at = now(),
                message = 'handed back unstarted: the bisect''s share of its host group shrank'
         WHERE id IN (SELECT id FROM tasks WHERE bisect_id = $1 AND state = 'queued' AND attempts = 0
                      ORDER BY id DESC LIMIT $2 FOR UPDATE SKIP LOCKED)",
    )
    .bind(bisect)
    .bind(n)
    .execute(db)
    .await?
    .rows_affected())
}

/// Live hosts per group (the fallback loop notices hosts that went away).
pub async fn live_hosts_by_group<'e>(
    db: impl sqlx::PgExecutor<'e>,
    live_window_secs: i64,
) -> sqlx::Result<Vec<(String, i64)>> {
    sqlx::query_as(
        "SELECT host_group, count(*) FILTER (WHERE last_seen_at > now() - make_interval(secs => $1))
         FROM hosts GROUP BY host_group ORDER BY host_group",
    )
    .bind(live_window_secs as f64)
    .fetch_all(db)
    .await
}

/// Sets a bisect's priority; its host group, or None when there is no such bisect.
pub async fn set_priority<'e>(
    db: impl sqlx::PgExecutor<'e>,
    bisect: i64,
    priority: i32,
) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar(
        "UPDATE bisects b SET priority = $2 FROM job_specs j
         WHERE b.id = $1 AND j.id = b.job_spec_id RETURNING j.tbox_group",
    )
    .bind(bisect)
    .bind(priority)
    .fetch_optional(db)
    .await
}
