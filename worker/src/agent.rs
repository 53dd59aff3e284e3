//! The worker loop: register, report a task lost in a crash, claim, work, repeat; and the
//! signals that end it.
//!
//! Shutdown: the first SIGTERM (or Ctrl-C) lets the current run finish and be uploaded,
//! then hands the rest of the task back to the server (queued again at once, the attempt
//! not counted); a build in progress is stopped at once, since it is not a result. A second
//! signal stops the current run too.

use crate::WorkerConfig;
use crate::build::Builder;
use crate::cache::Cache;
use crate::checkout::Workspace;
use crate::client::{Client, ClientError, retry};
use crate::deploy::DeployError;
use crate::deploy::ssh::SshHost;
use crate::note::TaskNote;
use crate::task::{self, Finish, Shutdown};
use anyhow::Context;
use perfbisect_wire::hosts::{HostActivity, HostOutcome, HostStateReport};
use perfbisect_wire::worker::{
    CompleteTask, HandBack, Interrupted, RegisterWorker, TaskAssignment, TaskOutcome,
};
use std::time::Duration;
use tokio::sync::watch;

/// What a task needs from the worker, for the worker's whole life.
pub struct Worker {
    pub config: WorkerConfig,
    pub name: String,
    pub client: Client,
    pub builder: Builder,
    pub note: TaskNote,
    /// The ssh test host, when this worker has one; it remembers which commit it runs.
    pub ssh: Option<SshHost>,
}

pub async fn run(mut config: WorkerConfig) -> anyhow::Result<()> {
    // Before anything else: the token leaves this process's environment and command line.
    if let Some(token) = crate::conceal::conceal(config.enroll_token.as_deref())? {
        config.enroll_token = Some(token);
    }
    std::fs::create_dir_all(&config.work_dir)
        .with_context(|| format!("creating work directory {}", config.work_dir.display()))?;
    let workspace = Workspace::new(&config.work_dir).with_auth(config.git.clone());
    let cache = Cache::new(config.work_dir.join("builds"), config.cache_max_bytes);
    let leftovers = cache
        .remove_incomplete()
        .context("cleaning the build cache")?;
    if leftovers > 0 {
        tracing::info!(leftovers, "removed unfinished builds of an earlier run");
    }
    let name = config.name();
    crate::sanitize::pass_also(&config.pass_env);
    let enroll = Client::with_ca(&config.server, config.ca_file.as_deref())
        .context("the server's CA file")?
        .with_token(&config.enroll_token()?);
    // The worker token of the last registration: registering again under this name needs it.
    let token_file = config.work_dir.join("worker-token");
    let previous_token = std::fs::read_to_string(&token_file)
        .ok()
        .map(|t| t.trim().to_string());
    // (Not added to the scrubber: it must reach the server in this body; it is dead after.)
    let req = RegisterWorker {
        name: name.clone(),
        host_group: config.host_group.clone(),
        machine: crate::machine::describe(),
        previous_token,
    };
    let reg = match retry("register", || enroll.register(&req)).await {
        Ok(reg) => reg,
        Err(ClientError::Refused {
            status, message, ..
        }) if status.as_u16() == 409 => {
            tracing::error!(name, message, "another worker holds this name; exiting");
            anyhow::bail!(
                "the server refused the name `{name}`: {message} (start this worker with another --name, or have an operator register it)"
            );
        }
        Err(e) => return Err(e).context("registering with the server"),
    };
    crate::sanitize::write_private(&token_file, reg.token.as_bytes())
        .with_context(|| format!("writing {}", token_file.display()))?;
    tracing::info!(
        host_id = reg.host_id,
        name,
        group = config.host_group,
        "registered"
    );
    println!(
        "worker {name} registered as host {} in group {}",
        reg.host_id, config.host_group
    );
    let client = enroll.with_token(&reg.token);
    let heartbeat = Duration::from_secs(reg.heartbeat_secs.min(config.heartbeat_secs).max(1));
    let note = TaskNote::new(&config.work_dir);
    report_interrupted(&client, &note).await;

    let (shutdown_tx, mut shutdown_rx) = watch::channel(Shutdown::Running);
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        loop {
            tokio::select! { _ = tokio::signal::ctrl_c() => {}, _ = term.recv() => {} }
            let next = match *shutdown_tx.borrow() {
                Shutdown::Running => Shutdown::AfterThisRun,
                _ => Shutdown::Now,
            };
            tracing::info!(?next, "signal received");
            let _ = shutdown_tx.send(next);
        }
    });

    let ssh = config
        .ssh
        .target
        .is_some()
        .then(|| SshHost::new(&config.ssh))
        .transpose()?;
    let mut ctx = Worker {
        builder: Builder {
            workspace,
            cache,
            client: client.clone(),
            jobs: config.build_jobs(),
            ccache: !config.no_ccache,
        },
        config,
        name,
        client,
        note,
        ssh,
    };
    let mut done = 0u64;
    loop {
        if *shutdown_rx.borrow() != Shutdown::Running {
            break;
        }
        let claimed = tokio::select! {
            c = retry("claim", || ctx.client.claim(ctx.config.claim_wait_secs)) => c,
            _ = shutdown_rx.changed() => break,
        };
        let task = match claimed {
            Ok(Some(task)) => task,
            Ok(None) => continue,
            Err(ClientError::Refused {
                status, message, ..
            }) if status.as_u16() == 401 => {
                // Another registration took this name over, or the token was revoked:
                // claiming again would fail forever.
                tracing::error!(
                    message,
                    "the server no longer accepts this worker's token (its name was registered again elsewhere, or the token was revoked); exiting"
                );
                anyhow::bail!("this worker's registration was replaced or revoked: {message}");
            }
            Err(e) => {
                tracing::error!(error = %e, "claim failed");
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            }
        };
        let span = tracing::info_span!("task", task = task.task_id, bisect = task.bisect_id, sha = %task::short(&task.sha));
        let _enter = span.enter();
        if let Err(why) = task::validate_assignment(&task) {
            tracing::error!(why, "refusing a task the server handed over");
            let msg = CompleteTask {
                outcome: TaskOutcome::Error,
                message: Some(format!("the worker refused the task: {why}")),
                log_tail: None,
                failed_sha: None,
            };
            if let Err(e) = retry("complete", || ctx.client.complete(task.task_id, &msg)).await {
                tracing::warn!(error = %e, "could not report the refusal; the lease will expire");
            }
            done += 1;
            continue;
        }
        let host_down = handle(&mut ctx, &task, heartbeat, shutdown_rx.clone()).await;
        done += 1;
        if host_down {
            // The task went back to the queue for the group's other hosts; this one waits
            // for its host to be repaired instead of failing every task it claims.
            let pause = Duration::from_secs(ctx.config.host_down_pause_secs);
            tracing::warn!(
                secs = pause.as_secs(),
                "test host down: pausing before the next claim"
            );
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = shutdown_rx.changed() => {}
            }
        }
        if ctx.config.max_tasks > 0 && done >= ctx.config.max_tasks {
            break;
        }
    }
    tracing::info!(tasks = done, "worker stopping");
    Ok(())
}

