//! Deploying a build and running the benchmark once: on this machine (`local`), in a VM
//! (`qemu`), or on a bare-metal host over ssh (`ssh`).
//!
//! Every runner answers the same question — what happened to one run — as a [`RunOutcome`]:
//! the benchmark ran (with its exit, its results text, its log and its environment), or the
//! kernel under test did not boot, or the run was cancelled. Problems of the worker or the
//! host itself (a missing qemu, an unreachable host) are a [`DeployError`], which is not the
//! commit's fault.

pub mod local;
pub mod qemu;
pub mod ssh;

use crate::exec::Ending;
use perfbisect_wire::JobSpec;
use perfbisect_wire::worker::RunEnvironment;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The build lacks a file the deploy step needs.
    #[error("the build has no `{0}` (check deploy.kernel / deploy.initrd)")]
    MissingArtifact(String),
    /// This worker is not set up for the job (no ssh target, no rootfs, ...).
    #[error("this worker cannot run the job: {0}")]
    NotConfigured(String),
    /// The test host did not come back, even after a power cycle.
    #[error("the test host is down: {0}")]
    HostDown(String),
}

/// One run to do.
pub struct RunRequest<'a> {
    pub job: &'a JobSpec,
    pub sha: &'a str,
    /// The build's cache entry.
    pub artifacts: &'a Path,
    /// `PERFBISECT_*` variables for the run command.
    pub env: Vec<(String, String)>,
}

#[derive(Debug)]
pub enum RunEnd {
    /// The benchmark ran: its ending, and its results text when it produced one.
    Ran {
        ending: Ending,
        results: Option<String>,
    },
    /// The kernel under test did not boot (or another one did).
    BootFailed(String),
    Cancelled,
}

#[derive(Debug)]
pub struct RunOutcome {
    pub end: RunEnd,
    pub log: String,
    pub environment: RunEnvironment,
    /// How the VM stopped (`qemu` runs only).
    pub vm_end: Option<VmEnd>,
}

/// How a qemu run's VM stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmEnd {
    /// The results' end marker arrived and the worker stopped the VM: the normal end,
    /// whatever the guest would have done next (halt, hang, power off).
    ResultsMarker,
    /// qemu exited by itself before the marker (the guest powered off, rebooted under
    /// `-no-reboot`, wrote to isa-debug-exit, or crashed): its exit status.
    GuestExited(Option<i32>),
    /// The boot or run timeout ran out; the worker stopped the VM.
    TimedOut,
    Cancelled,
}

/// Why the running kernel is not the built one: its release (which carries the commit) or
/// its version (`uname -v`, the build's number and time) differ. None when it is, or when
/// there is nothing to compare.
pub fn wrong_kernel(
    expected_release: Option<&str>,
    expected_version: Option<&str>,
    env: &RunEnvironment,
) -> Option<String> {
    if let (Some(want), Some(got)) = (expected_release, env.kernel_release.as_deref())
        && want != got
    {
        return Some(format!("kernel {got}, not the built {want}"));
    }
    if let (Some(want), Some(got)) = (expected_version, env.kernel_version.as_deref())
        && want != got
    {
        return Some(format!(
            "another build of the kernel ({got}), not the built one ({want})"
        ));
    }
    None
}

/// The artifact at `rel` in the build, which must exist.
pub fn artifact(artifacts: &Path, rel: &str) -> Result<PathBuf, DeployError> {
    let path = artifacts.join(rel);
    if path.is_file() {
        Ok(path)
    } else {
        Err(DeployError::MissingArtifact(rel.to_string()))
    }
}

/// The release the built kernel must report: the kernel recipe's `kernel.release`, or the
/// image's boot header.
pub fn expected_release(artifacts: &Path, kernel: &Path) -> Option<String> {
    std::fs::read_to_string(artifacts.join(perfbisect_wire::job::KERNEL_RELEASE))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| crate::initramfs::image_release(kernel))
}

/// The initramfs pieces of a boot, in order: the job's rootfs image (from the worker's
/// rootfs directory), the build's `deploy.initrd` files, the kernel's modules.
pub fn initrd_pieces(
    req: &RunRequest<'_>,
    rootfs_dir: Option<&Path>,
) -> Result<Vec<PathBuf>, DeployError> {
    let mut pieces = Vec::new();
    if let Some(name) = &req.job.rootfs {
        let dir = rootfs_dir.ok_or_else(|| {
            DeployError::NotConfigured(format!(
                "the job needs rootfs `{name}` and this worker has no --rootfs-dir"
            ))
        })?;
        let path = dir.join(name);
        if !path.is_file() {
            return Err(DeployError::NotConfigured(format!(
                "rootfs `{name}` is not in {}",
                dir.display()
            )));
        }
        pieces.push(path);
    }
    for rel in &req.job.deploy.initrd {
        pieces.push(artifact(req.artifacts, rel)?);
    }
    let modules = req.artifacts.join(perfbisect_wire::job::KERNEL_MODULES);
    if modules.is_file() {
        pieces.push(modules);
    }
    Ok(pieces)
}

/// Concatenates `pieces` (each padded to 4 bytes, as the kernel's unpacker expects) and
/// `extra` into `out`.
pub fn write_initrd(pieces: &[PathBuf], extra: &[u8], out: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(out)?);
    let mut written = 0u64;
    for piece in pieces {
        written += std::io::copy(&mut std::fs::File::open(piece)?, &mut f)?;
        let pad = (4 - written % 4) % 4;
        f.write_all(&[0u8; 3][..pad as usize])?;
        written += pad;
    }
    f.write_all(extra)?;
    f.flush()
}
