//! One task: build each commit it measures (through the cache), deploy and run the
//! benchmark the task's number of times (alternating commits for a paired task), parse and
//! upload every run, complete. Runs already stored by an earlier holder are skipped.

use crate::agent::Worker;
use crate::build::{Attempt, Built};
use crate::client::{ClientError, retry};
use crate::deploy::ssh::Prepared;
use crate::deploy::{self, RunEnd, RunOutcome, RunRequest};
use crate::exec::{self, Ending};
use crate::note::CurrentTask;
use anyhow::Context;
use chrono::Utc;
use perfbisect_metrics::Format;
use perfbisect_wire::DeployKind;
use perfbisect_wire::hosts::{HostActivity, HostOutcome, HostStateReport};
use perfbisect_wire::worker::{BuildReport, CompleteTask, RunUpload, TaskAssignment, TaskOutcome};
use std::collections::HashSet;
use tokio::sync::watch;

/// Where shutdown stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    Running,
    /// Finish the current run, then hand the task back.
    AfterThisRun,
    /// Stop the current run too.
    Now,
}

/// How a task ended on this worker.
#[derive(Debug)]
pub enum Finish {
    /// The server knows the outcome (completed, build failed, or the task was taken away).
    Reported,
    /// The server cancelled it (the bisect ended): nothing to report.
    Cancelled,
    /// Shutting down: give the rest back.
    HandBack(String),
}

fn env_for(task: &TaskAssignment, sha: &str, iteration: Option<u32>) -> Vec<(String, String)> {
    let mut env = vec![
        ("PERFBISECT_TESTCASE".to_string(), task.job.testcase.clone()),
        ("PERFBISECT_COMMIT".to_string(), sha.to_string()),
    ];
    for (k, v) in &task.job.params {
        let value = match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        env.push((
            format!("PERFBISECT_PARAM_{}", k.to_ascii_uppercase()),
            value,
        ));
    }
    if let Some(i) = iteration {
        env.push(("PERFBISECT_RUN".to_string(), i.to_string()));
    }
    env
}

/// How much of a build log is uploaded: its end, where the errors are.
const BUILD_LOG_UPLOAD_BYTES: usize = 256 << 10;

/// The last `max` bytes of `s`, cut at a character boundary.
fn tail_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// A 409 from the server: the task is no longer this host's.
fn taken_away(e: &ClientError) -> bool {
    matches!(e, ClientError::Refused { status, .. } if status.as_u16() == 409)
}

/// The first 12 characters of a commit id (all of it when shorter).
pub fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// Most iterations a task may ask for: more is a server bug, not work to start.
const MAX_ITERATIONS: u32 = 10_000;

