//! Host inventory: what each test host is doing, and whether it may take work.
//!
//! The worker reports what its host does (booting a kernel, running a job, idle, powered
//! off) and how each boot went; the server keeps a failure streak and quarantines a host
//! whose streak reaches its limit. An operator drains a host (it finishes its task and takes
//! no more) or releases it (back to work, streak cleared).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a host is doing, as its worker reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HostActivity {
    Idle,
    Booting,
    Running,
    PoweredOff,
}

impl HostActivity {
    pub fn as_str(self) -> &'static str {
        match self {
            HostActivity::Idle => "idle",
            HostActivity::Booting => "booting",
            HostActivity::Running => "running",
            HostActivity::PoweredOff => "powered_off",
        }
    }
}

impl std::str::FromStr for HostActivity {
    type Err = crate::states::UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            HostActivity::Idle,
            HostActivity::Booting,
            HostActivity::Running,
            HostActivity::PoweredOff,
        ]
        .into_iter()
        .find(|a| a.as_str() == s)
        .ok_or_else(|| crate::states::UnknownState {
            what: "host activity",
            text: s.to_string(),
        })
    }
}

// `hosts.activity`, CHECKed to the same four strings.
#[cfg(feature = "sqlx")]
crate::states::sqlx_text!(HostActivity);

/// How the host's last boot or run went, when the report closes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HostOutcome {
    /// It came up (or ran) as asked: the failure streak ends.
    Healthy,
    /// It did not come back, even after a power cycle: one more failure.
    Failed,
}

/// `POST /api/v1/worker/host-state`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HostStateReport {
    pub activity: HostActivity,
    /// The kernel it runs now (`uname -r`), when known.
    #[serde(default)]
    pub kernel: Option<String>,
    /// A power action the worker just took (`cycle (ipmi)`).
    #[serde(default)]
    pub power_action: Option<String>,
    #[serde(default)]
    pub outcome: Option<HostOutcome>,
    /// Why, for a failure: shown with the quarantine.
    #[serde(default)]
    pub message: Option<String>,
}

/// The state the API and the dashboard show for a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HostState {
    Idle,
    Booting,
    Running,
    PoweredOff,
    /// Taken out of service after repeated failures, until an operator releases it.
    Quarantined,
}

/// One host of the inventory (`GET /api/v1/inventory`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HostInventory {
    pub id: i64,
    pub name: String,
    pub host_group: String,
    pub state: HostState,
    /// Drained by an operator: it takes no new task.
    pub drained: bool,
    /// It may claim tasks (neither quarantined nor drained).
    pub available: bool,
    pub current_kernel: Option<String>,
    pub last_power_action: Option<String>,
    pub last_power_action_at: Option<DateTime<Utc>>,
    /// Host failures in a row (boots that never came back).
    pub failure_streak: i32,
    pub quarantine_reason: Option<String>,
    pub state_changed_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub current_task: Option<i64>,
}

/// The server's answer to a host-state report.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HostStateReply {
    pub state: HostState,
    pub failure_streak: i32,
    pub available: bool,
}
