//! The worker protocol: register, claim (long poll), heartbeat, upload runs, complete.

use super::ApiJson;
use crate::auth::{Enrollment, WorkerHost, WorkerToken, hash_token, new_token};
use crate::error::{ApiError, ApiResult};
use crate::queue::Look;
use crate::state::AppState;
use crate::store;
use crate::store::tasks::UploadTarget;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use perfbisect_wire::JobSpec;
use perfbisect_wire::api::ErrorBody;
use perfbisect_wire::states::TaskState;
use perfbisect_wire::worker::{
    ClaimRequest, CompleteTask, HeartbeatReply, MachineInfo, RegisterWorker, RunUpload,
    TaskAssignment, WorkerRegistered,
};
use std::time::Duration;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Longest long-poll a worker may ask for.
const MAX_WAIT_SECS: u64 = 60;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register))
        .routes(routes!(claim))
        .routes(routes!(heartbeat))
        .routes(routes!(upload_run))
        .routes(routes!(complete))
        .routes(routes!(list_hosts))
}

/// Register (or re-register) a worker with an enrollment token; answers a worker token.
#[utoipa::path(post, path = "/api/v1/worker/register", tag = "workers", request_body = RegisterWorker,
    responses((status = 200, body = WorkerRegistered), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 409, description = "The name belongs to another worker", body = ErrorBody)),
    security(("enroll_token" = [])))]
async fn register(
    State(state): State<AppState>,
    enrolled: Enrollment,
    ApiJson(req): ApiJson<RegisterWorker>,
) -> ApiResult<Json<WorkerRegistered>> {
    let name_ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 128
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    if !name_ok(&req.name) {
        return Err(ApiError::bad(
            "name",
            "must be 1-128 characters of letters, digits, '-', '_', '.'",
        ));
    }
    if !name_ok(&req.host_group) {
        return Err(ApiError::bad(
            "host_group",
            "must be 1-128 characters of letters, digits, '-', '_', '.'",
        ));
    }
    let token = new_token();
    // A registered name is taken over only by its own worker (its current token) or an
    // operator, decided in the same statement that writes the new token.
    let machine = serde_json::to_value(&req.machine).map_err(anyhow::Error::from)?;
    let previous = req.previous_token.as_deref().map(hash_token);
    let host_id = store::hosts::register(
        &state.db,
        &req.name,
        &req.host_group,
        &machine,
        &hash_token(&token),
        enrolled.operator,
        previous.as_deref(),
    )
    .await?;
    let host_id = host_id.ok_or_else(|| {
        ApiError::Conflict(format!(
            "worker name `{}` is registered by another worker: register again with its current token \
             (`previous_token`, kept in the worker's work directory), with an operator's token, or under another name",
            req.name
        ))
    })?;
    // A host that registers again has restarted: whatever it was running is not coming back.
    let requeued = store::queue::release_restarted_host(&state.db, host_id, &req.name).await?;
    if requeued > 0 {
        crate::queue::notify_queued(&state.db).await?;
    }
    // A host came (or came back): its group's shares change.
    crate::store::wakeups::wake_group(
        &state.db,
        &req.host_group,
        crate::store::wakeups::Reason::HostsChanged,
    )
    .await?;
    tracing::info!(
        host_id,
        name = req.name,
        group = req.host_group,
        "worker registered"
    );
    Ok(Json(WorkerRegistered {
        host_id,
        token,
        heartbeat_secs: (state.lease.as_secs() / 3).max(1),
    }))
}

/// Claim the next task of the worker's host group, waiting up to `wait_secs`. 204 when none.
#[utoipa::path(post, path = "/api/v1/worker/claim", tag = "workers", request_body = ClaimRequest,
    responses((status = 200, body = TaskAssignment), (status = 204, description = "No task within the wait"),
              (status = 401, body = ErrorBody)),
    security(("worker_token" = [])))]
