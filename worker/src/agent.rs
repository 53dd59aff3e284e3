//! The worker loop: register, claim, build, run, upload, complete.

use crate::WorkerConfig;
use crate::checkout::{Tree, Workspace};
use crate::client::{Client, ClientError, retry};
use crate::exec::{self, Ending};
use anyhow::Context;
use chrono::Utc;
use perfbisect_metrics::Format;
use perfbisect_wire::worker::{
    CompleteTask, RegisterWorker, RunUpload, TaskAssignment, TaskOutcome,
};
use std::time::Duration;
use tokio::sync::watch;

pub async fn run(config: WorkerConfig) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.work_dir)
        .with_context(|| format!("creating work directory {}", config.work_dir.display()))?;
    let workspace = Workspace::new(&config.work_dir);
    let name = config.name();
    let enroll = Client::new(&config.server).with_token(&config.enroll_token);
    let req = RegisterWorker {
        name: name.clone(),
        host_group: config.host_group.clone(),
        machine: crate::machine::describe(),
    };
    let reg = retry("register", || enroll.register(&req))
        .await
        .context("registering with the server")?;
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
    let heartbeat = Duration::from_secs(reg.heartbeat_secs.max(1));

    let (stop_tx, mut stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM");
        tokio::select! { _ = tokio::signal::ctrl_c() => {}, _ = term.recv() => {} }
        let _ = stop_tx.send(true);
    });

    let mut done = 0u64;
    loop {
        if *stop_rx.borrow() {
            break;
        }
        let claimed = tokio::select! {
            c = retry("claim", || client.claim(config.claim_wait_secs)) => c,
            _ = stop_rx.changed() => break,
        };
        let task = match claimed {
            Ok(Some(task)) => task,
            Ok(None) => continue,
            Err(e) => {
                tracing::error!(error = %e, "claim failed");
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            }
        };
        let span = tracing::info_span!("task", task = task.task_id, bisect = task.bisect_id, sha = %&task.sha[..12]);
        let _enter = span.enter();
        handle(&client, &workspace, &task, heartbeat).await;
        done += 1;
        if config.max_tasks > 0 && done >= config.max_tasks {
            break;
        }
    }
    tracing::info!(tasks = done, "worker stopping");
    Ok(())
}

/// Works one task with a heartbeat alongside; never panics the loop on a task's failure.
async fn handle(
    client: &Client,
    workspace: &Workspace,
    task: &TaskAssignment,
    heartbeat: Duration,
) {
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let hb_client = client.clone();
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
    let result = work(client, workspace, task, cancel_rx).await;
    beat.abort();
    if let Err(e) = result {
        tracing::error!(error = ?e, "task failed on this worker");
        let msg = CompleteTask {
            outcome: TaskOutcome::Error,
            message: Some(format!("{e:#}")),
            log_tail: None,
            failed_sha: None,
        };
        if let Err(e) = retry("complete", || client.complete(task.task_id, &msg)).await {
            tracing::warn!(error = %e, "could not report the failure; the lease will expire");
        }
    }
}

