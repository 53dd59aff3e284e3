//! Secrets given on the command line or in the environment, out of `/proc` before anything
//! runs.
//!
//! `/proc/<pid>/cmdline` is readable by every local user, and `/proc/<pid>/environ` by every
//! process of the same user (jobs often run as that user, or as root, and LKP-style jobs dump
//! their parent's). Removing a variable with `setenv`/`unsetenv` or rewriting `argv` does not
//! change what `/proc` shows of the block the kernel copied at `execve`. So when a secret came
//! through either, the program executes itself again at once without it, handing the values
//! over through a pipe whose descriptor number (not a secret) is in [`FD_VAR`]. The process
//! id stays the same, so supervisors and pid files see one process.
//!
//! What this does not do: a process of the same user can still read the program's files
//! (token files) and, as root, its memory. Files are the place for secrets that must survive
//! a restart; this only keeps them out of the two world- or user-readable views.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;

/// Where the re-executed program finds the pipe that holds its secrets.
pub const FD_VAR: &str = "PERFBISECT_SECRETS_FD";

/// A secret's two spellings: a long flag (`--api-token`, also as `--api-token=VALUE`) and
/// an environment variable (`PERFBISECT_API_TOKEN`).
#[derive(Debug, Clone, Copy)]
pub struct Secret {
    pub flag: &'static str,
    pub var: &'static str,
}

/// Why the secrets could not be moved out of sight.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{FD_VAR} is not a file descriptor: {0:?}")]
    BadDescriptor(OsString),
    #[error("reading the secrets from {FD_VAR}: {0}")]
    Read(std::io::Error),
    #[error("the secrets handed over through {FD_VAR} are not readable: {0}")]
    Decode(serde_json::Error),
    #[error("a secret is too long to hand over through a pipe ({0} bytes)")]
    TooLong(usize),
    #[error("a pipe for the secrets: {0}")]
    Pipe(std::io::Error),
    #[error("keeping the secrets' pipe open across exec: {0}")]
    Fcntl(nix::Error),
    #[error("finding this program's executable: {0}")]
    CurrentExe(std::io::Error),
    #[error("executing this program again without its secrets: {0}")]
    Exec(std::io::Error),
}

/// The secrets' values by flag, as the re-executed program received them.
pub type Values = BTreeMap<String, String>;

/// Call first, with each secret's parsed value (from its flag or its variable, as the
/// argument parser merged them).
///
/// - In a program executed again by this function: returns the values it was handed.
/// - When a secret with a value sits in the arguments or the environment: executes the
///   program again without them and does not return (unless exec fails).
/// - Otherwise (secrets only from files, or none): returns an empty map.
pub fn conceal(secrets: &[(Secret, Option<&str>)]) -> Result<Values, Error> {
    if let Some(fd) = std::env::var_os(FD_VAR) {
        // The variable stays (removing it is unsafe once threads run, and the runtime's
        // do): it holds a number, and the descriptor is closed once read.
        return read_handed_over(&fd);
    }
    let args: Vec<OsString> = std::env::args_os().collect();
    let kept = without_flags(&args, secrets.iter().map(|(s, _)| s.flag));
    let in_env = secrets
        .iter()
        .any(|(s, _)| std::env::var_os(s.var).is_some());
    let values: Values = secrets
        .iter()
        .filter_map(|(s, v)| v.map(|v| (s.flag.to_string(), v.to_string())))
        .collect();
    if (kept.len() == args.len() && !in_env) || values.is_empty() {
        return Ok(Values::new());
    }
    let payload = serde_json::to_vec(&values).expect("a map of strings serialises");
    // What fits a pipe's buffer (64 KiB) is written before the reader exists without blocking.
    if payload.len() >= 60_000 {
        return Err(Error::TooLong(payload.len()));
    }
    let (reader, mut writer) = std::io::pipe().map_err(Error::Pipe)?;
    writer.write_all(&payload).map_err(Error::Pipe)?;
    drop(writer);
    // The read end must survive execve.
    nix::fcntl::fcntl(
        &reader,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )
    .map_err(Error::Fcntl)?;
    let exe = std::env::current_exe().map_err(Error::CurrentExe)?;
    let mut cmd = std::process::Command::new(exe);
    if let Some(arg0) = kept.first() {
        cmd.arg0(arg0);
    }
    cmd.args(kept.iter().skip(1))
        .env(FD_VAR, reader.as_raw_fd().to_string());
    for var in secrets.iter().map(|(s, _)| s.var) {
        cmd.env_remove(var);
    }
    Err(Error::Exec(cmd.exec()))
}

fn read_handed_over(fd: &std::ffi::OsStr) -> Result<Values, Error> {
    let fd: i32 = fd
        .to_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::BadDescriptor(fd.to_owned()))?;
    // SAFETY: the descriptor was made for this process by its previous image (`conceal`),
    // inherited through execve, and nothing else in this process owns it. Dropping the file
    // closes it, so no child inherits it.
    let mut pipe = unsafe { std::fs::File::from_raw_fd(fd) };
    let mut bytes = Vec::new();
    pipe.read_to_end(&mut bytes).map_err(Error::Read)?;
    serde_json::from_slice(&bytes).map_err(Error::Decode)
}

/// `args` without `FLAG VALUE` and `FLAG=VALUE` for each flag.
fn without_flags<'a>(
    args: &[OsString],
    flags: impl Iterator<Item = &'a str> + Clone,
) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut skip_next = false;
    for a in args {
        if skip_next {
            skip_next = false;
            continue;
        }
        let s = a.to_str().unwrap_or_default();
        if flags.clone().any(|f| s == f) {
            skip_next = true;
            continue;
        }
        if flags
            .clone()
            .any(|f| s.strip_prefix(f).is_some_and(|rest| rest.starts_with('=')))
        {
            continue;
        }
        out.push(a.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn secret_flags_are_dropped_in_both_spellings_and_others_kept() {
        let args = os(&[
            "perfbisect",
            "server",
            "--api-token",
            "s3cret",
            "--listen",
            "127.0.0.1:1",
            "--operator-token=op",
            "--api-token-file",
            "/f",
        ]);
        let kept = without_flags(&args, ["--api-token", "--operator-token"].into_iter());
        assert_eq!(
            kept,
            os(&[
                "perfbisect",
                "server",
                "--listen",
                "127.0.0.1:1",
                "--api-token-file",
                "/f"
            ])
        );
    }

    #[test]
    fn handed_over_values_are_read_back_from_their_pipe() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(br#"{"--api-token":"a b"}"#).unwrap();
        drop(writer);
        let fd = std::os::fd::IntoRawFd::into_raw_fd(reader);
        let values = read_handed_over(std::ffi::OsStr::new(&fd.to_string())).unwrap();
        assert_eq!(values.get("--api-token").map(String::as_str), Some("a b"));
        assert!(matches!(
            read_handed_over(std::ffi::OsStr::new("x")),
            Err(Error::BadDescriptor(_))
        ));
    }
}
