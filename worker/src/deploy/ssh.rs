//! `deploy.kind: ssh`: a bare-metal test host, reached with the system's OpenSSH client.
//!
//! To run a commit, the host must be running its kernel: the kernel and initramfs are
//! copied over, booted once (kexec on the host, or the worker's `--boot-command` hook for a
//! boot-once entry plus reboot; `--boot-fallback-command` is that hook used only when the
//! host refuses to load the kernel with kexec), and the worker waits until the host answers
//! with a new boot id; if it does not within the boot timeout, the host is power-cycled
//! through the configured driver (`crate::power`: IPMI, QMP, a script) and the worker waits
//! once more.
//! Then `uname -r` and `uname -v` must be the built kernel's release (which carries the
//! commit) and version — a host that came back on another kernel did not boot the commit.
//! The benchmark runs in its own process group on the host, which is killed on timeout or
//! cancellation; a host that stops answering during a run is power-cycled at once, so the
//! next run finds it up. The worker keeps only which commit the host is running; the
//! task's state is on the server, so a reboot of the worker's own machine loses nothing.

use super::{DeployError, RunEnd, RunOutcome, RunRequest};
use crate::config::SshConfig;
use crate::exec::{self, Ending};
use crate::guest;
use crate::power::{PowerAction, PowerDriver};
use std::path::Path;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// How long one ssh connection attempt may take while waiting for the host.
const CONNECT_SECS: u64 = 5;
/// Short remote commands (mkdir, uname, boot id, copies of small files).
const COMMAND_SECS: u64 = 60;

/// What `SshHost::prepare` leaves: the host runs the commit's kernel, or the run ended
/// already (cancelled, or the commit's kernel did not boot).
pub enum Prepared {
    Ready(Booted),
    Ended(Box<RunOutcome>),
}

/// The boot's part of the run's log and environment.
pub struct Booted {
    log: String,
    method: String,
}

/// Where the command line a kexec adds to the host's own starts: `perfbisect.boot=` and
/// the commit (a dotted parameter, which the kernel leaves to a module that does not exist).
const BOOT_MARK: &str = "perfbisect.boot=";

/// The `kexec -l` of a commit's kernel: the command line the host booted with, then
/// `perfbisect.boot=<commit>` and the job's `deploy.cmdline`. A host already running a
/// kernel kexec'd by perfbisect keeps only its own part (what comes before the mark), so
/// one kexec after another does not pile the job's options up.
pub fn kexec_load(kernel: &str, initrd: Option<&str>, cmdline: &str, sha: &str) -> String {
    let initrd_arg = initrd
        .map(|i| format!(" --initrd={}", guest::quote(i)))
        .unwrap_or_default();
    let short: String = sha.chars().take(12).collect();
    let added = format!("{BOOT_MARK}{short} {cmdline}");
    format!(
        "kexec -l {}{initrd_arg} --command-line=\"$(sed 's/ *{mark}.*//' /proc/cmdline) \"{}",
        guest::quote(kernel),
        guest::quote(added.trim_end()),
        mark = BOOT_MARK.replace('.', "\\."),
    )
}

/// The test host, and which commit it is running.
pub struct SshHost {
    cfg: SshConfig,
    target: String,
    booted_sha: Option<String>,
    /// `uname -r` of the verified boot of `booted_sha`.
    booted_release: Option<String>,
    /// Runs since the boot of `booted_sha` (the runs' `runs_since_deploy`).
    runs_since_boot: u32,
    power: Option<Box<dyn PowerDriver>>,
    /// The last power action and when, for the host's state.
    pub last_power_action: Option<String>,
}

impl SshHost {
    pub fn new(cfg: &SshConfig) -> Result<Self, DeployError> {
        let target = cfg.target.clone().ok_or_else(|| {
            DeployError::NotConfigured("a `deploy.kind: ssh` job needs --ssh-target".into())
        })?;
        let power = crate::power::from_config(cfg)
            .map_err(|e| DeployError::NotConfigured(e.to_string()))?;
        Ok(Self {
            cfg: cfg.clone(),
            target,
            booted_sha: None,
            booted_release: None,
            runs_since_boot: 0,
            power,
            last_power_action: None,
        })
    }

