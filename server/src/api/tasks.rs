//! Tasks beyond claim-and-complete: what a task did (its runs with their environment, its
//! builds with their logs), and the two ways a worker gives a task back unfinished — a
//! hand-back on shutdown (no attempt counted) and the report of a restarted worker about the
//! task it lost (the attempt counts: the task may be what brought the host down).

use super::ApiJson;
use crate::auth::WorkerHost;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store;
use crate::store::tasks;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use perfbisect_wire::api::ErrorBody;
use perfbisect_wire::states::TaskState;
use perfbisect_wire::tasks::{TaskDetail, TaskSummary};
use perfbisect_wire::worker::{BuildReport, HandBack, Interrupted, InterruptedReply};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The server keeps this much of a build log (its end: where errors are).
const BUILD_LOG_BYTES: usize = 256 << 10;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_tasks))
        .routes(routes!(get_task))
        .routes(routes!(report_build))
        .routes(routes!(hand_back))
        .routes(routes!(interrupted))
}

#[derive(Deserialize, utoipa::IntoParams)]
struct TaskQuery {
    /// The bisect whose tasks to list.
    bisect: i64,
}

/// The tasks of a bisect, oldest first.
#[utoipa::path(get, path = "/api/v1/tasks", tag = "tasks", params(TaskQuery),
    responses((status = 200, body = Vec<TaskSummary>)))]
async fn list_tasks(
    State(state): State<AppState>,
    Query(q): Query<TaskQuery>,
) -> ApiResult<Json<Vec<TaskSummary>>> {
    Ok(Json(tasks::of_bisect(&state.db, q.bisect).await?))
}

/// One task with every run (metrics, environment, log) and every build (log) it produced.
#[utoipa::path(get, path = "/api/v1/tasks/{id}", tag = "tasks",
    params(("id" = i64, Path, description = "Task id")),
    responses((status = 200, body = TaskDetail), (status = 404, body = ErrorBody)))]
async fn get_task(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> ApiResult<Json<TaskDetail>> {
    let detail = tasks::detail(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no task with id {id}")))?;
    Ok(Json(detail))
}

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

/// Record a build (or a cache hit) of one of the task's commits, with its log.
#[utoipa::path(post, path = "/api/v1/worker/tasks/{id}/builds", tag = "workers", request_body = BuildReport,
    params(("id" = i64, Path, description = "Task id")),
    responses((status = 201, description = "Stored"), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("worker_token" = [])))]
async fn report_build(
    State(state): State<AppState>,
    host: WorkerHost,
    Path(id): Path<i64>,
    ApiJson(build): ApiJson<BuildReport>,
) -> ApiResult<StatusCode> {
    if !build.duration_secs.is_finite() || build.duration_secs < 0.0 {
        return Err(ApiError::bad(
            "duration_secs",
            "must be a non-negative number",
        ));
    }
    let stored = store::builds::insert_held(
        &state.db,
        &store::builds::NewBuild {
            task: id,
            host: host.host_id,
            sha: &build.sha,
            succeeded: build.succeeded,
            cached: build.cached,
            duration_secs: build.duration_secs,
            log: tail_bytes(&build.log, BUILD_LOG_BYTES),
        },
    )
    .await?;
    if !stored {
        return Err(ApiError::Conflict(format!(
            "task {id} is not running on this host, or does not measure {}",
            build.sha
        )));
    }
    Ok(StatusCode::CREATED)
}

/// Give a task back unfinished (the worker is shutting down). It is queued again at once,
/// without counting the attempt; runs already uploaded are kept and not run again.
#[utoipa::path(post, path = "/api/v1/worker/tasks/{id}/handback", tag = "workers", request_body = HandBack,
    params(("id" = i64, Path, description = "Task id")),
    responses((status = 200, description = "Queued again"), (status = 409, body = ErrorBody)),
    security(("worker_token" = [])))]
async fn hand_back(
    State(state): State<AppState>,
    host: WorkerHost,
    Path(id): Path<i64>,
    ApiJson(req): ApiJson<HandBack>,
) -> ApiResult<StatusCode> {
    let message = format!(
        "handed back by host {}: {}",
        host.host_id,
        req.message.as_deref().unwrap_or("worker shutting down")
    );
    let bisect = store::queue::hand_back(&state.db, id, host.host_id, &message).await?;
    let bisect = bisect
        .ok_or_else(|| ApiError::Conflict(format!("task {id} is not running on this host")))?;
    if let Some(bisect) = bisect {
        crate::store::events::record(
            &state.db,
            bisect,
            "handed_back",
            &format!("A worker handed task {id} back to the queue.\n{message}"),
        )
        .await?;
    }
    crate::queue::notify_queued(&state.db).await?;
    Ok(StatusCode::OK)
}

/// A restarted worker reports the task it was running when it stopped. If this host still
/// holds it, it is queued again now (the attempt counts) instead of waiting for its lease;
/// either way the interruption is recorded in the bisect's events.
#[utoipa::path(post, path = "/api/v1/worker/tasks/{id}/interrupted", tag = "workers", request_body = Interrupted,
    params(("id" = i64, Path, description = "Task id")),
    responses((status = 200, body = InterruptedReply), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("worker_token" = [])))]
async fn interrupted(
    State(state): State<AppState>,
    host: WorkerHost,
    Path(id): Path<i64>,
    ApiJson(req): ApiJson<Interrupted>,
) -> ApiResult<Json<InterruptedReply>> {
    let name = store::hosts::name(&state.db, host.host_id).await?;
    let requeued = store::queue::interrupt(
        &state.db,
        id,
        host.host_id,
        &name,
        req.message.as_deref().unwrap_or("worker restarted"),
    )
    .await?;
    let (bisect, task_state) = match &requeued {
        Some(at) => (at.bisect_id, at.state),
        None => {
            let at = store::queue::task_at(&state.db, id)
                .await?
                .ok_or_else(|| ApiError::NotFound(format!("no task with id {id}")))?;
            (at.bisect_id, at.state)
        }
    };
    // A task that ended (the worker died after completing it, before forgetting it) has no
    // interruption to tell; a task this host never held is not its to tell about.
    let held_last = match &requeued {
        Some(_) => true,
        None => store::queue::held_last(&state.db, id, host.host_id).await?,
    };
    if !held_last {
        return Err(ApiError::Conflict(format!(
            "task {id} was not held by this host last"
        )));
    }
    let ended = requeued.is_none() && !matches!(task_state, TaskState::Queued | TaskState::Running);
    if !ended && let Some(bisect) = bisect {
        let what = match &requeued {
            Some(_) => format!("now {task_state}"),
            None => "already handed back to the queue".to_string(),
        };
        crate::store::events::record(
            &state.db,
            bisect,
            "interrupted",
            &format!(
                "A worker restarted: task {id} was interrupted on host {name}; {what}.\n{}",
                req.message.as_deref().unwrap_or("worker restarted")
            ),
        )
        .await?;
    }
    if requeued.is_some() {
        crate::queue::notify_queued(&state.db).await?;
        if let Some(bisect) = bisect {
            crate::store::wakeups::wake(
                &state.db,
                bisect,
                crate::store::wakeups::Reason::TaskEnded,
            )
            .await?;
        }
    }
    Ok(Json(InterruptedReply {
        requeued: requeued.is_some(),
    }))
}
