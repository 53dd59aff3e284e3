//! `hosts`: registered workers, each with its host group, token hash and signs of life.

use chrono::{DateTime, Utc};
use perfbisect_wire::states::Phase;
use perfbisect_wire::worker::MachineInfo;
use sqlx::PgPool;
use sqlx::types::Json;

/// The host holding the worker token with `hash`: its id and host group. Refreshes its
/// `last_seen_at` when that is older than `seen_every_secs`: every worker request is a sign
/// of life, but writing each one would cost a commit per request and tell nobody anything new
/// (liveness windows are minutes).
pub async fn authenticate(
    db: &PgPool,
    hash: &str,
    seen_every_secs: f64,
) -> sqlx::Result<Option<(i64, String)>> {
    let row = sqlx::query!(
        r#"WITH h AS (SELECT id, host_group, last_seen_at FROM hosts WHERE token_hash = $1),
                seen AS (UPDATE hosts SET last_seen_at = now() FROM h
                         WHERE hosts.id = h.id AND h.last_seen_at < now() - make_interval(secs => $2))
           SELECT id AS "id!", host_group AS "host_group!" FROM h"#,
        hash,
        seen_every_secs,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| (r.id, r.host_group)))
}

/// Registers a worker under `name` with a new token hash, or takes the name over: only with
/// `takeover` (an operator's registration) or when `previous_hash` is the name's current
/// token, decided in the statement that writes. `None`: the name belongs to another worker.
pub async fn register(
    db: &PgPool,
    name: &str,
    host_group: &str,
    machine: &serde_json::Value,
    hash: &str,
    takeover: bool,
    previous_hash: Option<&str>,
) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!(
        "INSERT INTO hosts (name, host_group, machine, token_hash) VALUES ($1, $2, $3, $4)
         ON CONFLICT (name) DO UPDATE SET host_group = EXCLUDED.host_group, machine = EXCLUDED.machine,
             token_hash = EXCLUDED.token_hash, last_seen_at = now()
         WHERE $5 OR hosts.token_hash = $6
         RETURNING id",
        name,
        host_group,
        machine,
        hash,
        takeover,
        previous_hash,
    )
    .fetch_optional(db)
    .await
}

/// A host as `GET /api/v1/hosts` lists it.
#[derive(Debug)]
pub struct Listed {
    pub id: i64,
    pub name: String,
    pub host_group: String,
    pub machine: Json<MachineInfo>,
    pub last_seen_at: DateTime<Utc>,
    /// The task it is running, if any.
    pub current_task: Option<i64>,
}

/// Every host, by group and name.
pub async fn list(db: &PgPool) -> sqlx::Result<Vec<Listed>> {
    sqlx::query_as!(
        Listed,
        r#"SELECT h.id, h.name, h.host_group, h.machine AS "machine: Json<MachineInfo>", h.last_seen_at,
                  (SELECT t.id FROM tasks t WHERE t.host_id = h.id AND t.state = 'running' LIMIT 1)
                      AS current_task
           FROM hosts h ORDER BY h.host_group, h.name"#,
    )
    .fetch_all(db)
    .await
}

/// A host with the task it is running, as the hosts page shows it.
#[derive(Debug)]
pub struct WithTask {
    pub name: String,
    pub host_group: String,
    pub machine: Json<MachineInfo>,
    pub last_seen_at: DateTime<Utc>,
    pub task_id: Option<i64>,
    pub bisect_id: Option<i64>,
    pub sha: Option<String>,
    pub phase: Option<Phase>,
    pub started_at: Option<DateTime<Utc>>,
}

/// Every host with its running task (the oldest, should it hold several), by group and name.
pub async fn with_tasks(db: &PgPool) -> sqlx::Result<Vec<WithTask>> {
    sqlx::query_as!(
        WithTask,
        r#"SELECT h.name, h.host_group, h.machine AS "machine: Json<MachineInfo>", h.last_seen_at,
                  t.id AS "task_id?", t.bisect_id AS "bisect_id?", t.sha AS "sha?",
                  t.phase AS "phase?: Phase", t.started_at AS "started_at?"
           FROM hosts h LEFT JOIN LATERAL (
               SELECT id, bisect_id, sha, phase, started_at FROM tasks
               WHERE host_id = h.id AND state = 'running' ORDER BY id LIMIT 1) t ON true
           ORDER BY h.host_group, h.name"#,
    )
    .fetch_all(db)
    .await
}

/// How many hosts of each group were seen within the last `window_secs`.
pub async fn live_per_group(db: &PgPool, window_secs: f64) -> sqlx::Result<Vec<(String, i64)>> {
    let rows = sqlx::query!(
        r#"SELECT host_group, count(*) AS "hosts!" FROM hosts
           WHERE last_seen_at > now() - make_interval(secs => $1) GROUP BY host_group"#,
        window_secs,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.host_group, r.hosts)).collect())
}

/// The host's name.
pub async fn name(db: &PgPool, id: i64) -> sqlx::Result<String> {
    sqlx::query_scalar!("SELECT name FROM hosts WHERE id = $1", id)
        .fetch_one(db)
        .await
}
