//! Submitting, reading, listing and cancelling bisects.

use super::ApiJson;
use crate::auth::ApiUser;
use crate::bisect_view;
use crate::error::{ApiError, ApiResult};
use crate::git::{self, RangeError};
use crate::state::AppState;
use crate::store::summaries;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use perfbisect_wire::api::{Bisect, BisectList, BisectSummary, ErrorBody, SubmitBisect};
use perfbisect_wire::{JobSpec, JobSpecError};
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

fn valid_metric(s: &str) -> bool {
    !s.is_empty() && s.len() <= 200 && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Checks everything that needs no database, and parses the job spec.
fn validate(req: &SubmitBisect) -> ApiResult<JobSpec> {
    if req.repository.trim().is_empty() {
        return Err(ApiError::bad(
            "repository",
            "must name a registered repository",
        ));
    }
    if req.good.trim().is_empty() {
        return Err(ApiError::bad(
            "good",
            "must be a revision (sha, branch or tag)",
        ));
    }
    if req.bad.trim().is_empty() {
        return Err(ApiError::bad(
            "bad",
            "must be a revision (sha, branch or tag)",
        ));
    }
    if !valid_metric(&req.metric) {
        return Err(ApiError::bad(
            "metric",
            "must be a metric name such as `fio.write_iops` (no spaces)",
        ));
    }
    if let Some(d) = &req.direction
        && d != "increase"
        && d != "decrease"
    {
        return Err(ApiError::bad(
            "direction",
            format!("`{d}` is not `increase` or `decrease`"),
        ));
    }
    if let Some(m) = req.magnitude_pct
        && !(m.is_finite() && m > 0.0 && m < 10_000.0)
    {
        return Err(ApiError::bad(
            "magnitude_pct",
            "must be a positive percentage",
        ));
    }
    if let Some(c) = req.confidence
        && !(0.5..=0.9999).contains(&c)
    {
        return Err(ApiError::bad(
            "confidence",
            "must be between 0.5 and 0.9999",
        ));
    }
    if let Some(m) = req.max_runs
        && !(2..=1_000_000).contains(&m)
    {
        return Err(ApiError::bad("max_runs", "must be between 2 and 1000000"));
    }
    if req.notify.len() > crate::mail_policy::MAX_RECIPIENTS {
        return Err(ApiError::unprocessable(
            "notify",
            format!(
                "at most {} addresses (use a mailing list for more)",
                crate::mail_policy::MAX_RECIPIENTS
            ),
        ));
    }
    for (i, addr) in req.notify.iter().enumerate() {
        if addr.len() > crate::mail_policy::MAX_ADDRESS_LEN {
            return Err(ApiError::unprocessable(
                &format!("notify[{i}]"),
                format!(
                    "longer than {} characters",
                    crate::mail_policy::MAX_ADDRESS_LEN
                ),
            ));
        }
        let ok = addr
            .split_once('@')
            .is_some_and(|(l, d)| !l.is_empty() && d.contains('.') && !addr.contains(' '));
        if !ok {
            return Err(ApiError::bad(
                &format!("notify[{i}]"),
                format!("`{addr}` is not an email address"),
            ));
        }
    }
    JobSpec::from_yaml(&req.job).map_err(|e| match &e {
        JobSpecError::Syntax(_) => ApiError::bad("job", e.to_string()),
        JobSpecError::Invalid { key, .. } => ApiError::bad(&format!("job.{key}"), e.to_string()),
    })
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
    let id = submit(&state, Some(user.token_id), &req).await?;
    let bisect = bisect_view::load(&state, id).await?;
    // 202 while it waits for its repository's fetch (status `fetching`).
    let status = if bisect.status == "fetching" {
        StatusCode::ACCEPTED
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(bisect)))
}

