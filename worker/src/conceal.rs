//! Keeping the enrollment token out of `/proc/<worker>/environ` and `/proc/<worker>/cmdline`.
//!
//! Jobs often run as root, and any process of the same user can read another's
//! `/proc/<pid>/environ` and `cmdline`; LKP-style jobs dump their parent's. Removing a
//! variable with `setenv`/`unsetenv` does not change `/proc/<pid>/environ` (it shows the
//! block the kernel copied at `execve`), so when the token came through the environment
//! (`PERFBISECT_ENROLL_TOKEN`) or the command line (`--enroll-token`), the worker executes
//! itself again at once without either, handing the token over through a pipe whose
//! descriptor number (not a secret) is in `PERFBISECT_ENROLL_TOKEN_FD`. The process id stays
//! the same, so supervisors and pid files see one process.
//!
//! What this does not do: a job running as the worker's user can still read the worker's
//! files (`<work-dir>/worker-token`, `--enroll-token-file`) and, as root, its memory. Labs
//! whose benchmarks are not trusted run the worker as its own unprivileged user, so a job's
//! root, if it needs one, is the test host's (ssh, qemu), not the worker's.

use anyhow::Context;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;

/// Where the re-executed worker finds the pipe that holds the token.
pub const TOKEN_FD_VAR: &str = "PERFBISECT_ENROLL_TOKEN_FD";
const TOKEN_VAR: &str = "PERFBISECT_ENROLL_TOKEN";
const TOKEN_FLAG: &str = "--enroll-token";

/// `args` without `--enroll-token VALUE` and `--enroll-token=VALUE`.
fn without_token_flag(args: &[OsString]) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut skip_next = false;
    for a in args {
        if skip_next {
            skip_next = false;
            continue;
        }
        if a == TOKEN_FLAG {
            skip_next = true;
            continue;
        }
        if a.to_str()
            .is_some_and(|s| s.starts_with(&format!("{TOKEN_FLAG}=")))
        {
            continue;
        }
        out.push(a.clone());
    }
    out
}

/// Call first in the worker: returns the enrollment token to use when it came through the
/// pipe, and otherwise (the token in the environment or the arguments) executes the
/// worker again without it and does not return. With neither, returns `None`.
pub fn conceal(token: Option<&str>) -> anyhow::Result<Option<String>> {
    if let Some(fd) = std::env::var_os(TOKEN_FD_VAR) {
        let fd: i32 = fd
            .to_str()
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("{TOKEN_FD_VAR} is not a file descriptor"))?;
        // SAFETY: the descriptor was made for this process by its previous image (below),
        // inherited through execve, and nothing else in this process owns it.
        let mut pipe = unsafe { std::fs::File::from_raw_fd(fd) };
        let mut token = String::new();
        pipe.read_to_string(&mut token)
            .with_context(|| format!("reading the enrollment token from {TOKEN_FD_VAR}"))?;
        return Ok(Some(token));
    }
    let args: Vec<OsString> = std::env::args_os().collect();
    let in_env = std::env::var_os(TOKEN_VAR).is_some();
    let in_args = without_token_flag(&args).len() != args.len();
    let Some(token) = token.filter(|_| in_env || in_args) else {
        return Ok(None);
    };
    let (reader, mut writer) = std::io::pipe().context("a pipe for the enrollment token")?;
    // A token fits the pipe's buffer (64 KiB), so writing cannot block with no reader yet.
    anyhow::ensure!(token.len() < 60_000, "the enrollment token is too long");
    writer.write_all(token.as_bytes())?;
    drop(writer);
    // The read end must survive execve.
    nix::fcntl::fcntl(
        &reader,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )
    .context("keeping the token pipe open across exec")?;
    let exe = std::env::current_exe().context("finding the worker's executable")?;
    let kept = without_token_flag(&args);
    let mut cmd = std::process::Command::new(exe);
    if let Some(arg0) = kept.first() {
        cmd.arg0(arg0);
    }
    cmd.args(kept.iter().skip(1))
        .env_remove(TOKEN_VAR)
        .env(TOKEN_FD_VAR, reader.as_raw_fd().to_string());
    let err = cmd.exec();
    Err(anyhow::Error::new(err)
        .context("executing the worker again without its token in the environment"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_flag_is_dropped_in_both_spellings() {
        let args: Vec<OsString> = [
            "perfbisect",
            "worker",
            "--enroll-token",
            "s3cret",
            "--name",
            "w",
            "--enroll-token=s3cret",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let kept = without_token_flag(&args);
        assert_eq!(
            kept,
            ["perfbisect", "worker", "--name", "w"].map(OsString::from)
        );
    }
}
