//! The hosts page: every registered worker, what it is doing, and whether it is still there.

use super::error::PageError;
use super::format::{self, short_sha};
use crate::state::AppState;
use askama::Template;
use axum::extract::State;
use axum::response::Html;
use chrono::{DateTime, Utc};
use perfbisect_wire::worker::MachineInfo;

/// A host not heard from for this long is stale: the window in which the scheduler counts a
/// host as alive.
pub use crate::store::allocation::LIVE_HOST_WINDOW_SECS as STALE_AFTER_SECS;

pub struct TaskView {
    pub id: i64,
    pub bisect_id: i64,
    pub short: String,
    pub phase: String,
    pub running_for: String,
}

pub struct HostView {
    pub name: String,
    pub group: String,
    pub machine: String,
    /// `busy`, `idle` or `stale`.
    pub state: &'static str,
    pub task: Option<TaskView>,
    pub last_seen: String,
    pub last_seen_iso: String,
}

#[derive(Template)]
#[template(path = "hosts.html")]
struct HostsPage {
    nav: &'static str,
    hosts: Vec<HostView>,
    busy: usize,
    idle: usize,
    stale: usize,
    stale_after: String,
    /// Each host's inventory state (bare-metal hosts report theirs).
    inventory: Vec<InventoryView>,
}

/// One row of the inventory table.
pub struct InventoryView {
    pub name: String,
    /// `idle`, `booting`, `running`, `powered_off`, `quarantined`.
    pub state: String,
    pub drained: bool,
    pub kernel: String,
    pub power: String,
    pub failure_streak: i32,
    pub reason: String,
}

fn inventory_view(h: perfbisect_wire::hosts::HostInventory, now: DateTime<Utc>) -> InventoryView {
    let state = serde_json::to_value(h.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    InventoryView {
        name: h.name,
        state,
        drained: h.drained,
        kernel: h.current_kernel.unwrap_or_else(|| "–".into()),
        power: match (h.last_power_action, h.last_power_action_at) {
            (Some(a), Some(at)) => format!("{a}, {}", format::age(at, now)),
            (Some(a), None) => a,
            _ => "–".into(),
        },
        failure_streak: h.failure_streak,
        reason: h.quarantine_reason.unwrap_or_default(),
    }
}

/// `Intel Xeon … · 8 threads · 2 sockets · 31.2 GiB · Linux 6.1.0`, from what the worker reported.
pub fn describe(m: &MachineInfo) -> String {
    let mut parts = Vec::new();
    if let Some(cpu) = &m.cpu_model {
        parts.push(cpu.clone());
    }
    if let Some(t) = m.threads {
        parts.push(format!("{t} threads"));
    }
    if let Some(s) = m.sockets {
        parts.push(format!("{s} socket{}", if s == 1 { "" } else { "s" }));
    }
    if let Some(b) = m.memory_bytes {
        parts.push(format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64));
    }
    if let Some(k) = &m.kernel {
        parts.push(format!("kernel {k}"));
    }
    if let Some(os) = &m.os {
        parts.push(os.clone());
    }
    if parts.is_empty() {
        "not reported".into()
    } else {
        parts.join(" · ")
    }
}

pub async fn page(State(state): State<AppState>) -> Result<Html<String>, PageError> {
    let rows = crate::store::hosts::with_tasks(&state.db).await?;
    let now = Utc::now();
    let hosts: Vec<HostView> = rows
        .into_iter()
        .map(|r| {
            let stale = (now - r.last_seen_at).num_seconds() > STALE_AFTER_SECS;
            let task = match (r.task_id, r.bisect_id, &r.sha) {
                (Some(id), Some(bisect_id), Some(sha)) => Some(TaskView {
                    id,
                    bisect_id,
                    short: short_sha(sha).to_string(),
                    phase: r.phase.map(|p| p.as_str().to_string()).unwrap_or_default(),
                    running_for: r
                        .started_at
                        .map(|s| format::duration((now - s).num_seconds()))
                        .unwrap_or_default(),
                }),
                _ => None,
            };
            HostView {
                state: match (stale, &task) {
                    (true, _) => "stale",
                    (false, Some(_)) => "busy",
                    (false, None) => "idle",
                },
                name: r.name,
                group: r.host_group,
                machine: describe(&r.machine),
                task,
                last_seen: format::age(r.last_seen_at, now),
                last_seen_iso: format::iso(r.last_seen_at),
            }
        })
        .collect();
    let inventory = crate::store::inventory::all(&state.db)
        .await?
        .into_iter()
        .map(|h| inventory_view(h, now))
        .collect();
    let count = |s: &str| hosts.iter().filter(|h| h.state == s).count();
    let html = HostsPage {
        nav: "hosts",
        busy: count("busy"),
        idle: count("idle"),
        stale: count("stale"),
        stale_after: format::duration(STALE_AFTER_SECS),
        hosts,
        inventory,
    }
    .render()?;
    Ok(Html(html))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_descriptions_say_what_was_reported() {
        let m = MachineInfo {
            cpu_model: Some("Xeon".into()),
            threads: Some(8),
            sockets: Some(1),
            memory_bytes: Some(16 << 30),
            kernel: None,
            os: None,
        };
        assert_eq!(describe(&m), "Xeon · 8 threads · 1 socket · 16.0 GiB");
        assert_eq!(describe(&MachineInfo::default()), "not reported");
    }
}
