//! Worker configuration: flags and environment variables.
//!
//! What belongs here is what the test host is (its name, its group, how to reach, boot and
//! power-cycle it, what it has installed); what is measured belongs to the job spec.

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
    /// Enrollment token (the server's `enroll-token`). Prefer the environment or
    /// `--enroll-token-file`: a flag shows in `ps`.
    #[arg(long, env = "PERFBISECT_ENROLL_TOKEN", hide_env_values = true)]
    pub enroll_token: Option<String>,
    /// A file holding the enrollment token.
    #[arg(long, env = "PERFBISECT_ENROLL_TOKEN_FILE")]
    pub enroll_token_file: Option<PathBuf>,
    /// More variables of the worker's environment that job commands may see (comma
    /// separated). Jobs otherwise get only PATH, HOME, locale and the like, and the
    /// worker's PERFBISECT_* settings that are not secrets.
    #[arg(long, env = "PERFBISECT_PASS_ENV", value_delimiter = ',')]
    pub pass_env: Vec<String>,
    /// PEM file of a CA to trust for an `https://` server (a private CA), besides the
    /// system's roots.
    #[arg(long, env = "PERFBISECT_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// How this worker's mirrors reach repositories (https CA and credentials, ssh key,
    /// lab-local mirror rewrites).
    #[command(flatten)]
    pub git: perfbisect_gitfetch::GitAuth,
    /// This host's name (unique among workers).
    #[arg(long, env = "PERFBISECT_WORKER_NAME")]
    pub name: Option<String>,
    /// The host group this worker serves (a job's `tbox_group`).
    #[arg(long, env = "PERFBISECT_HOST_GROUP", default_value = "local")]
    pub host_group: String,
    /// Mirrors, the build cache and kernel build trees live here.
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
    /// Heartbeat at least this often while a task runs: the delay before a cancellation
    /// from the server stops the work.
    #[arg(long, env = "PERFBISECT_HEARTBEAT_SECS", default_value_t = 3)]
    pub heartbeat_secs: u64,
    /// Size bound of the build cache; least recently used builds are evicted beyond it.
    #[arg(long, env = "PERFBISECT_CACHE_MAX_BYTES", default_value_t = 50 << 30)]
    pub cache_max_bytes: u64,
    /// Parallel make jobs for kernel builds (default: the number of CPUs).
    #[arg(long, env = "PERFBISECT_BUILD_JOBS")]
    pub build_jobs: Option<usize>,
    /// Do not use ccache for kernel builds even when it is installed.
    #[arg(long, env = "PERFBISECT_NO_CCACHE")]
    pub no_ccache: bool,
    /// After a task failed because the test host is down (it did not come back even after
    /// a power cycle), wait this long before claiming again.
    #[arg(long, env = "PERFBISECT_HOST_DOWN_PAUSE_SECS", default_value_t = 300)]
    pub host_down_pause_secs: u64,
    /// Where named root filesystems (a job's `rootfs`) are, for `deploy.kind: qemu` and `ssh`.
    #[arg(long, env = "PERFBISECT_ROOTFS_DIR")]
    pub rootfs_dir: Option<PathBuf>,
    #[command(flatten)]
    pub qemu: QemuConfig,
    #[command(flatten)]
    pub ssh: SshConfig,
}

#[derive(Debug, Clone, clap::Args)]
pub struct QemuConfig {
    /// The qemu binary for `deploy.kind: qemu`.
    #[arg(
        long = "qemu-binary",
        env = "PERFBISECT_QEMU",
        default_value = "qemu-system-x86_64"
    )]
    pub binary: String,
    /// qemu's accelerator: `tcg` (software, works everywhere) or `kvm`.
    #[arg(
        long = "qemu-accel",
        env = "PERFBISECT_QEMU_ACCEL",
        default_value = "tcg"
    )]
    pub accel: String,
}

