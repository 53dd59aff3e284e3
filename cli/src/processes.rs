//! Server and worker child processes for the demo and the end-to-end tests: real processes,
//! stopped with SIGTERM (then SIGKILL) when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Process {
    pub name: String,
    child: Option<Child>,
}

impl Process {
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> std::io::Result<Process> {
        use std::os::unix::process::CommandExt;
        // Should this process die without stopping its children, they stop too (SIGTERM).
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                    .map_err(std::io::Error::from)
            });
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()?;
        Ok(Process {
            name: name.to_string(),
            child: Some(child),
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Kills with SIGKILL, as a crash or power loss would.
    pub fn kill_hard(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then waits up to `grace` before SIGKILL. How the process ended when it
    /// stopped by itself; `None` when it had to be killed (or was not running).
    pub fn stop(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        let pid = nix::unistd::Pid::from_raw(c.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = c.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let _ = c.wait();
        None
    }

    /// How the process ended, once it has (`None` while it runs).
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    pub fn has_exited(&mut self) -> bool {
        match &mut self.child {
            Some(c) => matches!(c.try_wait(), Ok(Some(_))),
            None => true,
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(20));
    }
}

pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