/// Validates, resolves and stores a bisect, then advances it once: what `POST
/// /api/v1/bisects` does, also called by watches when a change opens a bisect.
pub(crate) async fn submit(
    state: &AppState,
    submitted_by: Option<i64>,
    req: &SubmitBisect,
) -> ApiResult<i64> {
    let spec = validate(req)?;
    super::kconfigs::check_job(state, &spec).await?;
    super::metric_names::check_submitted(state, &spec.hash(), &req.metric).await?;
    let repo: Option<(i64, String, String, Option<String>, i64)> = sqlx::query_as(
        "SELECT id, url, state, fetch_error, fetch_requested FROM repositories WHERE name = $1",
    )
    .bind(&req.repository)
    .fetch_optional(&state.db)
    .await?;
    let (repo_id, url, repo_state, fetch_error, requested) = repo.ok_or_else(|| {
        ApiError::unprocessable(
            "repository",
            format!("no repository named `{}` is registered", req.repository),
        )
    })?;
    // A repository registered under an older, looser policy is not fetched again.
    state
        .mirrors
        .check_url_for_request(&url, "repository")
        .await?;
    let phase = std::time::Instant::now();
    let resolution = match repo_state.as_str() {
        "failed" => {
            return Err(ApiError::unprocessable(
                "repository",
                format!(
                    "repository `{}` could not be mirrored ({}); register it again once the \
                     remote or the credentials are fixed",
                    req.repository,
                    fetch_error.as_deref().unwrap_or("no error recorded")
                ),
            ));
        }
        // Its first fetch is under way: the bisect waits for it.
        "mirroring" => crate::fetcher::Resolution::Waiting,
        _ => {
            crate::fetcher::resolve_for_submit(
                state,
                repo_id,
                &url,
                &req.good,
                &req.bad,
                req.use_merge_base,
            )
            .await
        }
    };
    let range = match resolution {
        crate::fetcher::Resolution::Range(range) => range,
        crate::fetcher::Resolution::Waiting => {
            let generation = if repo_state == "mirroring" {
                requested
            } else {
                crate::store::fetches::request(&state.db, repo_id).await?
            };
            let id = store_waiting(state, submitted_by, req, &spec, repo_id, generation).await?;
            crate::fetcher::spawn(state, repo_id, generation);
            return Ok(id);
        }
    };
    tracing::info!(
        range_ms = phase.elapsed().as_millis() as u64,
        "submit: range resolved"
    );
    let range = range.map_err(|e| match &e {
        RangeError::UnknownRevision { field, .. } => ApiError::unprocessable(field, e.to_string()),
        RangeError::Unrelated { .. } | RangeError::NotAncestor { .. } => {
            ApiError::unprocessable("good", e.to_string())
        }
        RangeError::Empty { .. } => ApiError::unprocessable("bad", e.to_string()),
        RangeError::Git(_) => ApiError::unprocessable("repository", e.to_string()),
    })?;

    // The graph is built while the range is in memory, so the first advance need not
    // read the candidates back.
    let graph = {
        let good = range.good.clone();
        let candidates: Vec<(String, Vec<usize>, bool)> = range
            .candidates
            .iter()
            .map(|c| (c.sha.clone(), c.parents.clone(), c.first_parent_outside))
            .collect();
        tokio::task::spawn_blocking(move || crate::graphs::LoadedGraph::build(good, candidates))
            .await
            .map_err(|e| ApiError::Internal(e.into()))?
            .map_err(ApiError::Internal)?
    };
    let job_id = ensure_job(state, req, &spec).await?;
    let mut tx = state.db.begin().await?;
    let id = insert_bisect(
        &mut tx,
        req,
        repo_id,
        job_id,
        submitted_by,
        Ok(&range),
        crate::budget::initial(req.max_runs, state.max_runs_ceiling),
    )
    .await?;
    let stored = std::time::Instant::now();
    crate::store::candidates::insert(&mut tx, id, &range).await?;
    let story = crate::fetcher::submitted_story(&range, &req.good, &req.bad);
    crate::store::events::record(&mut *tx, id, "submitted", &story).await?;
    // Committed with the bisect: should the first advance below fail, the scheduler retries.
    crate::store::wakeups::wake(&mut *tx, id, crate::store::wakeups::Reason::Submitted).await?;
    crate::store::wakeups::wake_group_queued(&mut *tx, &spec.tbox_group, id).await?;
    tx.commit().await?;
    state.graphs.insert(id, std::sync::Arc::new(graph));
    tracing::info!(
        bisect = id,
        candidates = range.candidates.len(),
        "bisect submitted"
    );
    let advanced = std::time::Instant::now();
    if let Err(e) = crate::scheduler::advance(state, id).await {
        tracing::error!(bisect = id, error = ?e, "first advance");
    }
    tracing::info!(
        bisect = id,
        total_ms = phase.elapsed().as_millis() as u64,
        store_ms = (advanced - stored).as_millis() as u64,
        first_advance_ms = advanced.elapsed().as_millis() as u64,
        "submit: timings"
    );
    Ok(id)
}

/// The job spec's row. Outside the bisect's transaction, and without taking the row when it
/// exists: submits of the same job do not queue behind each other.
async fn ensure_job(state: &AppState, req: &SubmitBisect, spec: &JobSpec) -> ApiResult<i64> {
    Ok(crate::store::jobs::ensure(
        &state.db,
        &spec.hash(),
        &serde_json::to_value(spec).map_err(anyhow::Error::from)?,
        &req.job,
        &spec.testcase,
        &spec.tbox_group,
    )
    .await?)
}

