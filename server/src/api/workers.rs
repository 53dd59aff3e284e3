//! The worker protocol: register, claim (long poll), heartbeat, upload runs, complete.

use super::ApiJson;
use crate::auth::{
    Enrollment, WorkerHost, WorkerToken, hash_token, new_token, unknown_worker_token,
};
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
        fresh_deploy: task.fresh_deploy,
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
    token: WorkerToken,
    Path(id): Path<i64>,
    body: Result<ApiJson<RunUpload>, ApiError>,
) -> ApiResult<StatusCode> {
    let started = std::time::Instant::now();
    let run = match body {
        Ok(ApiJson(run)) => run,
        Err(refused) => return Err(judged_after_the_token(&state, &token, refused).await),
    };
    let not_finite = run
        .metrics
        .iter()
        .find(|(_, v)| !v.is_finite())
        .map(|(name, _)| name.clone());
    // One statement, shared with the uploads that arrive beside this one, checks the token
    // and the task and stores the run if both allow it (`worker_writes`); what was wrong, if
    // anything, is said below from what it read.
    let uploaded = crate::worker_writes::upload(
        &state,
        store::runs::NewUpload {
            token_hash: token.hash,
            task: id,
            sha: run.sha.clone(),
            iteration: run.iteration as i32,
            completed: run.completed,
            metrics: serde_json::to_value(&run.metrics).map_err(anyhow::Error::from)?,
            log: run.log,
            started_at: run.started_at,
            finished_at: run.finished_at,
            environment: serde_json::to_value(&run.environment).map_err(anyhow::Error::from)?,
            writable: not_finite.is_none(),
        },
    )
    .await?;
    let host = uploaded.host.ok_or_else(unknown_worker_token)?;
    let UploadTarget {
        task_sha,
        pair_sha,
        runs,
        task_state,
        holder,
        metric,
        ..
    } = uploaded
        .target
        .ok_or_else(|| ApiError::NotFound(format!("no task with id {id}")))?;
    if task_state != TaskState::Running || holder != Some(host) {
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
    match (&run.sha, &pair_sha) {
        (None, None) => {}
        (Some(s), _) if *s == task_sha => {}
        (Some(s), Some(p)) if s == p => {}
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
    }
    if let Some(name) = not_finite {
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
    // The statement checked the holder again with the task row locked: a lease that ran out
    // since it was read leaves nothing written.
    if !uploaded.stored && !uploaded.renewed {
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
    token: WorkerToken,
    Path(id): Path<i64>,
    body: Result<ApiJson<CompleteTask>, ApiError>,
) -> ApiResult<StatusCode> {
    let started = std::time::Instant::now();
    let req = match body {
        Ok(ApiJson(req)) => req,
        Err(refused) => return Err(judged_after_the_token(&state, &token, refused).await),
    };
    let tail = req.log_tail.map(|t| {
        t.chars()
            .rev()
            .take(4000)
            .collect::<String>()
            .chars()
            .rev()
            .collect::<String>()
    });
    // The token, the task's end, its requeue notice and the wake-up: one statement, shared
    // with the completions that arrive beside this one (`worker_writes`).
    let completed = crate::worker_writes::complete(
        &state,
        store::queue::Completion {
            token_hash: token.hash,
            task: id,
            outcome: req.outcome,
            message: req.message,
            log_tail: tail,
            failed_sha: req.failed_sha,
        },
    )
    .await?;
    completed.host.ok_or_else(unknown_worker_token)?;
    let owner = completed
        .owner
        .ok_or_else(|| ApiError::Conflict(format!("task {id} is not running on this host")))?;
    crate::metrics::observe_complete(started.elapsed());
    if let Some(watch) = owner.watch_id {
        // Analysing the series is not this request's work: the answer does not wait for it.
        let state = state.clone();
        tokio::spawn(async move { crate::watch::task_finished(&state, watch).await });
    }
    Ok(StatusCode::OK)
}

/// The answer to a body the API refused, for a caller whose token is not checked yet: 401
/// when no host holds the token, as everywhere else (a caller without a valid token learns
/// nothing from the answer to its body), else the refusal.
async fn judged_after_the_token(
    state: &AppState,
    token: &WorkerToken,
    refused: ApiError,
) -> ApiError {
    match store::hosts::authenticate(&state.db, &token.hash, crate::auth::SEEN_EVERY_SECS).await {
        Ok(Some(_)) => refused,
        Ok(None) => unknown_worker_token(),
        Err(e) => e.into(),
    }
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
