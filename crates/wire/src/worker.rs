//! Bodies of the worker protocol (`/api/v1/worker/...`).

use crate::JobSpec;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// The test host, as the report prints it ("128 threads 2 sockets Intel(R) Xeon(R) ...").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MachineInfo {
    pub cpu_model: Option<String>,
    pub threads: Option<u32>,
    pub sockets: Option<u32>,
    pub memory_bytes: Option<u64>,
    pub kernel: Option<String>,
    pub os: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterWorker {
    /// Unique host name; registering again under the same name replaces the old token.
    pub name: String,
    pub host_group: String,
    #[serde(default)]
    pub machine: MachineInfo,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkerRegistered {
    pub host_id: i64,
    /// Bearer token for every later worker call.
    pub token: String,
    /// Heartbeat at least this often while a task runs.
    pub heartbeat_secs: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClaimRequest {
    /// Wait up to this long for a task (long poll); 0 answers at once.
    #[serde(default)]
    pub wait_secs: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskAssignment {
    pub task_id: i64,
    pub bisect_id: i64,
    pub repository_url: String,
    pub sha: String,
    /// When set, measure `sha` and this commit interleaved on this host: run i of `sha` is
    /// iteration 2i, run i of `pair_sha` is iteration 2i + 1.
    #[serde(default)]
    pub pair_sha: Option<String>,
    pub job: JobSpec,
    pub job_hash: String,
    /// The metric the bisect needs in every complete run.
    pub metric: String,
    pub runs: u32,
    pub lease_expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatReply {
    /// The task was cancelled (or taken away): stop working on it.
    pub cancelled: bool,
    pub lease_expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunUpload {
    /// 0-based run number within the task; uploading the same one twice is a no-op.
    pub iteration: u32,
    /// The commit this run measured; needed for paired tasks (the task's or its pair's).
    #[serde(default)]
    pub sha: Option<String>,
    /// False when the benchmark did not finish (crash, timeout): its metrics are not used.
    pub completed: bool,
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
    #[serde(default)]
    pub log: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskOutcome {
    /// All runs were uploaded.
    Done,
    /// The build failed: the commit is untestable for this job.
    BuildFailed,
    /// Something else went wrong on the worker (not the commit's fault).
    Error,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteTask {
    pub outcome: TaskOutcome,
    #[serde(default)]
    pub message: Option<String>,
    /// Last lines of the build log (for build failures).
    #[serde(default)]
    pub log_tail: Option<String>,
    /// For a build failure of a paired task: which commit failed to build.
    #[serde(default)]
    pub failed_sha: Option<String>,
}
