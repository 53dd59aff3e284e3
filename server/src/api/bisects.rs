//! Submitting (through `submission`), reading, listing and cancelling bisects.

use super::ApiJson;
use crate::auth::ApiUser;
use crate::bisect_view;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store::summaries;
use crate::submission;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use perfbisect_wire::api::{Bisect, BisectList, BisectSummary, ErrorBody, SubmitBisect};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(submit_bisect, list_bisects))
        .routes(routes!(get_bisect))
        .routes(routes!(cancel_bisect))
        .routes(routes!(bisect_events))
}

/// Submit a bisect. The range is resolved and the candidate set stored before this answers
/// (201), unless the repository is still being mirrored or its fetch takes longer than a few
/// seconds: then the bisect is stored as `fetching` (202) and resolved once the fetch is done;
/// a revision that does not exist then fails it with the reason.
#[utoipa::path(post, path = "/api/v1/bisects", tag = "bisects", request_body = SubmitBisect,
    responses((status = 201, body = Bisect), (status = 202, body = Bisect), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 422, body = ErrorBody)),
    security(("api_token" = [])))]
async fn submit_bisect(
    State(state): State<AppState>,
    user: ApiUser,
    ApiJson(req): ApiJson<SubmitBisect>,
) -> ApiResult<(StatusCode, Json<Bisect>)> {
    let id = submission::submit(&state, Some(user.token_id), &req).await?;
    let bisect = bisect_view::load(&state, id).await?;
    // 202 while it waits for its repository's fetch (status `fetching`).
    let status = if bisect.status == "fetching" {
        StatusCode::ACCEPTED
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(bisect)))
}

/// One bisect: status, measured commits with n/mean/stddev, remaining candidates, culprit.
#[utoipa::path(get, path = "/api/v1/bisects/{id}", tag = "bisects",
    params(("id" = i64, Path, description = "Bisect id")),
    responses((status = 200, body = Bisect), (status = 404, body = ErrorBody)))]
async fn get_bisect(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<Json<Bisect>> {
    Ok(Json(bisect_view::load(&state, id).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct ListQuery {
    /// Only bisects in this status.
    status: Option<String>,
    /// Only bisects of this repository (name).
    repository: Option<String>,
    testcase: Option<String>,
    metric: Option<String>,
    /// Page size (default 50, at most 500).
    limit: Option<i64>,
    offset: Option<i64>,
}

/// Bisects, newest first, with filters.
#[utoipa::path(get, path = "/api/v1/bisects", tag = "bisects", params(ListQuery),
    responses((status = 200, body = BisectList), (status = 400, body = ErrorBody)))]
async fn list_bisects(
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<BisectList>> {
    if let Some(s) = &q.status
        && !perfbisect_wire::api::STATUSES.contains(&s.as_str())
    {
        return Err(ApiError::bad(
            "status",
            format!(
                "`{s}` is not one of {}",
                perfbisect_wire::api::STATUSES.join(", ")
            ),
        ));
    }
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::bad("limit", "must be between 1 and 500"));
    }
    let offset = q.offset.unwrap_or(0);
    if offset < 0 {
        return Err(ApiError::bad("offset", "must not be negative"));
    }
    let filter = summaries::ListFilter {
        status: q.status.as_deref(),
        repository: q.repository.as_deref(),
        testcase: q.testcase.as_deref(),
        metric: q.metric.as_deref(),
    };
    let version = state.lists.version(&state.db).await?;
    let page = (state.lists)
        .page(&state.db, version, filter, limit, offset)
        .await?;
    let mut bisects = Vec::with_capacity(page.rows.len());
    for b in &page.rows {
        let change = bisect_view::summary_change(&state, b).await?;
        bisects.push(BisectSummary {
            change_pct: change.as_ref().map(|c| c.pct),
            change_kind: change.map(|c| c.kind),
            id: b.id,
            repository: b.repository.clone(),
            good: b.good_rev.clone(),
            bad: b.bad_rev.clone(),
            metric: b.metric.clone(),
            testcase: b.testcase.clone(),
            status: b.status.as_str().to_string(),
            culprit: b.culprit_sha.clone(),
            created_at: b.created_at,
        });
    }
    Ok(Json(BisectList {
        bisects,
        total: page.total,
    }))
}

/// Cancel a bisect: queued tasks are dropped, running ones are told on their next heartbeat.
#[utoipa::path(post, path = "/api/v1/bisects/{id}/cancel", tag = "bisects",
    params(("id" = i64, Path, description = "Bisect id")),
    responses((status = 200, body = Bisect), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 409, body = ErrorBody)),
    security(("api_token" = [])))]
async fn cancel_bisect(
    State(state): State<AppState>,
    _user: ApiUser,
    Path(id): Path<i64>,
) -> ApiResult<Json<Bisect>> {
    let mut tx = state.db.begin().await?;
    // Waits for an advance of the bisect in progress, so it cannot undo the cancel; the row
    // lock does not block run inserts (their key-share lock).
    crate::store::wakeups::lock_bisect(&mut tx, id).await?;
    let status = crate::store::bisects::lock_status(&mut tx, id).await?;
    let status = status.ok_or_else(|| ApiError::NotFound(format!("no bisect with id {id}")))?;
    if status.is_final() {
        return Err(ApiError::Conflict(format!(
            "bisect {id} has already ended ({status})"
        )));
    }
    crate::scheduler::finish(
        &mut tx,
        id,
        perfbisect_wire::states::BisectStatus::Cancelled,
        "cancelled by the user",
        None,
    )
    .await?;
    tx.commit().await?;
    Ok(Json(bisect_view::load(&state, id).await?))
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Event {
    at: DateTime<Utc>,
    kind: String,
    message: String,
}

/// The bisect's story: every decision, fault and status change, oldest first.
#[utoipa::path(get, path = "/api/v1/bisects/{id}/events", tag = "bisects",
    params(("id" = i64, Path, description = "Bisect id")),
    responses((status = 200, body = Vec<Event>)))]
async fn bisect_events(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> ApiResult<Json<Vec<Event>>> {
    let lines = crate::store::events::of_bisect(&state.db, id).await?;
    Ok(Json(
        lines
            .into_iter()
            .map(|l| Event {
                at: l.at,
                kind: l.kind,
                message: l.message,
            })
            .collect(),
    ))
}
