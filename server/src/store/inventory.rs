//! The host inventory as the API and the dashboard show it: each host's state, kernel, last
//! power action, failure streak, quarantine and drain.

use chrono::{DateTime, Utc};
use perfbisect_wire::hosts::{HostActivity, HostInventory, HostState};
use sqlx::PgPool;

struct Row {
    id: i64,
    name: String,
    host_group: String,
    activity: HostActivity,
    current_kernel: Option<String>,
    last_power_action: Option<String>,
    last_power_action_at: Option<DateTime<Utc>>,
    failure_streak: i32,
    quarantined_at: Option<DateTime<Utc>>,
    quarantine_reason: Option<String>,
    drained_at: Option<DateTime<Utc>>,
    state_changed_at: DateTime<Utc>,
    last_seen_at: DateTime<Utc>,
    current_task: Option<i64>,
}

/// The inventory query with `$tail` (a literal WHERE/ORDER BY) appended, and its arguments.
macro_rules! select {
    ($tail:literal $(, $arg:expr)*) => {
        sqlx::query_as!(
            Row,
            r#"SELECT h.id, h.name, h.host_group, h.activity AS "activity: HostActivity",
                   h.current_kernel, h.last_power_action, h.last_power_action_at, h.failure_streak,
                   h.quarantined_at, h.quarantine_reason, h.drained_at, h.state_changed_at,
                   h.last_seen_at,
                   (SELECT t.id FROM tasks t WHERE t.host_id = h.id AND t.state = 'running' LIMIT 1)
                       AS current_task
               FROM hosts h "# + $tail
            $(, $arg)*
        )
    };
}

impl From<Row> for HostInventory {
    fn from(r: Row) -> Self {
        let state = if r.quarantined_at.is_some() {
            HostState::Quarantined
        } else {
            match r.activity {
                HostActivity::Booting => HostState::Booting,
                HostActivity::Running => HostState::Running,
                HostActivity::PoweredOff => HostState::PoweredOff,
                HostActivity::Idle => HostState::Idle,
            }
        };
        HostInventory {
            id: r.id,
            name: r.name,
            host_group: r.host_group,
            state,
            drained: r.drained_at.is_some(),
            available: r.quarantined_at.is_none() && r.drained_at.is_none(),
            current_kernel: r.current_kernel,
            last_power_action: r.last_power_action,
            last_power_action_at: r.last_power_action_at,
            failure_streak: r.failure_streak,
            quarantine_reason: r.quarantine_reason,
            state_changed_at: r.state_changed_at,
            last_seen_at: r.last_seen_at,
            current_task: r.current_task,
        }
    }
}

/// Every host's inventory, by group and name.
pub async fn all(db: &PgPool) -> sqlx::Result<Vec<HostInventory>> {
    let rows = select!("ORDER BY h.host_group, h.name")
        .fetch_all(db)
        .await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// One host's inventory (`None`: no such host).
pub async fn one(db: &PgPool, id: i64) -> sqlx::Result<Option<HostInventory>> {
    let row = select!("WHERE h.id = $1", id).fetch_optional(db).await?;
    Ok(row.map(Into::into))
}

/// What a worker reports of its host (`POST /api/v1/worker/host-state`).
pub struct StateReport<'a> {
    pub activity: HostActivity,
    pub kernel: Option<&'a str>,
    pub power_action: Option<&'a str>,
    /// The last boot failed: the failure streak grows.
    pub failed: bool,
    /// The last boot was healthy: the streak ends.
    pub healthy: bool,
}

/// Records a host's report. The failure that brings the streak to `quarantine_after`
/// quarantines the host with `reason`, in the same statement (one report, one decision).
pub async fn report_state(
    db: &PgPool,
    host_id: i64,
    report: &StateReport<'_>,
    quarantine_after: i32,
    reason: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE hosts SET
           state_changed_at = CASE WHEN activity = $2 THEN state_changed_at ELSE now() END,
           activity = $2,
           current_kernel = COALESCE($3, current_kernel),
           last_power_action = COALESCE($4, last_power_action),
           last_power_action_at = CASE WHEN $4::text IS NULL THEN last_power_action_at ELSE now() END,
           failure_streak = CASE WHEN $5 THEN failure_streak + 1 WHEN $6 THEN 0
                                 ELSE failure_streak END,
           quarantine_reason = CASE WHEN $5 AND failure_streak + 1 >= $7 AND quarantined_at IS NULL
                                 THEN $8 ELSE quarantine_reason END,
           quarantined_at = CASE WHEN $5 AND failure_streak + 1 >= $7 AND quarantined_at IS NULL
                                 THEN now() ELSE quarantined_at END
         WHERE id = $1",
        host_id,
        report.activity.as_str(),
        report.kernel,
        report.power_action,
        report.failed,
        report.healthy,
        quarantine_after,
        reason,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Drains a host: it claims nothing more until released (a drained one stays as it was).
pub async fn drain(db: &PgPool, id: i64) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE hosts SET drained_at = COALESCE(drained_at, now()) WHERE id = $1",
        id
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Releases a drained or quarantined host, its failure streak cleared.
pub async fn release(db: &PgPool, id: i64) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE hosts SET drained_at = NULL, quarantined_at = NULL, quarantine_reason = NULL,
                          failure_streak = 0 WHERE id = $1",
        id,
    )
    .execute(db)
    .await?;
    Ok(())
}