async fn claim(
    State(state): State<AppState>,
    token: WorkerToken,
    ApiJson(req): ApiJson<ClaimRequest>,
) -> ApiResult<Response> {
    let wait = Duration::from_secs(req.wait_secs.min(MAX_WAIT_SECS));
    // One statement per look checks the token, the host's drain and quarantine (a host that
    // is either waits out its poll and gets nothing), claims, and reads the assignment.
    let (host_id, task) = match crate::queue::claim_wait(&state, &token.hash, wait).await? {
        Look::UnknownToken => return Err(crate::auth::unknown_worker_token()),
        Look::Barred { .. } | Look::Empty { .. } => {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        Look::Claimed { host_id, task, .. } => (host_id, task),
    };
    let job: JobSpec = serde_json::from_value(task.spec).map_err(anyhow::Error::from)?;
    tracing::info!(
        task = task.id,
        bisect = task.bisect_id,
        host = host_id,
        sha = task.sha,
        "task claimed"
    );
    Ok(Json(TaskAssignment {
        task_id: task.id,
        bisect_id: task.bisect_id,
        repository_url: task.repository_url,
        sha: task.sha,
        pair_sha: task.pair_sha,
        job,
        job_hash: task.job_hash,
        metric: task.metric,
        runs: task.runs as u32,
        // A task given back or interrupted keeps its stored runs; the new holder runs the rest.
        done_iterations: task.done_iterations.into_iter().map(|i| i as u32).collect(),
        lease_expires_at: task.lease_expires_at,
    })
    .into_response())
}

/// Renews the lease of a running task held by this host; None when it is not (any more).
async fn renew<'e>(
    db: impl sqlx::PgExecutor<'e>,
    state: &AppState,
    task: i64,
    host: i64,
) -> sqlx::Result<Option<DateTime<Utc>>> {
    store::queue::renew(db, task, host, state.lease.as_secs_f64()).await
}

/// Renew the lease. `cancelled: true` tells the worker to stop: the bisect ended or the task was taken away.
#[utoipa::path(post, path = "/api/v1/worker/tasks/{id}/heartbeat", tag = "workers",
    params(("id" = i64, Path, description = "Task id")),
    responses((status = 200, body = HeartbeatReply), (status = 401, body = ErrorBody)),
    security(("worker_token" = [])))]
async fn heartbeat(
    State(state): State<AppState>,
    host: WorkerHost,
    Path(id): Path<i64>,
) -> ApiResult<Json<HeartbeatReply>> {
    Ok(Json(
        match renew(&state.db, &state, id, host.host_id).await? {
            Some(lease_expires_at) => HeartbeatReply {
                cancelled: false,
                lease_expires_at,
            },
            None => HeartbeatReply {
                cancelled: true,
                lease_expires_at: Utc::now(),
            },
        },
    ))
}

/// Upload one run of a task. Uploading the same iteration again is a no-op.
#[utoipa::path(post, path = "/api/v1/worker/tasks/{id}/runs", tag = "workers", request_body = RunUpload,
    params(("id" = i64, Path, description = "Task id")),
    responses((status = 201, description = "Stored"), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody),
              (status = 422, body = ErrorBody)),
    security(("worker_token" = [])))]
