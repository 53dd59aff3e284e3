//! The counts `/metrics` reports: queue depth, active bisects, hosts by state, outbox
//! backlog. Each is a `(label, count)` list.

use perfbisect_wire::states::BisectStatus;
use sqlx::PgPool;

/// Tasks in `state` (`queued`, `running`) per host group.
pub async fn tasks_per_group(db: &PgPool, state: &str) -> sqlx::Result<Vec<(String, i64)>> {
    let rows = sqlx::query!(
        r#"SELECT host_group, count(*) AS "n!" FROM tasks WHERE state = $1 GROUP BY host_group"#,
        state,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.host_group, r.n)).collect())
}

/// Bisects the scheduler works on, per status.
pub async fn scheduled_bisects(db: &PgPool) -> sqlx::Result<Vec<(String, i64)>> {
    let rows = sqlx::query!(
        r#"SELECT status, count(*) AS "n!" FROM bisects WHERE status = ANY($1) GROUP BY status"#,
        super::SCHEDULED as &[BisectStatus],
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.status, r.n)).collect())
}

/// Hosts per state: `stale` (not seen within `live_secs`), `busy` (running a task), `idle`.
pub async fn hosts_by_state(db: &PgPool, live_secs: f64) -> sqlx::Result<Vec<(String, i64)>> {
    let rows = sqlx::query!(
        r#"SELECT CASE WHEN h.last_seen_at <= now() - make_interval(secs => $1) THEN 'stale'
                       WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.host_id = h.id AND t.state = 'running') THEN 'busy'
                       ELSE 'idle' END AS "state!", count(*) AS "n!"
           FROM hosts h GROUP BY 1"#,
        live_secs,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.state, r.n)).collect())
}

/// Mails waiting or being sent, per state.
pub async fn outbox_backlog(db: &PgPool) -> sqlx::Result<Vec<(String, i64)>> {
    let rows = sqlx::query!(
        r#"SELECT state, count(*) AS "n!" FROM outbox WHERE state IN ('pending', 'sending')
           GROUP BY state"#,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.state, r.n)).collect())
}