fn env_for(task: &TaskAssignment, iteration: Option<u32>) -> Vec<(String, String)> {
    let mut env = vec![("PERFBISECT_TESTCASE".to_string(), task.job.testcase.clone())];
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

enum Built {
    Ready(std::path::PathBuf),
    Failed { message: String, log_tail: String },
    Cancelled,
}

/// Checks `sha` out and builds it, unless its build for this recipe is cached.
async fn build(
    workspace: &Workspace,
    task: &TaskAssignment,
    sha: &str,
    cancel: &mut watch::Receiver<bool>,
) -> anyhow::Result<Built> {
    let job = &task.job;
    let ws = workspace.clone();
    let (url, sha_owned, build_hash) = (
        task.repository_url.clone(),
        sha.to_string(),
        job.build_hash(),
    );
    let tree: Tree = tokio::task::spawn_blocking(move || ws.prepare(&url, &sha_owned, &build_hash))
        .await?
        .with_context(|| format!("checking {sha} out"))?;
    if tree.built {
        tracing::info!(sha, "build cached");
        return Ok(Built::Ready(tree.dir));
    }
    tracing::info!(sha, dir = %tree.dir.display(), "building");
    let mut env = env_for(task, None);
    env.push(("PERFBISECT_COMMIT".into(), sha.to_string()));
    let out = exec::shell(
        &job.build.command,
        &tree.dir,
        &env,
        Duration::from_secs(job.timeouts.build_secs),
        cancel,
    )
    .await
    .context("starting the build")?;
    if matches!(out.ending, Ending::Cancelled) {
        return Ok(Built::Cancelled);
    }
    if !out.success() {
        tracing::warn!(
            sha,
            ending = out.describe(),
            "build failed: commit untestable"
        );
        return Ok(Built::Failed {
            message: format!("build {}", out.describe()),
            log_tail: exec::tail(&out.log(), 40),
        });
    }
    Workspace::mark_built(&tree.dir)?;
    Ok(Built::Ready(tree.dir))
}

async fn work(
    client: &Client,
    workspace: &Workspace,
    task: &TaskAssignment,
    mut cancel: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let job = &task.job;
    // The commits to measure: the task's, and for a paired task its pair, alternating.
    let mut commits = vec![task.sha.clone()];
    commits.extend(task.pair_sha.clone());
    let mut trees = Vec::new();
    for sha in &commits {
        match build(workspace, task, sha, &mut cancel).await? {
            Built::Ready(dir) => trees.push(dir),
            Built::Cancelled => return Ok(()),
            Built::Failed { message, log_tail } => {
                let msg = CompleteTask {
                    outcome: TaskOutcome::BuildFailed,
                    message: Some(message),
                    log_tail: Some(log_tail),
                    failed_sha: Some(sha.clone()),
                };
                retry("complete", || client.complete(task.task_id, &msg)).await?;
                return Ok(());
            }
        }
    }
    let format: Format = job
        .run
        .format
        .parse()
        .map_err(|e| anyhow::anyhow!("run.format: {e}"))?;
    let sides = commits.len() as u32;
    for iteration in 0..task.runs * sides {
        let side = (iteration % sides) as usize;
        let (sha, dir) = (&commits[side], &trees[side]);
        let mut env = env_for(task, Some(iteration / sides));
        env.push(("PERFBISECT_COMMIT".into(), sha.clone()));
        let started_at = Utc::now();
        let out = exec::shell(
            &job.run.command,
            dir,
            &env,
            Duration::from_secs(job.timeouts.run_secs),
            &mut cancel,
        )
        .await
        .context("starting the benchmark")?;
        if matches!(out.ending, Ending::Cancelled) {
            return Ok(());
        }
        let finished_at = Utc::now();
        let mut log = out.log();
        let mut completed = out.success();
        let mut metrics = Default::default();
        if completed {
            let text = match &job.run.results_file {
                Some(f) => std::fs::read_to_string(dir.join(f))
                    .with_context(|| format!("reading results file {f}"))?,
                None => out.stdout.clone(),
            };
            match perfbisect_metrics::parse(format, &job.testcase, &text) {
                Ok(m) => metrics = m,
                Err(e) => {
                    // Output we cannot read is a run that did not complete, never a zero.
                    completed = false;
                    log.push_str(&format!("\nperfbisect: cannot parse the results: {e}\n"));
                }
            }
        } else {
            log.push_str(&format!("\nperfbisect: benchmark {}\n", out.describe()));
        }
        let upload = RunUpload {
            iteration,
            sha: Some(sha.clone()),
            completed,
            metrics,
            log,
            started_at,
            finished_at,
        };
        match retry("upload run", || client.upload_run(task.task_id, &upload)).await {
            Ok(()) => {}
            Err(ClientError::Refused {
                status, message, ..
            }) if status.as_u16() == 409 => {
                tracing::warn!(message, "task taken away; stopping it");
                return Ok(());
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
    match retry("complete", || client.complete(task.task_id, &msg)).await {
        Ok(()) => Ok(()),
        Err(ClientError::Refused { status, .. }) if status.as_u16() == 409 => Ok(()),
        Err(e) => Err(e).context("completing the task"),
    }
}