/// The bisect's row: with its resolved range (`queued`), or waiting for the fetch of a
/// generation (`fetching`, its shas empty until resolved).
async fn insert_bisect(
    tx: &mut sqlx::PgConnection,
    req: &SubmitBisect,
    repo_id: i64,
    job_id: i64,
    submitted_by: Option<i64>,
    range: Result<&git::Range, i64>,
    max_runs: u32,
) -> sqlx::Result<i64> {
    let (good, bad, candidates, generation, status) = match range {
        Ok(r) => (
            r.good.as_str(),
            r.bad.as_str(),
            Some(r.candidates.len() as i32),
            None,
            "queued",
        ),
        Err(generation) => ("", "", None, Some(generation), "fetching"),
    };
    sqlx::query_scalar(
        "INSERT INTO bisects (repository_id, job_spec_id, good_rev, bad_rev, good_sha, bad_sha, metric, direction,
                              magnitude_pct, confidence, max_runs, notify, submitted_by, first_parent,
                              candidates_total, use_merge_base, fetch_generation, status)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) RETURNING id",
    )
    .bind(repo_id)
    .bind(job_id)
    .bind(&req.good)
    .bind(&req.bad)
    .bind(good)
    .bind(bad)
    .bind(&req.metric)
    .bind(&req.direction)
    .bind(req.magnitude_pct)
    .bind(req.confidence.unwrap_or(0.99))
    .bind(max_runs as i32)
    .bind(serde_json::json!(req.notify))
    .bind(submitted_by)
    .bind(req.first_parent)
    .bind(candidates)
    .bind(req.use_merge_base)
    .bind(generation)
    .bind(status)
    .fetch_one(tx)
    .await
}

/// Stores a bisect that waits for its repository's fetch (`fetching`, no range yet): the
/// fetch job resolves it (`fetcher`).
async fn store_waiting(
    state: &AppState,
    submitted_by: Option<i64>,
    req: &SubmitBisect,
    spec: &JobSpec,
    repo_id: i64,
    generation: i64,
) -> ApiResult<i64> {
    let job_id = ensure_job(state, req, spec).await?;
    let mut tx = state.db.begin().await?;
    let id = insert_bisect(
        &mut tx,
        req,
        repo_id,
        job_id,
        submitted_by,
        Err(generation),
        crate::budget::initial(req.max_runs, state.max_runs_ceiling),
    )
    .await?;
    crate::store::events::record(
        &mut *tx,
        id,
        "fetching",
        &format!(
            "Waiting for the repository's fetch; the range {}..{} is resolved once it is done.",
            req.good, req.bad
        ),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(
        bisect = id,
        repository = repo_id,
        generation,
        "bisect waits for a fetch"
    );
    Ok(id)
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
    let rows = summaries::list(&state.db, filter, limit, offset).await?;
    let total = summaries::count(&state.db, filter).await?;
    let mut changes = Vec::with_capacity(rows.len());
    for b in &rows {
        changes.push(bisect_view::summary_change(&state, b).await?);
    }
    let bisects = rows
        .into_iter()
        .zip(changes)
        .map(|(b, change)| BisectSummary {
            change_pct: change.as_ref().map(|c| c.pct),
            change_kind: change.map(|c| c.kind),
            id: b.id,
            repository: b.repository,
            good: b.good_rev,
            bad: b.bad_rev,
            metric: b.metric,
            testcase: b.testcase,
            status: b.status,
            culprit: b.culprit_sha,
            created_at: b.created_at,
        })
        .collect();
    Ok(Json(BisectList { bisects, total }))
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
    let status: Option<String> =
        sqlx::query_scalar("SELECT status FROM bisects WHERE id = $1 FOR NO KEY UPDATE")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    let status = status.ok_or_else(|| ApiError::NotFound(format!("no bisect with id {id}")))?;
    if perfbisect_wire::api::status_is_final(&status) {
        return Err(ApiError::Conflict(format!(
            "bisect {id} has already ended ({status})"
        )));
    }
    crate::scheduler::finish(&mut tx, id, "cancelled", "cancelled by the user", None).await?;
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
    let rows: Vec<(DateTime<Utc>, String, String)> = sqlx::query_as(
        "SELECT at, kind, message FROM bisect_events WHERE bisect_id = $1 ORDER BY id",
    )
    .bind(id)
    .fetch_all(&state.db)
    .await?;
    Ok(Json(
        rows.into_iter()
            .map(|(at, kind, message)| Event { at, kind, message })
            .collect(),
    ))
}