async fn upload_run(
    State(state): State<AppState>,
    host: WorkerHost,
    Path(id): Path<i64>,
    ApiJson(run): ApiJson<RunUpload>,
) -> ApiResult<StatusCode> {
    let started = std::time::Instant::now();
    let task = store::tasks::upload_target(&state.db, id).await?;
    let UploadTarget {
        bisect_id,
        task_sha,
        pair_sha,
        runs,
        task_state,
        holder,
        metric,
    } = task.ok_or_else(|| ApiError::NotFound(format!("no task with id {id}")))?;
    if task_state != TaskState::Running || holder != Some(host.host_id) {
        return Err(ApiError::Conflict(format!(
            "task {id} is not running on this host (it is {task_state})"
        )));
    }
    let iterations = if pair_sha.is_some() { runs * 2 } else { runs };
    if run.iteration as i32 >= iterations {
        return Err(ApiError::bad(
            "iteration",
            format!("task {id} has {iterations} runs (0..{})", iterations - 1),
        ));
    }
    let sha = match (&run.sha, &pair_sha) {
        (None, None) => task_sha,
        (Some(s), _) if *s == task_sha => task_sha,
        (Some(s), Some(p)) if s == p => p.clone(),
        (None, Some(_)) => {
            return Err(ApiError::bad(
                "sha",
                "runs of a paired task must name their commit",
            ));
        }
        (Some(s), _) => {
            return Err(ApiError::bad(
                "sha",
                format!("commit {s} is not measured by task {id}"),
            ));
        }
    };
    if let Some((name, _)) = run.metrics.iter().find(|(_, v)| !v.is_finite()) {
        return Err(ApiError::bad(
            "metrics",
            format!("metric `{name}` is not a finite number"),
        ));
    }
    if run.completed && !run.metrics.contains_key(&metric) {
        let mut got: Vec<&str> = run.metrics.keys().map(String::as_str).take(20).collect();
        if got.is_empty() {
            got.push("none");
        }
        return Err(ApiError::unprocessable(
            "metrics",
            format!(
                "the bisect's metric `{metric}` is missing from this run; it reported: {}",
                got.join(", ")
            ),
        ));
    }
    // The holder is checked again in the statement that writes (the task row locked for
    // it): a lease that ran out since the check above leaves nothing written. The run, the
    // renewed lease and the wake-up (new evidence: the scheduler decides again, off this
    // request's path) are one statement: one round trip, one commit per upload.
    let written = store::runs::upload(
        &state.db,
        &store::runs::NewRun {
            task: id,
            bisect: bisect_id,
            sha: &sha,
            host: host.host_id,
            iteration: run.iteration as i32,
            completed: run.completed,
            metrics: serde_json::to_value(&run.metrics).map_err(anyhow::Error::from)?,
            log: &run.log,
            started_at: run.started_at,
            finished_at: run.finished_at,
            environment: serde_json::to_value(&run.environment).map_err(anyhow::Error::from)?,
        },
        state.lease.as_secs_f64(),
    )
    .await?;
    if !written.stored && !written.renewed {
        return Err(ApiError::Conflict(format!(
            "task {id} is not running on this host any more"
        )));
    }
    crate::metrics::observe_upload(started.elapsed());
    Ok(StatusCode::CREATED)
}

/// Finish a task: done, build failed (commit untestable), or a worker-side error (retried elsewhere).
#[utoipa::path(post, path = "/api/v1/worker/tasks/{id}/complete", tag = "workers", request_body = CompleteTask,
    params(("id" = i64, Path, description = "Task id")),
    responses((status = 200, description = "Recorded"), (status = 409, body = ErrorBody)),
    security(("worker_token" = [])))]
async fn complete(
    State(state): State<AppState>,
    host: WorkerHost,
    Path(id): Path<i64>,
    ApiJson(req): ApiJson<CompleteTask>,
) -> ApiResult<StatusCode> {
    let started = std::time::Instant::now();
    let tail = req.log_tail.map(|t| {
        t.chars()
            .rev()
            .take(4000)
            .collect::<String>()
            .chars()
            .rev()
            .collect::<String>()
    });
    // The task's end, its requeue notice and the wake-up: one statement, so they commit
    // together in one round trip.
    let owner = store::queue::complete(
        &state.db,
        id,
        host.host_id,
        &host.host_group,
        &store::queue::Completion {
            outcome: req.outcome,
            message: req.message.as_deref(),
            log_tail: tail.as_deref(),
            failed_sha: req.failed_sha.as_deref(),
        },
    )
    .await?
    .map(|o| (o.bisect_id, o.watch_id));
    let (_, watch) = owner
        .ok_or_else(|| ApiError::Conflict(format!("task {id} is not running on this host")))?;
    crate::metrics::observe_complete(started.elapsed());
    if let Some(watch) = watch {
        // Analysing the series is not this request's work: the answer does not wait for it.
        let state = state.clone();
        tokio::spawn(async move { crate::watch::task_finished(&state, watch).await });
    }
    Ok(StatusCode::OK)
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Host {
    id: i64,
    name: String,
    host_group: String,
    machine: MachineInfo,
    last_seen_at: DateTime<Utc>,
    /// The task it is running, if any.
    current_task: Option<i64>,
}

/// Every registered host with its machine description, last contact and current task.
#[utoipa::path(get, path = "/api/v1/hosts", tag = "workers", responses((status = 200, body = Vec<Host>)))]
async fn list_hosts(State(state): State<AppState>) -> ApiResult<Json<Vec<Host>>> {
    let hosts = store::hosts::list(&state.db)
        .await?
        .into_iter()
        .map(|h| Host {
            id: h.id,
            name: h.name,
            host_group: h.host_group,
            machine: h.machine.0,
            last_seen_at: h.last_seen_at,
            current_task: h.current_task,
        })
        .collect();
    Ok(Json(hosts))
}
