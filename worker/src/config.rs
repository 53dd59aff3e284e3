//! Worker configuration: flags and environment variables.

use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct WorkerConfig {
    /// The server's base URL.
    #[arg(
        long,
        env = "PERFBISECT_SERVER",
        default_value = "http://127.0.0.1:8080"
    )]
    pub server: String,
    /// Enrollment token (the server's `enroll-token`).
    #[arg(long, env = "PERFBISECT_ENROLL_TOKEN")]
    pub enroll_token: String,
    /// This host's name (unique among workers).
    #[arg(long, env = "PERFBISECT_WORKER_NAME")]
    pub name: Option<String>,
    /// The host group this worker serves (a job's `tbox_group`).
    #[arg(long, env = "PERFBISECT_HOST_GROUP", default_value = "local")]
    pub host_group: String,
    /// Mirrors and build trees live here.
    #[arg(
        long,
        env = "PERFBISECT_WORK_DIR",
        default_value = ".perfbisect/worker"
    )]
    pub work_dir: PathBuf,
    /// How long one claim waits for a task.
    #[arg(long, default_value_t = 20)]
    pub claim_wait_secs: u64,
    /// Exit after this many tasks (0: never). For tests and one-shot hosts.
    #[arg(long, default_value_t = 0)]
    pub max_tasks: u64,
}

impl WorkerConfig {
    pub fn name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "worker".into())
        })
    }
}
