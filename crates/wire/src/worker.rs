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
    /// Unique host name. Registering again under a registered name needs that worker's
    /// current token (`previous_token`) or an operator's token; it replaces the old token.
    pub name: String,
    pub host_group: String,
    #[serde(default)]
    pub machine: MachineInfo,
    /// The worker token this worker was given last time, when it registers again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_token: Option<String>,
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
    /// Iterations already stored for this task (by an earlier holder that was interrupted or
    /// handed it back): the worker runs only the others.
    #[serde(default)]
    pub done_iterations: Vec<u32>,
    pub lease_expires_at: DateTime<Utc>,
    /// Deploy the commit afresh before the task's first run, even on a host already running
    /// it (the ssh runner boots it again; a VM a run and the local runner have nothing to do):
    /// runs of one boot share its level, so a commit measured again wants a boot of its own.
    #[serde(default)]
    pub fresh_deploy: bool,
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
    /// Where and under what kernel the run happened.
    #[serde(default)]
    pub environment: RunEnvironment,
}

/// What a run ran on: enough to tell two runs' conditions apart in a report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunEnvironment {
    /// The machine the benchmark ran on: the worker's host, the VM, or the ssh target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// `uname -r` where the benchmark ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_release: Option<String>,
    /// `/proc/cmdline` where the benchmark ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_cmdline: Option<String>,
    /// cpufreq governor of CPU 0 (`performance`), when the machine has cpufreq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_governor: Option<String>,
    /// Microcode revision of CPU 0, as `/proc/cpuinfo` prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub microcode: Option<String>,
    /// How the kernel under test was booted: `none` (local), `qemu`, `kexec`, `command`
    /// (the worker's boot hook), `power_cycle` (after the host did not come back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_method: Option<String>,
    /// `uname -v` where the benchmark ran: with the release, the identity of one build of a
    /// kernel (its build number and timestamp), checked against the built image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_version: Option<String>,
    /// The machine that ran the benchmark, as seen from inside it: the VM's CPUs and memory
    /// under qemu, the bare-metal host's over ssh. The report's "test machine".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineInfo>,
    /// The runs this machine made of this commit since the commit was deployed on it, before
    /// this one (0: the first run after its kernel booted or its VM started). The first runs
    /// after a deployment are often off (cold caches, a CPU not yet at its steady clock), and
    /// only the runner knows when it deployed: a qemu runner starts a VM for every run (always
    /// 0), an ssh runner counts from the boot, which in a paired task is every run. Absent
    /// where nothing is deployed (local runs): the server then counts the task's earlier
    /// runs of the commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_since_deploy: Option<u32>,
}

/// One build of one commit for a task, with its log (`POST /api/v1/worker/tasks/{id}/builds`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildReport {
    pub sha: String,
    pub succeeded: bool,
    /// The artifacts came from the worker's cache: no build ran (the log is the cached one).
    #[serde(default)]
    pub cached: bool,
    #[serde(default)]
    pub duration_secs: f64,
    /// The build's output; the server keeps its last 256 KiB.
    #[serde(default)]
    pub log: String,
}

/// A task given back unfinished (`POST /api/v1/worker/tasks/{id}/handback`): the worker is
/// shutting down. The task is queued again at once and the attempt is not counted.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HandBack {
    #[serde(default)]
    pub message: Option<String>,
}

/// A restarted worker's report about the task it was running when it stopped
/// (`POST /api/v1/worker/tasks/{id}/interrupted`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Interrupted {
    /// What the worker was doing (`build`, `boot`, `run 3 of 5`) and when it started.
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct InterruptedReply {
    /// The task was still held by this host and went back to the queue now (false: it had
    /// already been requeued, by re-registration or lease expiry, or it has ended).
    pub requeued: bool,
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
