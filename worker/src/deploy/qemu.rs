//! `deploy.kind: qemu`: boot the built kernel in a VM whose initramfs runs the benchmark.
//!
//! The initramfs is the job's pieces (rootfs, `deploy.initrd`, modules) with the job
//! appended: `/init` and `/perfbisect/{bench,env,run}` (see `guest`). The first serial port
//! is the console (kept as the run's log), the second the results channel, read as qemu's
//! standard output. The boot timeout runs until the guest says it booted, then the run
//! timeout. The run ends when the results' end marker arrives: the worker stops qemu then,
//! whatever the guest does next (a kernel without ACPI only halts on `poweroff`, and
//! `-no-reboot` keeps such a VM alive forever). The guest's own exits (isa-debug-exit,
//! poweroff, reboot) end runs whose marker never comes. The kernel's release and version
//! (`uname -v`) reported by the guest must be those of the built image.

use super::{DeployError, RunEnd, RunOutcome, RunRequest, VmEnd};
use crate::config::QemuConfig;
use crate::exec::{self, Ending};
use crate::guest;
use crate::initramfs::CpioWriter;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tokio::time::Instant;

/// The job's overlay: init, bench script, environment, run command.
pub fn job_overlay(req: &RunRequest<'_>) -> std::io::Result<Vec<u8>> {
    let mut w = CpioWriter::new(Vec::new());
    for d in ["dev", "proc", "sys", "tmp", "perfbisect"] {
        w.dir(d)?;
    }
    w.file("init", 0o755, guest::INIT_SH.as_bytes())?;
    w.file("perfbisect/bench", 0o755, guest::BENCH_SH.as_bytes())?;
    w.file(
        "perfbisect/env",
        0o644,
        guest::env_file(&req.env, req.job).as_bytes(),
    )?;
    w.file(
        "perfbisect/run",
        0o755,
        format!("{}\n", req.job.run.command).as_bytes(),
    )?;
    w.finish()
}

