//! `deploy.kind: local`: the benchmark runs on this machine, in the build's directory.

use super::{DeployError, RunEnd, RunOutcome, RunRequest};
use crate::exec::{self, Ending};
use perfbisect_wire::worker::RunEnvironment;
use std::time::Duration;
use tokio::sync::watch;

pub async fn run(
    req: &RunRequest<'_>,
    host: &str,
    cancel: &mut watch::Receiver<bool>,
) -> Result<RunOutcome, DeployError> {
    let job = req.job;
    let out = exec::shell(
        &job.run.command,
        req.artifacts,
        &req.env,
        Duration::from_secs(job.timeouts.run_secs),
        cancel,
    )
    .await?;
    let mut log = out.log();
    let end = match out.ending {
        Ending::Cancelled => RunEnd::Cancelled,
        ending => {
            let results = match (&ending, &job.run.results_file) {
                (Ending::Exited(0), Some(f)) => {
                    match std::fs::read_to_string(req.artifacts.join(f)) {
                        Ok(text) => Some(text),
                        Err(e) => {
                            log.push_str(&format!(
                                "\nperfbisect: cannot read results file {f}: {e}\n"
                            ));
                            None
                        }
                    }
                }
                (Ending::Exited(0), None) => Some(out.stdout.clone()),
                _ => None,
            };
            RunEnd::Ran { ending, results }
        }
    };
    Ok(RunOutcome {
        end,
        log,
        environment: this_machine(host),
        vm_end: None,
    })
}

/// The environment of the machine the worker runs on.
pub fn this_machine(host: &str) -> RunEnvironment {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let microcode = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|c| {
        c.lines()
            .find(|l| l.starts_with("microcode"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    });
    RunEnvironment {
        host: Some(host.to_string()),
        kernel_release: nix::sys::utsname::uname()
            .ok()
            .map(|u| u.release().to_string_lossy().into_owned()),
        kernel_cmdline: read("/proc/cmdline"),
        cpu_governor: read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        microcode,
        boot_method: Some("none".into()),
        kernel_version: nix::sys::utsname::uname()
            .ok()
            .map(|u| u.version().to_string_lossy().into_owned()),
        machine: Some(crate::machine::describe()),
        // Nothing is deployed: the server counts the task's runs of the commit instead.
        runs_since_deploy: None,
    }
}
