//! Bodies of the task API (`/api/v1/tasks...`): what a task did, run by run and build by
//! build, with each run's environment and each build's log.

use crate::worker::RunEnvironment;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskSummary {
    pub id: i64,
    pub bisect_id: i64,
    pub sha: String,
    pub pair_sha: Option<String>,
    pub phase: String,
    /// `queued`, `running`, `done`, `build_failed`, `failed` or `cancelled`.
    pub state: String,
    /// Runs asked for, per commit measured.
    pub runs_requested: u32,
    pub attempts: u32,
    /// The host holding it (running) or that finished it.
    pub host: Option<String>,
    pub message: Option<String>,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Runs stored so far (every commit of a paired task), and how many of them completed.
    #[serde(default)]
    pub runs_stored: u32,
    #[serde(default)]
    pub runs_completed: u32,
    /// When a host first took it.
    #[serde(default)]
    pub started_at: Option<DateTime<Utc>>,
    /// From its start to its end (or to now, while it runs).
    #[serde(default)]
    pub duration_secs: Option<f64>,
    /// The engine asked for a deployment of its own (a new boot where the runner keeps one)
    /// before the first run: the commit was measured before.
    #[serde(default)]
    pub fresh_deploy: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskRun {
    pub iteration: u32,
    pub sha: String,
    pub host: String,
    pub completed: bool,
    pub metrics: BTreeMap<String, f64>,
    pub environment: RunEnvironment,
    pub log: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskBuild {
    pub sha: String,
    pub host: String,
    pub succeeded: bool,
    pub cached: bool,
    pub duration_secs: f64,
    pub log: String,
    pub reported_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskDetail {
    #[serde(flatten)]
    pub task: TaskSummary,
    /// The build log's tail, for a build that failed.
    pub log_tail: Option<String>,
    pub runs: Vec<TaskRun>,
    pub builds: Vec<TaskBuild>,
}