    /// Forgets which commit the host runs, so that the next run boots its commit again even
    /// when the host already runs it: a deployment of its own (`TaskAssignment::fresh_deploy`).
    pub fn redeploy(&mut self) {
        self.booted_sha = None;
    }

    /// Whether a run of `sha` needs a boot first (the host is not running its kernel).
    pub fn needs_boot(&self, sha: &str) -> bool {
        self.booted_sha.as_deref() != Some(sha)
    }

    /// Power-cycles the host through the configured driver and waits for a boot other than
    /// `old` (None: any answer). Ok(true) when it came back.
    async fn power_cycle(
        &mut self,
        old: Option<&str>,
        limit: Duration,
        log: &mut String,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<bool, DeployError> {
        let Some(driver) = &self.power else {
            return Err(DeployError::HostDown(format!(
                "{} does not answer and no power driver is configured \
                 (--power-driver, --bmc-host, --qmp-socket or --power-cycle-command)",
                self.target
            )));
        };
        log.push_str(&format!(
            "\nperfbisect: power-cycling {} through {}\n",
            self.target,
            driver.name()
        ));
        let answer = driver.act(PowerAction::Cycle).await.map_err(|e| {
            DeployError::HostDown(format!("{} could not be power-cycled: {e}", self.target))
        })?;
        if !answer.is_empty() {
            log.push_str(&answer);
            log.push('\n');
        }
        self.last_power_action = Some(format!("cycle ({})", driver.name()));
        self.booted_sha = None;
        self.booted_release = None;
        self.wait_for_new_boot(old.unwrap_or(""), limit, cancel)
            .await
    }

    /// After a run that ended without a report: if the host no longer answers, it hung or
    /// crashed; power-cycle it so the next run finds it up. Ok(true) when it was cycled;
    /// an error only when it stays down.
    async fn recover(
        &mut self,
        limit: Duration,
        log: &mut String,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<bool, DeployError> {
        if self.boot_id().await.is_some() {
            return Ok(false);
        }
        log.push_str(&format!(
            "\nperfbisect: {} stopped answering during the run\n",
            self.target
        ));
        if !self.power_cycle(None, limit, log, cancel).await? && !*cancel.borrow() {
            return Err(DeployError::HostDown(format!(
                "{} did not come back after a power cycle",
                self.target
            )));
        }
        Ok(true)
    }

    fn ssh(&self, remote: &str) -> tokio::process::Command {
        let mut cmd = exec::new_command("ssh");
        cmd.args(["-p", &self.cfg.port.to_string()])
            .args(["-o", "BatchMode=yes"])
            .args(["-o", &format!("ConnectTimeout={CONNECT_SECS}")])
            .args(["-o", "ServerAliveInterval=15"]);
        if let Some(id) = &self.cfg.identity {
            cmd.arg("-i").arg(id);
        }
        for o in &self.cfg.options {
            cmd.args(["-o", o]);
        }
        cmd.arg(&self.target).arg(remote);
        cmd
    }

    /// Runs `remote` on the host; Ok(output) when ssh itself worked.
    async fn exec(
        &self,
        remote: &str,
        stdin: Option<Vec<u8>>,
        timeout: Duration,
        cancel: &mut watch::Receiver<bool>,
    ) -> std::io::Result<exec::Output> {
        exec::run(self.ssh(remote), stdin, timeout, cancel).await
    }

    /// Runs a short command that must succeed; its stdout.
    async fn must(&self, remote: &str, stdin: Option<Vec<u8>>) -> Result<String, DeployError> {
        let (_tx, mut never) = watch::channel(false);
        let out = self
            .exec(remote, stdin, Duration::from_secs(COMMAND_SECS), &mut never)
            .await?;
        if out.success() {
            Ok(out.stdout)
        } else {
            Err(DeployError::HostDown(format!(
                "`{remote}` on {} {}: {}",
                self.target,
                out.describe(),
                exec::tail(&out.stderr, 5)
            )))
        }
    }

    async fn copy(&self, local: &Path, remote: &str) -> Result<(), DeployError> {
        let data = std::fs::read(local)?;
        self.must(&format!("cat > {}", guest::quote(remote)), Some(data))
            .await
            .map(|_| ())
    }

    /// The host's boot id, if it answers.
    async fn boot_id(&self) -> Option<String> {
        let (_tx, mut never) = watch::channel(false);
        let out = self
            .exec(
                &self.cfg.boot_id_command,
                None,
                Duration::from_secs(CONNECT_SECS * 3),
                &mut never,
            )
            .await
            .ok()?;
        let id = out.stdout.trim().to_string();
        (out.success() && !id.is_empty()).then_some(id)
    }

    /// Waits until the host answers with a boot id other than `old`.
    async fn wait_for_new_boot(
        &self,
        old: &str,
        limit: Duration,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<bool, DeployError> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if *cancel.borrow() {
                return Ok(false);
            }
            if let Some(id) = self.boot_id().await
                && id != old
            {
                return Ok(true);
            }
            // Polling an outside machine: it gives no signal when it is back.
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = exec::cancelled(cancel) => return Ok(false),
            }
        }
        Ok(false)
    }

