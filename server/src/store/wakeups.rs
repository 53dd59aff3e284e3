//! `scheduler_wakeups`: why a bisect needs another decision.
//!
//! Writers append a row (never update one), so recording a wake-up never waits for an advance
//! in progress. The advance of a bisect deletes its rows first thing, under its advisory lock:
//! rows committed before that delete are answered by the evidence it then reads; rows
//! committed after it stay and cause the next advance.

use super::SCHEDULED;
use perfbisect_wire::states::BisectStatus;

/// NOTIFY channel raised with the bisect id as payload whenever a wake-up is recorded.
pub const CHANNEL: &str = "perfbisect_advance";

/// Why the scheduler looks at a bisect again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Submitted,
    RunStored,
    TaskEnded,
    LeaseExpired,
    HostsChanged,
    ShareChanged,
    Fallback,
    /// The bisect ended: one more advance stores its final summary.
    Ended,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Submitted => "submitted",
            Reason::RunStored => "run_stored",
            Reason::TaskEnded => "task_ended",
            Reason::LeaseExpired => "lease_expired",
            Reason::HostsChanged => "hosts_changed",
            Reason::ShareChanged => "share_changed",
            Reason::Fallback => "fallback",
            Reason::Ended => "ended",
        }
    }
}

/// Records that `bisect` needs a decision, and wakes every replica's scheduler unless a
/// wake-up of the bisect was pending already.
///
/// Why only then: PostgreSQL makes every transaction that NOTIFYs commit one after another
/// (a cluster-wide lock from before the commit record until it is flushed), so a thousand
/// hosts uploading, each upload NOTIFYing, flushed the WAL one upload at a time. A pending
/// row was announced when it was written, and the dispatcher reads the table again after
/// each advance and every second (`dispatch`), so the row written now is answered without a
/// second NOTIFY. (Seen from this statement, a pending row is one committed before it; one
/// an advance is deleting is still seen, and that advance's dispatcher reads the table again
/// when it ends.)
pub async fn wake<'e>(
    db: impl sqlx::PgExecutor<'e>,
    bisect: i64,
    reason: Reason,
) -> sqlx::Result<()> {
    sqlx::query!(
        "WITH w AS (INSERT INTO scheduler_wakeups (bisect_id, reason) VALUES ($1, $2) RETURNING bisect_id)
         SELECT pg_notify($3, bisect_id::text) FROM w
         WHERE NOT EXISTS (SELECT 1 FROM scheduler_wakeups p WHERE p.bisect_id = w.bisect_id)",
        bisect,
        reason.as_str(),
        CHANNEL,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Wakes every active bisect of a host group (a host came or went: shares change).
pub async fn wake_group<'e>(
    db: impl sqlx::PgExecutor<'e>,
    host_group: &str,
    reason: Reason,
) -> sqlx::Result<u64> {
    let woken = sqlx::query!(
        "WITH w AS (INSERT INTO scheduler_wakeups (bisect_id, reason)
                    SELECT b.id, $2 FROM bisects b JOIN job_specs j ON j.id = b.job_spec_id
                    WHERE j.tbox_group = $1 AND b.status = ANY($4)
                    RETURNING bisect_id)
         SELECT pg_notify($3, bisect_id::text) FROM w",
        host_group,
        reason.as_str(),
        CHANNEL,
        SCHEDULED as &[BisectStatus],
    )
    .execute(db)
    .await?;
    Ok(woken.rows_affected())
}

/// Wakes the other active bisects of `bisect`'s host group when its hosts are free again and
/// there are more live hosts than active bisects (otherwise every share stays one host).
/// Like `wake`, it NOTIFYs only for a bisect without a pending wake-up.
pub async fn wake_group_of<'e>(
    db: impl sqlx::PgExecutor<'e>,
    bisect: i64,
    reason: Reason,
) -> sqlx::Result<u64> {
    let woken = sqlx::query!(
        "WITH g AS (SELECT j.tbox_group AS grp FROM bisects b JOIN job_specs j ON j.id = b.job_spec_id
                    WHERE b.id = $1),
              others AS (SELECT b.id FROM bisects b JOIN job_specs j ON j.id = b.job_spec_id
                         WHERE j.tbox_group = (SELECT grp FROM g) AND b.id <> $1
                           AND b.status = ANY($5)),
              live AS (SELECT count(*) AS n FROM hosts WHERE host_group = (SELECT grp FROM g)
                       AND last_seen_at > now() - make_interval(secs => $4)),
              w AS (INSERT INTO scheduler_wakeups (bisect_id, reason)
                    SELECT id, $2 FROM others WHERE (SELECT n FROM live) > (SELECT count(*) FROM others)
                    RETURNING bisect_id)
         SELECT pg_notify($3, bisect_id::text) FROM w
         WHERE NOT EXISTS (SELECT 1 FROM scheduler_wakeups p WHERE p.bisect_id = w.bisect_id)",
        bisect,
        reason.as_str(),
        CHANNEL,
        crate::store::allocation::LIVE_HOST_WINDOW_SECS as f64,
        SCHEDULED as &[BisectStatus],
    )
    .execute(db)
    .await?;
    Ok(woken.rows_affected())
}