/// Checks what the server handed over before anything runs: the commit ids are full hex
/// object ids (they name directories and appear in paths), the run count is sane and the
/// job spec is valid. A task that fails here is reported as an error, never a panic.
pub fn validate_assignment(task: &TaskAssignment) -> Result<(), String> {
    let full_hex =
        |s: &str| (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !full_hex(&task.sha) {
        return Err(format!(
            "the task's commit `{}` is not a full object id",
            task.sha.escape_debug()
        ));
    }
    if let Some(p) = &task.pair_sha
        && !full_hex(p)
    {
        return Err(format!(
            "the task's paired commit `{}` is not a full object id",
            p.escape_debug()
        ));
    }
    if task.runs == 0 || task.runs > MAX_ITERATIONS {
        return Err(format!(
            "the task asks for {} runs (1..={MAX_ITERATIONS})",
            task.runs
        ));
    }
    task.job
        .validate()
        .map_err(|e| format!("the task's job spec is not valid: {e}"))
}

/// A 4xx other than 409: the server refuses this payload, and would refuse it again.
fn refused_payload(e: &ClientError) -> bool {
    matches!(e, ClientError::Refused { status, .. }
        if status.is_client_error() && status.as_u16() != 409 && status.as_u16() != 401)
}

/// Turns `cancel` (the server's) and `shutdown` into one abort signal: the server's cancel,
/// an immediate shutdown, or any shutdown while a build runs.
fn abort_signal(
    mut cancel: watch::Receiver<bool>,
    mut shutdown: watch::Receiver<Shutdown>,
    building: watch::Receiver<bool>,
) -> (watch::Receiver<bool>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(false);
    let handle = tokio::spawn(async move {
        loop {
            let s = *shutdown.borrow();
            if *cancel.borrow()
                || s == Shutdown::Now
                || (s == Shutdown::AfterThisRun && *building.borrow())
            {
                let _ = tx.send(true);
                return;
            }
            tokio::select! {
                r = cancel.changed() => if r.is_err() { std::future::pending::<()>().await },
                r = shutdown.changed() => if r.is_err() { std::future::pending::<()>().await },
            }
        }
    });
    (rx, handle)
}

pub async fn work(
    w: &mut Worker,
    task: &TaskAssignment,
    cancel: watch::Receiver<bool>,
    shutdown: watch::Receiver<Shutdown>,
) -> anyhow::Result<Finish> {
    let (building_tx, building_rx) = watch::channel(true);
    let (mut abort, forwarder) = abort_signal(cancel.clone(), shutdown.clone(), building_rx);
    let result = work_inner(w, task, &cancel, &shutdown, &building_tx, &mut abort).await;
    forwarder.abort();
    result
}

async fn work_inner(
    w: &mut Worker,
    task: &TaskAssignment,
    cancel: &watch::Receiver<bool>,
    shutdown: &watch::Receiver<Shutdown>,
    building: &watch::Sender<bool>,
    abort: &mut watch::Receiver<bool>,
) -> anyhow::Result<Finish> {
    let job = &task.job;
    let stopped = |why: &str| -> Finish {
        if *cancel.borrow() {
            Finish::Cancelled
        } else {
            Finish::HandBack(why.to_string())
        }
    };
    let note = |stage: String, sha: &str| CurrentTask {
        task_id: task.task_id,
        sha: sha.to_string(),
        stage,
        since: Utc::now(),
    };
    // The commits to measure: the task's, and for a paired task its pair, alternating.
    let mut commits = vec![task.sha.clone()];
    commits.extend(task.pair_sha.clone());
    let mut entries = Vec::new();
    for sha in &commits {
        w.note
            .write(&note(format!("build of {}", short(sha)), sha))?;
        let Attempt { built, log, secs } = w
            .builder
            .build(task, sha, &env_for(task, sha, None), abort)
            .await?;
        let report = BuildReport {
            sha: sha.clone(),
            succeeded: matches!(built, Built::Ready { .. }),
            cached: matches!(built, Built::Ready { cached: true, .. }),
            duration_secs: secs,
            // The server keeps the end of a log (where errors are); the cache keeps it all.
            log: tail_bytes(&log, BUILD_LOG_UPLOAD_BYTES).to_string(),
        };
        if !matches!(built, Built::Cancelled) {
            match retry("report build", || {
                w.client.report_build(task.task_id, &report)
            })
            .await
            {
                Ok(()) => {}
                Err(e) if taken_away(&e) => return Ok(Finish::Reported),
                Err(e) => tracing::warn!(error = %e, "could not upload the build log"),
            }
        }
        match built {
            Built::Ready { entry, .. } => entries.push(entry),
            Built::Cancelled => return Ok(stopped("stopped during the build")),
            Built::Failed { message, log } => {
                return complete_untestable(w, task, sha, message, &log).await;
            }
        }
    }
    let _ = building.send(false);
    // Evict now that every entry this task needs is known, so none of them goes.
    let keep: Vec<_> = entries.iter().map(|e| e.dir.clone()).collect();
    w.builder.cache.evict(&keep)?;

    let format: Format = job
        .run
        .format
        .parse()
        .map_err(|e| anyhow::anyhow!("run.format: {e}"))?;
    let sides = commits.len() as u32;
    let total = task.runs * sides;
    let done: HashSet<u32> = task.done_iterations.iter().copied().collect();
    let mut booted: HashSet<String> = HashSet::new();
    let scratch = w.config.work_dir.join("scratch");
    begin_deployment(task, w.ssh.as_mut());
    for iteration in (0..total).filter(|i| !done.contains(i)) {
        if *shutdown.borrow() != Shutdown::Running {
            return Ok(stopped("worker shutting down"));
        }
        let side = (iteration % sides) as usize;
        let (sha, entry) = (&commits[side], &entries[side]);
        w.note.write(&note(
            format!("run {} of {total} ({})", iteration + 1, short(sha)),
            sha,
        ))?;
        let req = RunRequest {
            job,
            sha,
            artifacts: &entry.dir,
            env: env_for(task, sha, Some(iteration / sides)),
        };
        let started_at = Utc::now();
        let outcome = run_once(w, &req, &scratch, abort).await?;
        let finished_at = Utc::now();
        let RunOutcome {
            end,
            mut log,
            environment,
            ..
        } = outcome;
        let (completed, metrics) = match end {
            RunEnd::Cancelled => return Ok(stopped("stopped during a run")),
            RunEnd::BootFailed(reason) if !booted.contains(sha) => {
                // The commit's kernel never came up on this host: untestable, as a build
                // failure is.
                tracing::warn!(sha, reason, "boot failed: commit untestable");
                return complete_untestable(w, task, sha, format!("boot failed: {reason}"), &log)
                    .await;
            }
            RunEnd::BootFailed(reason) => {
                log.push_str(&format!("\nperfbisect: boot failed: {reason}\n"));
                (false, Default::default())
            }
            RunEnd::Ran { ending, results } => {
                booted.insert(sha.clone());
                match (ending, results) {
                    (Ending::Exited(0), Some(text)) => {
                        match perfbisect_metrics::parse(format, &job.testcase, &text) {
                            Ok(m) => (true, m),
                            Err(e) => {
                                // Output we cannot read is a run that did not complete, never a zero.
                                log.push_str(&format!(
                                    "\nperfbisect: cannot parse the results: {e}\n"
                                ));
                                (false, Default::default())
                            }
                        }
                    }
                    (ending, _) => {
                        log.push_str(&format!(
                            "\nperfbisect: benchmark {}\n",
                            exec::describe(&ending)
                        ));
                        (false, Default::default())
                    }
                }
            }
        };
        let upload = RunUpload {
            iteration,
            sha: Some(sha.clone()),
            completed,
            metrics,
            log,
            started_at,
            finished_at,
            environment,
        };
        let mut result = retry("upload run", || w.client.upload_run(task.task_id, &upload)).await;
        if let Err(e) = &result
            && refused_payload(e)
        {
            // The server will never take this run as it is: store it as a run that did not
            // complete, with the reason, instead of retrying it or losing the task.
            tracing::warn!(error = %e, iteration, "the server refused the run; storing it as incomplete");
            let failed = RunUpload {
                completed: false,
                metrics: Default::default(),
                log: format!(
                    "{}\nperfbisect: the server refused this run's upload: {e}\n",
                    tail_bytes(&upload.log, 64 << 10)
                ),
                environment: Default::default(),
                ..upload.clone()
            };
            result = retry("upload run", || w.client.upload_run(task.task_id, &failed)).await;
        }
        match result {
            Ok(()) => {}
            Err(e) if taken_away(&e) => {
                tracing::warn!(error = %e, "task taken away; stopping it");
                return Ok(Finish::Reported);
            }
            Err(e) => return Err(e).context("uploading a run"),
        }
    }
    let msg = CompleteTask {
        outcome: TaskOutcome::Done,
        message: None,
        log_tail: None,
        failed_sha: None,
    };
    match retry("complete", || w.client.complete(task.task_id, &msg)).await {
        Ok(()) => Ok(Finish::Reported),
        Err(e) if taken_away(&e) => Ok(Finish::Reported),
        Err(e) => Err(e).context("completing the task"),
    }
}

/// Before a task's first run: a task that asks for a deployment of its own makes the ssh
/// host boot its commit again even where it already runs it (runs of one boot share its
/// level, so the engine measures a commit again on a new boot). A VM a run boots anyway, and
/// the local runner deploys nothing.
pub fn begin_deployment(task: &TaskAssignment, ssh: Option<&mut deploy::ssh::SshHost>) {
    if task.fresh_deploy
        && let Some(host) = ssh
    {
        host.redeploy();
    }
}

async fn run_once(
    w: &mut Worker,
    req: &RunRequest<'_>,
    scratch: &std::path::Path,
    abort: &mut watch::Receiver<bool>,
) -> anyhow::Result<RunOutcome> {
    let rootfs = w.config.rootfs_dir.clone();
    Ok(match req.job.deploy.kind {
        DeployKind::Local => deploy::local::run(req, &w.name, abort).await?,
        DeployKind::Qemu => {
            deploy::qemu::run(req, &w.config.qemu, rootfs.as_deref(), scratch, abort).await?
        }
        DeployKind::Ssh => {
            let host = w.ssh.as_mut().ok_or_else(|| {
                deploy::DeployError::NotConfigured(
                    "a `deploy.kind: ssh` job needs --ssh-target".into(),
                )
            })?;
            // Booting while the commit's kernel comes up, running while the job runs: what
            // the host is doing, for the inventory.
            if host.needs_boot(req.sha) {
                report_host(&w.client, HostActivity::Booting, None, None, None).await;
            }
            let outcome = match host.prepare(req, rootfs.as_deref(), scratch, abort).await? {
                Prepared::Ended(outcome) => *outcome,
                Prepared::Ready(boot) => {
                    let power = host.last_power_action.take();
                    report_host(
                        &w.client,
                        HostActivity::Running,
                        host.running_kernel().map(str::to_string),
                        power,
                        None,
                    )
                    .await;
                    host.run_job(req, boot, abort).await?
                }
            };
            // The host came back (from a boot or a power cycle): its streak ends.
            let power = host.last_power_action.take();
            report_host(
                &w.client,
                HostActivity::Idle,
                outcome.environment.kernel_release.clone(),
                power,
                Some(HostOutcome::Healthy),
            )
            .await;
            outcome
        }
    })
}

/// Best effort: the host's state is for operators, never a reason to fail a task.
pub async fn report_host(
    client: &crate::client::Client,
    activity: HostActivity,
    kernel: Option<String>,
    power_action: Option<String>,
    outcome: Option<HostOutcome>,
) {
    let report = HostStateReport {
        activity,
        kernel,
        power_action,
        outcome,
        message: None,
    };
    if let Err(e) = client.host_state(&report).await {
        tracing::warn!(error = %e, "could not report the host's state");
    }
}

async fn complete_untestable(
    w: &Worker,
    task: &TaskAssignment,
    sha: &str,
    message: String,
    log: &str,
) -> anyhow::Result<Finish> {
    // The reason ends the tail: it is what the API shows for a skipped commit.
    let log = format!("{log}\nperfbisect: {message}");
    let msg = CompleteTask {
        outcome: TaskOutcome::BuildFailed,
        message: Some(message),
        log_tail: Some(exec::tail(&log, 40)),
        failed_sha: Some(sha.to_string()),
    };
    match retry("complete", || w.client.complete(task.task_id, &msg)).await {
        Ok(()) => Ok(Finish::Reported),
        Err(e) if taken_away(&e) => Ok(Finish::Reported),
        Err(e) => Err(e).context("reporting the untestable commit"),
    }
}

#[cfg(test)]
mod assignment_tests {
    use super::*;

    fn assignment(sha: &str) -> TaskAssignment {
        TaskAssignment {
            task_id: 1,
            bisect_id: 1,
            repository_url: "/srv/x.git".into(),
            sha: sha.into(),
            pair_sha: None,
            job: perfbisect_wire::job::JobSpec::from_yaml(
                "testcase: t\ntbox_group: g\nbuild: {command: 'true'}\nrun: {command: 'echo x: 1'}\n",
            )
            .unwrap(),
            job_hash: "h".into(),
            metric: "x.x".into(),
            runs: 3,
            done_iterations: vec![],
            lease_expires_at: chrono::Utc::now(),
            fresh_deploy: false,
        }
    }

    #[test]
    fn what_the_server_hands_over_is_checked_and_never_panics() {
        let full = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(validate_assignment(&assignment(full)), Ok(()));
        for bad in [
            "",
            "abc",
            "0123456789a",
            "../../etc/passwd",
            &"g".repeat(40),
        ] {
            assert_eq!(short(bad).len(), bad.len().min(12));
            let e = validate_assignment(&assignment(bad)).unwrap_err();
            assert!(e.contains("not a full object id"), "{bad}: {e}");
        }
        let mut t = assignment(full);
        t.pair_sha = Some("1234".into());
        assert!(
            validate_assignment(&t)
                .unwrap_err()
                .contains("paired commit")
        );
        let mut t = assignment(full);
        t.runs = 0;
        assert!(validate_assignment(&t).unwrap_err().contains("runs"));
        let mut t = assignment(full);
        t.job.run.command = "x".repeat(perfbisect_wire::job::MAX_COMMAND_BYTES + 1);
        assert!(validate_assignment(&t).unwrap_err().contains("job spec"));
    }
}
