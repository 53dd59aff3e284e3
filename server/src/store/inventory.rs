//! The host inventory as the API and the dashboard show it: each host's state, kernel, last
//! power action, failure streak, quarantine and drain.

use chrono::{DateTime, Utc};
use perfbisect_wire::hosts::{HostInventory, HostState};
use sqlx::PgPool;

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    name: String,
    host_group: String,
    activity: String,
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

/// The inventory query, with `$tail` (a literal WHERE/ORDER BY) appended.
macro_rules! select {
    ($tail:literal) => {
        concat!(
            "SELECT h.id, h.name, h.host_group, h.activity, h.current_kernel,
                h.last_power_action, h.last_power_action_at, h.failure_streak, h.quarantined_at,
                h.quarantine_reason, h.drained_at, h.state_changed_at, h.last_seen_at,
                (SELECT t.id FROM tasks t WHERE t.host_id = h.id AND t.state = 'running' LIMIT 1)
                    AS current_task
             FROM hosts h ",
            $tail
        )
    };
}

impl From<Row> for HostInventory {
    fn from(r: Row) -> Self {
        let state = if r.quarantined_at.is_some() {
            HostState::Quarantined
        } else {
            match r.activity.as_str() {
                "booting" => HostState::Booting,
                "running" => HostState::Running,
                "powered_off" => HostState::PoweredOff,
                _ => HostState::Idle,
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
    let rows: Vec<Row> = sqlx::query_as(select!("ORDER BY h.host_group, h.name"))
        .fetch_all(db)
        .await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// One host's inventory (`None`: no such host).
pub async fn one(db: &PgPool, id: i64) -> sqlx::Result<Option<HostInventory>> {
    let row: Option<Row> = sqlx::query_as(select!("WHERE h.id = $1"))
        .bind(id)
        .fetch_optional(db)
        .await?;
    Ok(row.map(Into::into))
}
