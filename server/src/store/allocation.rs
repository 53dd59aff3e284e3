//! What the host allocator reads: a group's live hosts, its active bisects with their
//! priorities, and how much work each already has outstanding.

use super::SCHEDULED;
use perfbisect_wire::states::BisectStatus;

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
    let live_hosts = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM hosts WHERE host_group = $1
           AND last_seen_at > now() - make_interval(secs => $2)"#,
        host_group,
        live_window_secs as f64,
    )
    .fetch_one(&mut *db)
    .await?;
    let bisects = sqlx::query!(
        "SELECT b.id, b.priority FROM bisects b JOIN job_specs j ON j.id = b.job_spec_id
         WHERE j.tbox_group = $1 AND b.status = ANY($2) ORDER BY b.id",
        host_group,
        SCHEDULED as &[BisectStatus],
    )
    .fetch_all(db)
    .await?;
    Ok(GroupLoad {
        live_hosts,
        bisects: bisects.into_iter().map(|b| (b.id, b.priority)).collect(),
    })
}

/// Tasks of the bisect queued or running.
pub async fn outstanding<'e>(db: impl sqlx::PgExecutor<'e>, bisect: i64) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM tasks WHERE bisect_id = $1 AND state IN ('queued', 'running')"#,
        bisect,
    )
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
    Ok(sqlx::query!(
        "UPDATE tasks SET state = 'cancelled', finished_at = now(),
                message = 'handed back unstarted: the bisect''s share of its host group shrank'
         WHERE id IN (SELECT id FROM tasks WHERE bisect_id = $1 AND state = 'queued' AND attempts = 0
                      ORDER BY id DESC LIMIT $2 FOR UPDATE SKIP LOCKED)",
        bisect,
        n,
    )
    .execute(db)
    .await?
    .rows_affected())
}

/// Live hosts per group (the fallback loop notices hosts that went away).
pub async fn live_hosts_by_group<'e>(
    db: impl sqlx::PgExecutor<'e>,
    live_window_secs: i64,
) -> sqlx::Result<Vec<(String, i64)>> {
    let rows = sqlx::query!(
        r#"SELECT host_group,
                  count(*) FILTER (WHERE last_seen_at > now() - make_interval(secs => $1)) AS "live!"
           FROM hosts GROUP BY host_group ORDER BY host_group"#,
        live_window_secs as f64,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.host_group, r.live)).collect())
}

/// Sets a bisect's priority; its host group, or None when there is no such bisect.
pub async fn set_priority<'e>(
    db: impl sqlx::PgExecutor<'e>,
    bisect: i64,
    priority: i32,
) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar!(
        "UPDATE bisects b SET priority = $2 FROM job_specs j
         WHERE b.id = $1 AND j.id = b.job_spec_id RETURNING j.tbox_group",
        bisect,
        priority,
    )
    .fetch_optional(db)
    .await
}