/// A bisect joined `host_group`: every share there shrank. Wakes the group's other bisects
/// that have unstarted work queued (and no wake-up pending), so each hands back what is now
/// beyond its share before hosts take it.
pub async fn wake_group_queued<'e>(
    db: impl sqlx::PgExecutor<'e>,
    host_group: &str,
    joined: i64,
) -> sqlx::Result<u64> {
    let woken = sqlx::query!(
        "WITH w AS (INSERT INTO scheduler_wakeups (bisect_id, reason)
                    SELECT DISTINCT t.bisect_id, $3 FROM tasks t
                    WHERE t.host_group = $1 AND t.state = 'queued' AND t.bisect_id <> $2
                      AND NOT EXISTS (SELECT 1 FROM scheduler_wakeups p WHERE p.bisect_id = t.bisect_id)
                    RETURNING bisect_id)
         SELECT pg_notify($4, bisect_id::text) FROM w",
        host_group,
        joined,
        Reason::ShareChanged.as_str(),
        CHANNEL,
    )
    .execute(db)
    .await?;
    Ok(woken.rows_affected())
}

/// The fallback: a wake-up for every active bisect that has none pending. Catches whatever a
/// lost notification or a replica that died between its delete and its commit left behind.
pub async fn wake_all_active<'e>(db: impl sqlx::PgExecutor<'e>) -> sqlx::Result<u64> {
    let woken = sqlx::query!(
        "INSERT INTO scheduler_wakeups (bisect_id, reason)
         SELECT b.id, $1 FROM bisects b
         WHERE b.status = ANY($2)
           AND NOT EXISTS (SELECT 1 FROM scheduler_wakeups w WHERE w.bisect_id = b.id)",
        Reason::Fallback.as_str(),
        SCHEDULED as &[BisectStatus],
    )
    .execute(db)
    .await?;
    Ok(woken.rows_affected())
}

/// Bisects with wake-ups pending, the longest waiting first.
pub async fn pending<'e>(db: impl sqlx::PgExecutor<'e>, limit: i64) -> sqlx::Result<Vec<i64>> {
    sqlx::query_scalar!(
        "SELECT bisect_id FROM scheduler_wakeups GROUP BY bisect_id ORDER BY min(id) LIMIT $1",
        limit,
    )
    .fetch_all(db)
    .await
}

/// How many wake-ups wait (for `/metrics`).
pub async fn backlog<'e>(db: impl sqlx::PgExecutor<'e>) -> sqlx::Result<i64> {
    sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM scheduler_wakeups"#)
        .fetch_one(db)
        .await
}

/// Takes the bisect's wake-ups; called by its advance under the advisory lock, before it
/// reads any evidence.
pub async fn consume(tx: &mut sqlx::PgConnection, bisect: i64) -> sqlx::Result<u64> {
    Ok(
        sqlx::query!("DELETE FROM scheduler_wakeups WHERE bisect_id = $1", bisect)
            .execute(tx)
            .await?
            .rows_affected(),
    )
}

/// Advisory-lock key space of per-bisect advances (the one-bigint form; loop leases use the
/// two-int form, which PostgreSQL keeps apart).
pub async fn try_lock_bisect(tx: &mut sqlx::PgConnection, bisect: i64) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT pg_try_advisory_xact_lock($1) AS "locked!""#,
        bisect
    )
    .fetch_one(tx)
    .await
}

/// Waits for the bisect's advance lock (for rare writers such as cancel).
pub async fn lock_bisect(tx: &mut sqlx::PgConnection, bisect: i64) -> sqlx::Result<()> {
    sqlx::query!("SELECT pg_advisory_xact_lock($1)", bisect)
        .execute(tx)
        .await?;
    Ok(())
}