    /// Boots the commit's kernel on the host. Ok(None) when booted; Ok(Some(reason)) when
    /// the commit's kernel did not boot; Err when the host or the worker failed.
    async fn boot(
        &mut self,
        req: &RunRequest<'_>,
        rootfs_dir: Option<&Path>,
        scratch: &Path,
        log: &mut String,
        method: &mut String,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<Option<String>, DeployError> {
        let job = req.job;
        self.booted_sha = None;
        self.booted_release = None;
        // The hooks run here.
        std::fs::create_dir_all(scratch)?;
        let kernel = super::artifact(
            req.artifacts,
            job.deploy
                .kernel_path(&job.build)
                .expect("validated: an ssh job has a kernel"),
        )?;
        let expected = super::expected_release(req.artifacts, &kernel);
        let pieces = super::initrd_pieces(req, rootfs_dir)?;
        let dir = format!("{}/boot", self.cfg.remote_dir);
        self.must(&format!("mkdir -p {}", guest::quote(&dir)), None)
            .await?;
        let remote_kernel = format!("{dir}/vmlinuz");
        self.copy(&kernel, &remote_kernel).await?;
        let remote_initrd = if pieces.is_empty() {
            None
        } else {
            let local = scratch.join("initrd.cpio");
            super::write_initrd(&pieces, &[], &local)?;
            let remote = format!("{dir}/initrd");
            self.copy(&local, &remote).await?;
            Some(remote)
        };
        let old = self.boot_id().await.ok_or_else(|| {
            DeployError::HostDown(format!("{} does not answer before the boot", self.target))
        })?;
        let cmdline = job.deploy.cmdline.clone().unwrap_or_default();
        let limit = Duration::from_secs(job.timeouts.boot_secs);
        let env = vec![
            ("PERFBISECT_SSH_TARGET".to_string(), self.target.clone()),
            ("PERFBISECT_KERNEL".to_string(), remote_kernel.clone()),
            (
                "PERFBISECT_INITRD".to_string(),
                remote_initrd.clone().unwrap_or_default(),
            ),
            ("PERFBISECT_CMDLINE".to_string(), cmdline.clone()),
            (
                "PERFBISECT_KERNEL_RELEASE".to_string(),
                expected.clone().unwrap_or_default(),
            ),
        ];
        match &self.cfg.boot_command {
            Some(hook) => {
                *method = "command".into();
                if !self
                    .boot_hook(hook, &env, scratch, limit, log, cancel)
                    .await?
                {
                    return Ok(None);
                }
            }
            None => {
                *method = "kexec".into();
                // Load first (errors are seen), then execute: systemd hosts shut down in
                // order (`systemctl kexec` returns at once), others jump straight into the
                // new kernel, and the session never returns: its end is not an answer.
                let load = kexec_load(&remote_kernel, remote_initrd.as_deref(), &cmdline, req.sha);
                match (
                    self.must(&load, None).await,
                    &self.cfg.boot_fallback_command,
                ) {
                    (Ok(_), _) => self.kexec_jump().await?,
                    // The host answers but cannot kexec: the boot-once fallback.
                    (Err(e), Some(hook)) => {
                        log.push_str(&format!(
                            "\nperfbisect: kexec cannot load the kernel ({e}); booting it with \
                             the fallback command\n"
                        ));
                        *method = "command (kexec failed)".into();
                        if !self
                            .boot_hook(hook, &env, scratch, limit, log, cancel)
                            .await?
                        {
                            return Ok(None);
                        }
                    }
                    (Err(e), None) => return Err(e),
                }
            }
        }
        let mut back = self.wait_for_new_boot(&old, limit, cancel).await?;
        if !back && !*cancel.borrow() {
            if self.power.is_none() {
                return Err(DeployError::HostDown(format!(
                    "{} did not come back within {} s and no power driver is configured \
                     (--power-driver, --bmc-host, --qmp-socket or --power-cycle-command)",
                    self.target, job.timeouts.boot_secs
                )));
            }
            log.push_str(&format!(
                "\nperfbisect: {} did not come back within {} s\n",
                self.target, job.timeouts.boot_secs
            ));
            *method = "power_cycle".into();
            back = self.power_cycle(Some(&old), limit, log, cancel).await?;
            if !back && !*cancel.borrow() {
                return Err(DeployError::HostDown(format!(
                    "{} did not come back after a power cycle",
                    self.target
                )));
            }
        }
        if *cancel.borrow() {
            return Ok(None);
        }
        let uname = self.must("uname -r; uname -v", None).await?;
        let mut lines = uname.lines().map(|l| l.trim().to_string());
        let running = perfbisect_wire::worker::RunEnvironment {
            kernel_release: lines.next(),
            kernel_version: lines.next(),
            ..Default::default()
        };
        let expected_version = crate::initramfs::image_version(&kernel);
        if let Some(why) =
            super::wrong_kernel(expected.as_deref(), expected_version.as_deref(), &running)
        {
            return Ok(Some(format!("{} came back running {why}", self.target)));
        }
        self.booted_sha = Some(req.sha.to_string());
        self.booted_release = running.kernel_release;
        self.runs_since_boot = 0;
        Ok(None)
    }

    /// One run: the boot when the host is not running the commit's kernel, then the job.
    pub async fn run(
        &mut self,
        req: &RunRequest<'_>,
        rootfs_dir: Option<&Path>,
        scratch: &Path,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<RunOutcome, DeployError> {
        match self.prepare(req, rootfs_dir, scratch, cancel).await? {
            Prepared::Ended(outcome) => Ok(*outcome),
            Prepared::Ready(boot) => self.run_job(req, boot, cancel).await,
        }
    }

    /// The kernel release the host is running, once a boot of the commit was verified.
    pub fn running_kernel(&self) -> Option<&str> {
        self.booted_release.as_deref()
    }

    /// Makes the host run the commit's kernel (a boot unless it already does). The worker
    /// reports the host `booting` before this and `running` after it, so the inventory says
    /// which of the two a slow step is.
    pub async fn prepare(
        &mut self,
        req: &RunRequest<'_>,
        rootfs_dir: Option<&Path>,
        scratch: &Path,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<Prepared, DeployError> {
        let mut log = String::new();
        let mut method = "none".to_string();
        if self.booted_sha.as_deref() != Some(req.sha) {
            let failed = self
                .boot(req, rootfs_dir, scratch, &mut log, &mut method, cancel)
                .await?;
            if *cancel.borrow() {
                return Ok(Prepared::Ended(Box::new(RunOutcome {
                    end: RunEnd::Cancelled,
                    log,
                    environment: Default::default(),
                    vm_end: None,
                })));
            }
            if let Some(reason) = failed {
                return Ok(Prepared::Ended(Box::new(RunOutcome {
                    end: RunEnd::BootFailed(reason),
                    log,
                    environment: Default::default(),
                    vm_end: None,
                })));
            }
        } else {
            method = "none (already running)".into();
        }
        Ok(Prepared::Ready(Booted { log, method }))
    }

    /// Runs a boot hook (`--boot-command` or its kexec fallback) on the worker. Ok(false)
    /// when cancelled.
    async fn boot_hook(
        &self,
        hook: &str,
        env: &[(String, String)],
        scratch: &Path,
        limit: Duration,
        log: &mut String,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<bool, DeployError> {
        let out = exec::shell(hook, scratch, env, limit, cancel).await?;
        log.push_str(&out.log());
        match out.ending {
            Ending::Cancelled => Ok(false),
            Ending::Exited(0) => Ok(true),
            _ => Err(DeployError::HostDown(format!(
                "the boot command {}",
                out.describe()
            ))),
        }
    }

    /// Jumps into the kernel `kexec -l` loaded.
    async fn kexec_jump(&self) -> Result<(), DeployError> {
        let (_tx, mut never) = watch::channel(false);
        let jump = self
            .exec(
                "if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; \
                 then systemctl kexec; else sync; kexec -e; fi",
                None,
                Duration::from_secs(CONNECT_SECS * 2),
                &mut never,
            )
            .await;
        if let Ok(out) = jump
            && matches!(out.ending, Ending::Exited(c) if c != 0 && c != 255)
        {
            return Err(DeployError::HostDown(format!(
                "kexec on {} {}: {}",
                self.target,
                out.describe(),
                exec::tail(&out.stderr, 5)
            )));
        }
        Ok(())
    }

    /// Writes the job's files into a fresh `dir` on the host.
    async fn stage_job(&self, req: &RunRequest<'_>, dir: &str) -> Result<(), DeployError> {
        let q = guest::quote(dir);
        self.must(&format!("rm -rf {q} && mkdir -p {q}"), None)
            .await?;
        for (name, text) in [
            ("bench", guest::BENCH_SH.to_string()),
            ("env", guest::env_file(&req.env, req.job)),
            ("run", format!("{}\n", req.job.run.command)),
        ] {
            self.must(
                &format!("cat > {}", guest::quote(&format!("{dir}/{name}"))),
                Some(text.into_bytes()),
            )
            .await?;
        }
        Ok(())
    }

    /// Runs the job on a host that `prepare` left running the commit's kernel.
    pub async fn run_job(
        &mut self,
        req: &RunRequest<'_>,
        boot: Booted,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<RunOutcome, DeployError> {
        let job = req.job;
        let Booted {
            mut log,
            mut method,
        } = boot;
        let dir = format!("{}/job", self.cfg.remote_dir);
        let q = guest::quote(&dir);
        if let Err(e) = self.stage_job(req, &dir).await {
            // The host stopped answering between its boot and the run (hung, crashed): the
            // run is lost, but the host is brought back for the next one, as after a run.
            if !matches!(e, DeployError::HostDown(_))
                || !self
                    .recover(
                        Duration::from_secs(job.timeouts.boot_secs),
                        &mut log,
                        cancel,
                    )
                    .await?
            {
                return Err(e);
            }
            log.push_str(&format!("\nperfbisect: the run did not start: {e}\n"));
            let environment = perfbisect_wire::worker::RunEnvironment {
                boot_method: Some(format!("{method}; power_cycle before the run")),
                host: Some(self.target.clone()),
                ..Default::default()
            };
            return Ok(RunOutcome {
                end: RunEnd::Ran {
                    ending: Ending::Signalled,
                    results: None,
                },
                log,
                environment,
                vm_end: None,
            });
        }
        // sshd makes the remote shell a session (and process group) leader: its pid names
        // the group to kill.
        let out = self
            .exec(
                &format!("echo $$ > {q}/pid; exec sh {q}/bench {q}"),
                None,
                Duration::from_secs(job.timeouts.run_secs),
                cancel,
            )
            .await?;
        if matches!(out.ending, Ending::TimedOut | Ending::Cancelled) {
            let _ = self
                .must(
                    &format!("kill -KILL -- -$(cat {q}/pid) 2>/dev/null; true"),
                    None,
                )
                .await;
        }
        let report_missing = guest::parse(&out.stdout).exit.is_none();
        if report_missing && !matches!(out.ending, Ending::Cancelled) {
            // A hung or crashed host: bring it back now (the run is lost either way).
            if self
                .recover(
                    Duration::from_secs(job.timeouts.boot_secs),
                    &mut log,
                    cancel,
                )
                .await?
            {
                method = format!("{method}; power_cycle after the run");
            }
        }
        log.push_str(&out.stderr);
        let report = guest::parse(&out.stdout);
        let mut environment = report.environment.clone();
        environment.boot_method = Some(method);
        environment.host.get_or_insert_with(|| self.target.clone());
        environment.runs_since_deploy = Some(self.runs_since_boot);
        self.runs_since_boot += 1;
        let end = match out.ending {
            Ending::Cancelled => RunEnd::Cancelled,
            Ending::TimedOut => RunEnd::Ran {
                ending: Ending::TimedOut,
                results: None,
            },
            // ssh's own failure (255) with no report: the host went away mid-run.
            _ if report.exit.is_none() => {
                log.push_str(&format!(
                    "\nperfbisect: the run ended without a report (ssh {})\n",
                    out.describe()
                ));
                self.booted_sha = None;
                self.booted_release = None;
                RunEnd::Ran {
                    ending: Ending::Signalled,
                    results: None,
                }
            }
            _ => RunEnd::Ran {
                ending: Ending::Exited(report.exit.unwrap_or(-1)),
                results: report.results.filter(|_| report.exit == Some(0)),
            },
        };
        Ok(RunOutcome {
            end,
            log,
            environment,
            vm_end: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the load command's command-line part in sh, with `proc` as /proc/cmdline.
    fn command_line(proc: &str, cmdline: &str, sha: &str) -> String {
        let load = kexec_load("/k", Some("/i"), cmdline, sha);
        let arg = load
            .split_once("--command-line=")
            .expect("a command line")
            .1
            .replace("/proc/cmdline", "\"$PROC\"");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cmdline");
        std::fs::write(&file, format!("{proc}\n")).unwrap();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s' {arg}"))
            .env("PROC", &file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{load}");
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn a_kexec_from_a_kexecd_kernel_keeps_the_host_s_command_line_once() {
        let host = "BOOT_IMAGE=/vmlinuz root=/dev/sda2 ro console=ttyS0";
        let first = command_line(host, "mitigations=off quiet", "0123456789abcdef");
        assert_eq!(
            first,
            format!("{host} perfbisect.boot=0123456789ab mitigations=off quiet")
        );
        // From the kernel that booted: the host's part again, the next commit's mark.
        let second = command_line(&first, "mitigations=off quiet", "fedcba9876543210");
        assert_eq!(
            second,
            format!("{host} perfbisect.boot=fedcba987654 mitigations=off quiet")
        );
        assert_eq!(
            command_line(&second, "", "fedcba9876543210"),
            format!("{host} perfbisect.boot=fedcba987654")
        );
        assert!(kexec_load("/k", None, "", "ab").starts_with("kexec -l '/k' --command-line="));
    }
}
