//! The worker protocol: register, claim (long poll), heartbeat, upload runs, complete.

use super::ApiJson;
use crate::auth::{Enrollment, WorkerHost, hash_token, new_token};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use perfbisect_wire::JobSpec;
use perfbisect_wire::api::ErrorBody;
use perfbisect_wire::worker::{
    ClaimRequest, CompleteTask, HeartbeatReply, MachineInfo, RegisterWorker, RunUpload,
    TaskAssignment, TaskOutcome, WorkerRegistered,
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
    let host_id: Option<i64> = sqlx::query_scalar(
        "INSERT INTO hosts (name, host_group, machine, token_hash) VALUES ($1, $2, $3, $4)
         ON CONFLICT (name) DO UPDATE SET host_group = EXCLUDED.host_group, machine = EXCLUDED.machine,
             token_hash = EXCLUDED.token_hash, last_seen_at = now()
         WHERE $5 OR hosts.token_hash = $6
         RETURNING id",
    )
    .bind(&req.name)
    .bind(&req.host_group)
    .bind(serde_json::to_value(&req.machine).map_err(anyhow::Error::from)?)
    .bind(hash_token(&token))
    .bind(enrolled.operator)
    .bind(req.previous_token.as_deref().map(hash_token))
    .fetch_optional(&state.db)
    .await?;
    let host_id = host_id.ok_or_else(|| {
        ApiError::Conflict(format!(
            "worker name `{}` is registered by another worker: register again with its current token \
             (`previous_token`, kept in the worker's work directory), with an operator's token, or under another name",
            req.name
        ))
    })?;
    // A host that registers again has restarted: whatever it was running is not coming back.
    let requeued = sqlx::query(
        "UPDATE tasks SET state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
                host_id = NULL, lease_expires_at = NULL,
                message = 'host ' || $1 || ' restarted during the task'
         WHERE host_id = $2 AND state = 'running'",
    )
    .bind(&req.name)
    .bind(host_id)
    .execute(&state.db)
    .await?;
    if requeued.rows_affected() > 0 {
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
    host: WorkerHost,
    ApiJson(req): ApiJson<ClaimRequest>,
) -> ApiResult<Response> {
    let wait = Duration::from_secs(req.wait_secs.min(MAX_WAIT_SECS));
    // A quarantined or drained host gets nothing: it waits out its poll and asks again.
    if !super::inventory::may_claim(&state.db, host.host_id).await? {
        tokio::time::sleep(wait).await;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let Some(task) = crate::queue::claim_wait(&state, host.host_id, &host.host_group, wait).await?
    else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    // A task belongs to a bisect or to a watch (whose first metric every run must carry).
    let (url, spec, hash, metric): (String, serde_json::Value, String, String) = sqlx::query_as(
        "SELECT r.url, j.spec, j.hash, o.metric FROM (
             SELECT repository_id, job_spec_id, metric FROM bisects WHERE id = $1
             UNION ALL
             SELECT repository_id, job_spec_id, metrics -> 0 ->> 'name' FROM watches WHERE id = $2) o
         JOIN repositories r ON r.id = o.repository_id JOIN job_specs j ON j.id = o.job_spec_id",
    )
    .bind(task.bisect_id)
    .bind(task.watch_id)
    .fetch_one(&state.db)
    .await?;
    let job: JobSpec = serde_json::from_value(spec).map_err(anyhow::Error::from)?;
    // A task given back or interrupted keeps its stored runs; the new holder runs the rest.
    let done: Vec<i32> =
        sqlx::query_scalar("SELECT iteration FROM runs WHERE task_id = $1 ORDER BY iteration")
            .bind(task.id)
            .fetch_all(&state.db)
            .await?;
    tracing::info!(
        task = task.id,
        bisect = task.bisect_id,
        host = host.host_id,
        sha = task.sha,
        "task claimed"
    );
    Ok(Json(TaskAssignment {
        task_id: task.id,
        bisect_id: task.bisect_id,
        repository_url: url,
        sha: task.sha,
        pair_sha: task.pair_sha,
        job,
        job_hash: hash,
        metric,
        runs: task.runs as u32,
        done_iterations: done.into_iter().map(|i| i as u32).collect(),
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
    sqlx::query_scalar(
        "UPDATE tasks SET lease_expires_at = now() + make_interval(secs => $3)
         WHERE id = $1 AND host_id = $2 AND state = 'running' RETURNING lease_expires_at",
    )
    .bind(task)
    .bind(host)
    .bind(state.lease.as_secs_f64())
    .fetch_optional(db)
    .await
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

#[derive(sqlx::FromRow)]
struct UploadTarget {
    bisect_id: Option<i64>,
    task_sha: String,
    pair_sha: Option<String>,
    runs: i32,
    task_state: String,
    holder: Option<i64>,
    metric: String,
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
    let task: Option<UploadTarget> = sqlx::query_as(
        "SELECT t.bisect_id, t.sha AS task_sha, t.pair_sha, t.runs, t.state AS task_state,
                t.host_id AS holder, coalesce(b.metric, w.metrics -> 0 ->> 'name') AS metric FROM tasks t
         LEFT JOIN bisects b ON b.id = t.bisect_id LEFT JOIN watches w ON w.id = t.watch_id
         WHERE t.id = $1",
    )
    .bind(id)
    .fetch_optional(&state.db)
    .await?;
    let UploadTarget {
        bisect_id,
        task_sha,
        pair_sha,
        runs,
        task_state,
        holder,
        metric,
    } = task.ok_or_else(|| ApiError::NotFound(format!("no task with id {id}")))?;
    if task_state != "running" || holder != Some(host.host_id) {
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
    // renewed lease and the wake-up commit together: one commit (one WAL flush) per upload.
    let mut tx = state.db.begin().await?;
    let inserted = sqlx::query(
        "INSERT INTO runs (task_id, bisect_id, sha, host_id, iteration, completed, metrics, log, started_at, finished_at, environment)
         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11
         FROM (SELECT 1 FROM tasks WHERE id = $1 AND host_id = $4 AND state = 'running' FOR SHARE) AS held
         ON CONFLICT (task_id, iteration) DO NOTHING",
    )
    .bind(id)
    .bind(bisect_id)
    .bind(&sha)
    .bind(host.host_id)
    .bind(run.iteration as i32)
    .bind(run.completed)
    .bind(serde_json::to_value(&run.metrics).map_err(anyhow::Error::from)?)
    .bind(&run.log)
    .bind(run.started_at)
    .bind(run.finished_at)
    .bind(serde_json::to_value(&run.environment).map_err(anyhow::Error::from)?)
    .execute(&mut *tx)
    .await?;
    let renewed = renew(&mut *tx, &state, id, host.host_id).await?;
    if inserted.rows_affected() == 0 && renewed.is_none() {
        return Err(ApiError::Conflict(format!(
            "task {id} is not running on this host any more"
        )));
    }
    // New evidence: the scheduler decides again, off this request's path.
    if inserted.rows_affected() > 0
        && let Some(bisect_id) = bisect_id
    {
        crate::store::wakeups::wake(
            &mut *tx,
            bisect_id,
            crate::store::wakeups::Reason::RunStored,
        )
        .await?;
    }
    tx.commit().await?;
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
    let new_state = match req.outcome {
        TaskOutcome::Done => "'done'",
        TaskOutcome::BuildFailed => "'build_failed'",
        TaskOutcome::Error => "CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END",
    };
    // The task's end, its requeue notice and the wake-up commit together.
    let mut tx = state.db.begin().await?;
    let owner: Option<(Option<i64>, Option<i64>)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE tasks SET state = {new_state}, message = $3, log_tail = $4, failed_sha = $5,
             finished_at = CASE WHEN {new_state} = 'queued' THEN NULL ELSE now() END,
             host_id = CASE WHEN {new_state} = 'queued' THEN NULL ELSE host_id END
         WHERE id = $1 AND host_id = $2 AND state = 'running' RETURNING bisect_id, watch_id"
    )))
    .bind(id)
    .bind(host.host_id)
    .bind(&req.message)
    .bind(&tail)
    .bind(&req.failed_sha)
    .fetch_optional(&mut *tx)
    .await?;
    let (bisect, watch) = owner
        .ok_or_else(|| ApiError::Conflict(format!("task {id} is not running on this host")))?;
    if req.outcome == TaskOutcome::Error {
        crate::queue::notify_queued_in(&mut *tx, &host.host_group, 1).await?;
    }
    if let Some(bisect) = bisect {
        crate::store::wakeups::wake(&mut *tx, bisect, crate::store::wakeups::Reason::TaskEnded)
            .await?;
    }
    tx.commit().await?;
    crate::metrics::observe_complete(started.elapsed());
    if let Some(watch) = watch {
        // Analysing the series is not this request's work: the answer does not wait for it.
        let state = state.clone();
        tokio::spawn(async move { crate::watch::task_finished(&state, watch).await });
    }
    Ok(StatusCode::OK)
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema, sqlx::FromRow)]
pub struct Host {
    id: i64,
    name: String,
    host_group: String,
    #[sqlx(json)]
    machine: MachineInfo,
    last_seen_at: DateTime<Utc>,
    /// The task it is running, if any.
    current_task: Option<i64>,
}

/// Every registered host with its machine description, last contact and current task.
#[utoipa::path(get, path = "/api/v1/hosts", tag = "workers", responses((status = 200, body = Vec<Host>)))]
async fn list_hosts(State(state): State<AppState>) -> ApiResult<Json<Vec<Host>>> {
    let hosts: Vec<Host> = sqlx::query_as(
        "SELECT h.id, h.name, h.host_group, h.machine, h.last_seen_at,
                (SELECT t.id FROM tasks t WHERE t.host_id = h.id AND t.state = 'running' LIMIT 1) AS current_task
         FROM hosts h ORDER BY h.host_group, h.name",
    )
    .fetch_all(&state.db)
    .await?;
    Ok(Json(hosts))
}