pub async fn run(
    req: &RunRequest<'_>,
    qemu: &QemuConfig,
    rootfs_dir: Option<&Path>,
    scratch: &Path,
    cancel: &mut watch::Receiver<bool>,
) -> Result<RunOutcome, DeployError> {
    let job = req.job;
    let kernel_rel = job
        .deploy
        .kernel_path(&job.build)
        .expect("validated: a qemu job has a kernel");
    let kernel = super::artifact(req.artifacts, kernel_rel)?;
    let expected = super::expected_release(req.artifacts, &kernel);
    let expected_version = crate::initramfs::image_version(&kernel);
    let pieces = super::initrd_pieces(req, rootfs_dir)?;
    std::fs::create_dir_all(scratch)?;
    let initrd = scratch.join("initrd.cpio");
    super::write_initrd(&pieces, &job_overlay(req)?, &initrd)?;
    let console = scratch.join("console.log");
    let _ = std::fs::remove_file(&console);

    let mut cmdline = format!(
        "console=ttyS0 panic=-1 quiet perfbisect.hostname={}",
        guest_name()
    );
    if let Some(extra) = &job.deploy.cmdline {
        cmdline.push(' ');
        cmdline.push_str(extra);
    }
    let mut cmd = exec::new_command(&qemu.binary);
    cmd.args(["-accel", &qemu.accel])
        .args(["-m", &job.deploy.memory_mb.unwrap_or(512).to_string()])
        .args(["-smp", &job.deploy.cpus.unwrap_or(1).to_string()])
        .args(["-display", "none", "-monitor", "none", "-no-reboot"])
        .args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"])
        .arg("-serial")
        .arg(format!("file:{}", console.display()))
        .args(["-serial", "stdio"])
        .arg("-kernel")
        .arg(&kernel)
        .arg("-initrd")
        .arg(&initrd)
        .args(["-append", &cmdline])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| DeployError::NotConfigured(format!("cannot start {}: {e}", qemu.binary)))?;
    let pgid = child.id().map(|p| nix::unistd::Pid::from_raw(p as i32));
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let read_err = tokio::spawn(async move {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf).await;
        buf
    });

    // Read the results channel as it comes: the boot deadline gives way to the run
    // deadline when the guest says it booted.
    let started = Instant::now();
    let mut deadline = started + Duration::from_secs(job.timeouts.boot_secs);
    let mut channel = Vec::new();
    let mut booted = false;
    let mut chunk = [0u8; 8192];
    let mut eof = false;
    let (ending, vm_end) = loop {
        tokio::select! {
            n = stdout.read(&mut chunk), if !eof => match n {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => {
                    channel.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&channel);
                    if !booted && text.contains(guest::BOOTED) {
                        booted = true;
                        deadline = Instant::now() + Duration::from_secs(job.timeouts.run_secs);
                    }
                    if guest::finished(&text) {
                        // The exit status is the benchmark's, read from the report.
                        break (Ending::Exited(0), VmEnd::ResultsMarker);
                    }
                }
            },
            status = child.wait(), if eof => {
                let code = status?.code();
                break (code.map_or(Ending::Signalled, Ending::Exited), VmEnd::GuestExited(code));
            }
            _ = tokio::time::sleep_until(deadline) => break (Ending::TimedOut, VmEnd::TimedOut),
            _ = exec::cancelled(cancel) => break (Ending::Cancelled, VmEnd::Cancelled),
        }
    };
    if let Some(pgid) = pgid {
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    }
    let _ = child.wait().await;
    let qemu_err = String::from_utf8_lossy(&read_err.await.unwrap_or_default()).into_owned();
    let console_text = std::fs::read_to_string(&console).unwrap_or_default();
    let mut log = console_text.replace('\r', "");
    if !qemu_err.trim().is_empty() {
        log.push_str("\n--- qemu ---\n");
        log.push_str(&qemu_err);
    }
    let report = guest::parse(&String::from_utf8_lossy(&channel));
    let mut environment = report.environment.clone();
    environment.boot_method = Some("qemu".into());
    environment.host.get_or_insert_with(guest_name);
    // Every run boots a VM of its own: each is the first run after a deployment.
    environment.runs_since_deploy = Some(0);

    let end = match ending {
        Ending::Cancelled => RunEnd::Cancelled,
        _ if !report.booted => RunEnd::BootFailed(match ending {
            Ending::TimedOut => format!(
                "the kernel did not start the job within {} s",
                job.timeouts.boot_secs
            ),
            // isa-debug-exit makes qemu exit with (value << 1) | 1.
            Ending::Exited(c) if c != 0 && c != 3 => {
                format!("qemu exited with status {c} before the job started")
            }
            _ => "the VM stopped before the job started (kernel panic?)".into(),
        }),
        _ => match super::wrong_kernel(
            expected.as_deref(),
            expected_version.as_deref(),
            &environment,
        ) {
            Some(why) => RunEnd::BootFailed(format!("the VM runs {why}")),
            None => RunEnd::Ran {
                ending: match (ending, report.exit) {
                    (Ending::TimedOut, _) => Ending::TimedOut,
                    (_, Some(code)) => Ending::Exited(code),
                    // The VM went away mid-run: a crash of the kernel under test.
                    (_, None) => Ending::Signalled,
                },
                results: report.results.filter(|_| report.exit == Some(0)),
            },
        },
    };
    if let RunEnd::Ran {
        ending: Ending::Signalled,
        ..
    } = &end
    {
        log.push_str("\nperfbisect: the VM stopped before the benchmark finished\n");
    }
    match vm_end {
        VmEnd::ResultsMarker => {
            log.push_str("\nperfbisect: results received; the VM was stopped\n")
        }
        VmEnd::GuestExited(code) => log.push_str(&format!(
            "\nperfbisect: the VM exited by itself (status {})\n",
            code.map_or("killed".to_string(), |c| c.to_string())
        )),
        _ => {}
    }
    Ok(RunOutcome {
        end,
        log,
        environment,
        vm_end: Some(vm_end),
    })
}

/// The guest's hostname: this machine's, marked as a VM.
fn guest_name() -> String {
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "worker".into());
    let clean: String = host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
        .take(50)
        .collect();
    format!("{clean}-vm")
}