#[derive(Debug, Clone, clap::Args)]
pub struct SshConfig {
    /// The bare-metal test host for `deploy.kind: ssh` (`root@lkp-icl-2sp9`).
    #[arg(long = "ssh-target", env = "PERFBISECT_SSH_TARGET")]
    pub target: Option<String>,
    #[arg(long = "ssh-port", env = "PERFBISECT_SSH_PORT", default_value_t = 22)]
    pub port: u16,
    /// Private key for the test host.
    #[arg(long = "ssh-identity", env = "PERFBISECT_SSH_IDENTITY")]
    pub identity: Option<PathBuf>,
    /// Extra `-o` options for ssh (`UserKnownHostsFile=/srv/known_hosts`).
    #[arg(long = "ssh-option")]
    pub options: Vec<String>,
    /// Where kernels, initramfs and job files go on the test host.
    #[arg(long = "ssh-remote-dir", default_value = "/tmp/perfbisect")]
    pub remote_dir: String,
    /// Boot the kernel under test with this command on the worker instead of kexec (a
    /// boot-once entry plus reboot, a PXE switch, ...). It gets PERFBISECT_SSH_TARGET,
    /// PERFBISECT_KERNEL, PERFBISECT_INITRD (paths on the test host), PERFBISECT_CMDLINE and
    /// PERFBISECT_KERNEL_RELEASE, and must return once the reboot is under way.
    #[arg(long = "boot-command", env = "PERFBISECT_BOOT_COMMAND")]
    pub boot_command: Option<String>,
    /// With kexec (no --boot-command): when the host cannot load the kernel with kexec (no
    /// kexec-tools, a locked-down or secure-boot kernel), boot it with this command instead,
    /// typically a boot-once bootloader entry plus reboot. Same environment as
    /// --boot-command.
    #[arg(
        long = "boot-fallback-command",
        env = "PERFBISECT_BOOT_FALLBACK_COMMAND"
    )]
    pub boot_fallback_command: Option<String>,
    /// The `script` power driver: run on the worker when the test host does not come back
    /// within the boot timeout (with PERFBISECT_POWER_ACTION=cycle); then one more wait.
    #[arg(long = "power-cycle-command", env = "PERFBISECT_POWER_CYCLE_COMMAND")]
    pub power_cycle_command: Option<String>,
    /// How to power-cycle a test host that does not come back: `ipmi` (its BMC, with
    /// `ipmitool -I lanplus`), `qmp` (a qemu VM's monitor socket) or `script`
    /// (--power-cycle-command). Default: the one whose settings are given.
    #[arg(long = "power-driver", env = "PERFBISECT_POWER_DRIVER")]
    pub power_driver: Option<String>,
    /// The BMC's address for `--power-driver ipmi`.
    #[arg(long = "bmc-host", env = "PERFBISECT_BMC_HOST")]
    pub bmc_host: Option<String>,
    #[arg(long = "bmc-port", env = "PERFBISECT_BMC_PORT", default_value_t = 623)]
    pub bmc_port: u16,
    #[arg(
        long = "bmc-user",
        env = "PERFBISECT_BMC_USER",
        default_value = "ADMIN"
    )]
    pub bmc_user: String,
    /// A file holding the BMC password (read by ipmitool; never on a command line).
    #[arg(long = "bmc-password-file", env = "PERFBISECT_BMC_PASSWORD_FILE")]
    pub bmc_password_file: Option<PathBuf>,
    /// ipmitool's `-C` cipher suite, for BMCs that refuse its default.
    #[arg(long = "bmc-cipher-suite", env = "PERFBISECT_BMC_CIPHER_SUITE")]
    pub bmc_cipher_suite: Option<u8>,
    /// A qemu VM's QMP socket for `--power-driver qmp`.
    #[arg(long = "qmp-socket", env = "PERFBISECT_QMP_SOCKET")]
    pub qmp_socket: Option<PathBuf>,
    /// How the worker tells a new boot of the test host from the old one.
    #[arg(
        long = "boot-id-command",
        default_value = "cat /proc/sys/kernel/random/boot_id"
    )]
    pub boot_id_command: String,
}

impl WorkerConfig {
    /// The enrollment token, from the environment, the flag or the file.
    pub fn enroll_token(&self) -> anyhow::Result<String> {
        if let Some(t) = &self.enroll_token {
            return Ok(t.trim().to_string());
        }
        if let Some(path) = &self.enroll_token_file {
            let t = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
            return Ok(t.trim().to_string());
        }
        anyhow::bail!(
            "no enrollment token: set PERFBISECT_ENROLL_TOKEN or --enroll-token-file (the server's enroll-token file)"
        )
    }

    pub fn name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "worker".into())
        })
    }

    pub fn build_jobs(&self) -> usize {
        self.build_jobs.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
    }
}

#[cfg(test)]
mod flag_tests {
    use clap::CommandFactory;

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        config: super::WorkerConfig,
    }

    #[test]
    fn the_flags_do_not_collide() {
        Flags::command().debug_assert();
    }
}