/// Tells the server about the task an earlier run of this worker did not finish.
async fn report_interrupted(client: &Client, note: &TaskNote) {
    let Some(prev) = note.read() else { return };
    let msg = Interrupted {
        message: Some(format!(
            "the worker stopped during {} (since {})",
            prev.stage,
            prev.since.format("%Y-%m-%d %H:%M:%S UTC")
        )),
    };
    match retry("interrupted", || client.interrupted(prev.task_id, &msg)).await {
        Ok(reply) => tracing::warn!(
            task = prev.task_id,
            requeued = reply.requeued,
            stage = prev.stage,
            "reported the task interrupted by the last stop"
        ),
        Err(e) => {
            tracing::warn!(task = prev.task_id, error = %e, "could not report the interrupted task")
        }
    }
    if let Err(e) = note.clear() {
        tracing::warn!(error = %e, "clearing the task note");
    }
}

/// Works one task with a heartbeat alongside; never panics the loop on a task's failure.
/// True when the task failed because the test host is down.
async fn handle(
    ctx: &mut Worker,
    task: &TaskAssignment,
    heartbeat: Duration,
    shutdown: watch::Receiver<Shutdown>,
) -> bool {
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let hb_client = ctx.client.clone();
    let task_id = task.task_id;
    let beat = tokio::spawn(async move {
        loop {
            tokio::time::sleep(heartbeat).await;
            match hb_client.heartbeat(task_id).await {
                Ok(r) if r.cancelled => {
                    tracing::info!(task = task_id, "server cancelled the task");
                    let _ = cancel_tx.send(true);
                    return;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(task = task_id, error = %e, "heartbeat failed"),
            }
        }
    });
    let result = task::work(ctx, task, cancel_rx, shutdown).await;
    beat.abort();
    let host_down = matches!(
        result
            .as_ref()
            .err()
            .and_then(|e| e.downcast_ref::<DeployError>()),
        Some(DeployError::HostDown(_))
    );
    if host_down {
        // One more failure in the host's streak; the server quarantines it at the limit.
        let power = ctx.ssh.as_mut().and_then(|h| h.last_power_action.take());
        let report = HostStateReport {
            activity: HostActivity::PoweredOff,
            kernel: None,
            power_action: power,
            outcome: Some(HostOutcome::Failed),
            message: result.as_ref().err().map(|e| format!("{e:#}")),
        };
        match ctx.client.host_state(&report).await {
            Ok(Some(reply)) => tracing::warn!(
                state = ?reply.state,
                streak = reply.failure_streak,
                "reported the host down"
            ),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "could not report the host down"),
        }
    }
    let finish = match result {
        Ok(finish) => finish,
        // The host's failure says nothing about the task: it goes back to the queue without
        // spending one of its attempts (a host that keeps failing is quarantined instead), so
        // one dead host cannot fail a bisect.
        Err(e) if host_down => Finish::HandBack(format!("the test host is down: {e:#}")),
        Err(e) => {
            tracing::error!(error = ?e, "task failed on this worker");
            let msg = CompleteTask {
                outcome: TaskOutcome::Error,
                message: Some(format!("{e:#}")),
                log_tail: None,
                failed_sha: None,
            };
            if let Err(e) = retry("complete", || ctx.client.complete(task.task_id, &msg)).await {
                tracing::warn!(error = %e, "could not report the failure; the lease will expire");
            }
            Finish::Reported
        }
    };
    if let Finish::HandBack(why) = finish {
        let msg = HandBack { message: Some(why) };
        match retry("hand back", || ctx.client.hand_back(task.task_id, &msg)).await {
            Ok(()) => tracing::info!("task handed back"),
            Err(e) => {
                tracing::warn!(error = %e, "could not hand the task back; its lease will expire")
            }
        }
    }
    if let Err(e) = ctx.note.clear() {
        tracing::warn!(error = %e, "clearing the task note");
    }
    host_down
}
