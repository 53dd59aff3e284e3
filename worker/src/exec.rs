//! Running build and benchmark commands: a shell, a timeout, cancellation, captured output.
//! Each command runs in its own process group so a timeout kills everything it started.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

#[derive(Debug)]
pub enum Ending {
    Exited(i32),
    Signalled,
    TimedOut,
    Cancelled,
}

#[derive(Debug)]
pub struct Output {
    pub ending: Ending,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn success(&self) -> bool {
        matches!(self.ending, Ending::Exited(0))
    }

    /// Both streams, for the log.
    pub fn log(&self) -> String {
        let mut s = String::new();
        if !self.stdout.is_empty() {
            s.push_str(&self.stdout);
        }
        if !self.stderr.is_empty() {
            if !s.is_empty() && !s.ends_with('\n') {
                s.push('\n');
            }
            s.push_str(&self.stderr);
        }
        s
    }

    pub fn describe(&self) -> String {
        describe(&self.ending)
    }
}

pub fn describe(ending: &Ending) -> String {
    match ending {
        Ending::Exited(c) => format!("exited with status {c}"),
        Ending::Signalled => "killed by a signal".into(),
        Ending::TimedOut => "timed out".into(),
        Ending::Cancelled => "cancelled".into(),
    }
}

/// A command for `program` whose environment is only what `sanitize::child_env` allows:
/// the worker's own (tokens included) never reaches a job. Every child starts here.
pub fn new_command(program: impl AsRef<std::ffi::OsStr>) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.env_clear().envs(crate::sanitize::child_env());
    cmd
}

/// Runs `command` with `sh -c` in `dir`, with extra environment, until it ends, times out,
/// or `cancel` turns true.
pub async fn shell(
    command: &str,
    dir: &Path,
    env: &[(String, String)],
    timeout: Duration,
    cancel: &mut watch::Receiver<bool>,
) -> std::io::Result<Output> {
    let mut cmd = new_command("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    run(cmd, None, timeout, cancel).await
}

/// Runs `cmd` in its own process group, feeding it `stdin`, until it ends, times out, or
/// `cancel` turns true; then kills the whole group, so nothing it started lingers.
pub async fn run(
    mut cmd: tokio::process::Command,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
    cancel: &mut watch::Receiver<bool>,
) -> std::io::Result<Output> {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0)
    .kill_on_drop(true);
    let mut child = cmd.spawn()?;
    let pgid = child.id().map(|p| nix::unistd::Pid::from_raw(p as i32));
    if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = pipe.write_all(&data).await;
        });
    }
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let read_out = tokio::spawn(async move {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf).await;
        buf
    });
    let read_err = tokio::spawn(async move {
        let mut buf = Vec::new();
        let _ = err.read_to_end(&mut buf).await;
        buf
    });
    let ending = tokio::select! {
        status = child.wait() => {
            let status = status?;
            match status.code() { Some(c) => Ending::Exited(c), None => Ending::Signalled }
        }
        _ = tokio::time::sleep(timeout) => Ending::TimedOut,
        _ = cancelled(cancel) => Ending::Cancelled,
    };
    // Whatever the ending, nothing the command started outlives it (a benchmark's
    // background helpers would disturb the next run).
    if let Some(pgid) = pgid {
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    }
    let _ = child.wait().await;
    let stdout = String::from_utf8_lossy(&read_out.await.unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&read_err.await.unwrap_or_default()).into_owned();
    Ok(Output {
        ending,
        stdout,
        stderr,
    })
}

/// Resolves once `cancel` is true (never, if its sender is gone).
pub async fn cancelled(cancel: &mut watch::Receiver<bool>) {
    loop {
        if *cancel.borrow() {
            return;
        }
        if cancel.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The last `lines` lines of `text`.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
