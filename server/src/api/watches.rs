//! Watches: create, change, list; the push webhook; series and change points.

use super::ApiJson;
use crate::auth::ApiUser;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store;
use crate::watch::view::{load_changes, load_series, load_watch, load_watches};
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use perfbisect_wire::api::ErrorBody;
use perfbisect_wire::watch::{
    ChangePoint, CreateWatch, PollResult, PushEvent, Series, UpdateWatch, Watch, WatchMetric,
};
use perfbisect_wire::{JobSpec, JobSpecError};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_watch, list_watches))
        .routes(routes!(get_watch, update_watch))
        .routes(routes!(push_webhook))
        .routes(routes!(watch_series))
        .routes(routes!(watch_changes))
        .routes(routes!(list_changes))
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

fn check_branch(b: &str) -> ApiResult<()> {
    if b.is_empty() || b.len() > 200 || b.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ApiError::bad(
            "branch",
            "must be a branch name or a glob over branch names (`main`, `release-*`)",
        ));
    }
    Ok(())
}

fn check_metrics(metrics: &[WatchMetric]) -> ApiResult<()> {
    if metrics.is_empty() {
        return Err(ApiError::bad("metrics", "must name at least one metric"));
    }
    for (i, m) in metrics.iter().enumerate() {
        if m.name.is_empty()
            || m.name.len() > 200
            || m.name.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(ApiError::bad(
                &format!("metrics[{i}].name"),
                "must be a metric name such as `fio.write_iops` (no spaces)",
            ));
        }
        if !["increase", "decrease", "either"].contains(&m.direction.as_str()) {
            return Err(ApiError::bad(
                &format!("metrics[{i}].direction"),
                format!(
                    "`{}` is not `increase`, `decrease` or `either`",
                    m.direction
                ),
            ));
        }
        if !(m.threshold_pct.is_finite() && (0.0..1000.0).contains(&m.threshold_pct)) {
            return Err(ApiError::bad(
                &format!("metrics[{i}].threshold_pct"),
                "must be a percentage between 0 and 1000",
            ));
        }
        if metrics[..i].iter().any(|o| o.name == m.name) {
            return Err(ApiError::bad(
                &format!("metrics[{i}].name"),
                format!("`{}` is listed twice", m.name),
            ));
        }
    }
    Ok(())
}

fn check_recipients(recipients: &[String]) -> ApiResult<()> {
    for (i, addr) in recipients.iter().enumerate() {
        let ok = addr
            .split_once('@')
            .is_some_and(|(l, d)| !l.is_empty() && d.contains('.') && !addr.contains(' '));
        if !ok {
            return Err(ApiError::bad(
                &format!("recipients[{i}]"),
                format!("`{addr}` is not an email address"),
            ));
        }
    }
    Ok(())
}

fn check_range(field: &str, value: Option<u32>, lo: u32, hi: u32) -> ApiResult<()> {
    match value {
        Some(v) if !(lo..=hi).contains(&v) => Err(ApiError::bad(
            field,
            format!("must be between {lo} and {hi}"),
        )),
        _ => Ok(()),
    }
}

fn check_host_group(g: &Option<String>) -> ApiResult<()> {
    match g {
        Some(g) if !valid_name(g) => Err(ApiError::bad(
            "host_group",
            "must be 1-100 characters of letters, digits, '-', '_', '.'",
        )),
        _ => Ok(()),
    }
}

/// Create a watch: the server polls the branch, measures every new head, detects changes
/// and bisects them.
#[utoipa::path(post, path = "/api/v1/watches", tag = "watches", request_body = CreateWatch,
    responses((status = 201, body = Watch), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)),
    security(("api_token" = [])))]
async fn create_watch(
    State(state): State<AppState>,
    user: ApiUser,
    ApiJson(req): ApiJson<CreateWatch>,
) -> ApiResult<(StatusCode, Json<Watch>)> {
    if !valid_name(&req.name) {
        return Err(ApiError::bad(
            "name",
            "must be 1-100 characters of letters, digits, '-', '_', '.'",
        ));
    }
    check_branch(&req.branch)?;
    check_metrics(&req.metrics)?;
    check_recipients(&req.recipients)?;
    check_host_group(&req.host_group)?;
    check_range("cadence_secs", req.cadence_secs, 1, 7 * 86_400)?;
    check_range("runs_per_head", req.runs_per_head, 1, 100)?;
    check_range("sample_commits", req.sample_commits, 0, 100)?;
    check_range("backfill", req.backfill, 0, 1000)?;
    let spec = JobSpec::from_yaml(&req.job).map_err(|e| match &e {
        JobSpecError::Syntax(_) => ApiError::bad("job", e.to_string()),
        JobSpecError::Invalid { key, .. } => ApiError::bad(&format!("job.{key}"), e.to_string()),
    })?;
    crate::submission::check_kconfig(&state, &spec).await?;
    let repo = store::repositories::id_by_name(&state.db, &req.repository).await?;
    let repo_id = repo.ok_or_else(|| {
        ApiError::unprocessable(
            "repository",
            format!("no repository named `{}` is registered", req.repository),
        )
    })?;
    let mut tx = state.db.begin().await?;
    let job_id = store::jobs::ensure_in(
        &mut tx,
        &spec.hash(),
        &serde_json::to_value(&spec).map_err(anyhow::Error::from)?,
        &req.job,
        &spec.testcase,
        &spec.tbox_group,
    )
    .await?;
    let id = store::watches::create(
        &mut tx,
        &store::watches::NewWatch {
            name: &req.name,
            repository_id: repo_id,
            ref_pattern: &req.branch,
            job_spec_id: job_id,
            metrics: serde_json::to_value(&req.metrics).map_err(anyhow::Error::from)?,
            host_group: req.host_group.as_deref().unwrap_or(&spec.tbox_group),
            cadence_secs: req.cadence_secs.unwrap_or(300) as i32,
            runs_per_head: req.runs_per_head.unwrap_or(5) as i32,
            sample_commits: req.sample_commits.unwrap_or(0) as i32,
            backfill: req.backfill.unwrap_or(0) as i32,
            recipients: serde_json::json!(req.recipients),
            created_by: user.token_id,
        },
    )
    .await?;
    let id = id.ok_or_else(|| {
        ApiError::Conflict(format!("a watch named `{}` already exists", req.name))
    })?;
    tx.commit().await?;
    tracing::info!(watch = id, name = req.name, "watch created");
    Ok((StatusCode::CREATED, Json(load_watch(&state, id).await?)))
}

/// Change a watch; fields left out stay as they are. Its series and changes are kept.
#[utoipa::path(patch, path = "/api/v1/watches/{id}", tag = "watches", request_body = UpdateWatch,
    params(("id" = i64, Path, description = "Watch id")),
    responses((status = 200, body = Watch), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)),
    security(("api_token" = [])))]
async fn update_watch(
    State(state): State<AppState>,
    _user: ApiUser,
    Path(id): Path<i64>,
    ApiJson(req): ApiJson<UpdateWatch>,
) -> ApiResult<Json<Watch>> {
    if let Some(b) = &req.branch {
        check_branch(b)?;
    }
    if let Some(m) = &req.metrics {
        check_metrics(m)?;
    }
    if let Some(r) = &req.recipients {
        check_recipients(r)?;
    }
    check_host_group(&req.host_group)?;
    check_range("cadence_secs", req.cadence_secs, 1, 7 * 86_400)?;
    check_range("runs_per_head", req.runs_per_head, 1, 100)?;
    check_range("sample_commits", req.sample_commits, 0, 100)?;
    let metrics = match &req.metrics {
        Some(m) => Some(serde_json::to_value(m).map_err(anyhow::Error::from)?),
        None => None,
    };
    let updated = store::watches::update(
        &state.db,
        id,
        &store::watches::Change {
            ref_pattern: req.branch.as_deref(),
            metrics,
            host_group: req.host_group.as_deref(),
            cadence_secs: req.cadence_secs.map(|v| v as i32),
            runs_per_head: req.runs_per_head.map(|v| v as i32),
            sample_commits: req.sample_commits.map(|v| v as i32),
            recipients: req.recipients.as_ref().map(|r| serde_json::json!(r)),
            enabled: req.enabled,
        },
    )
    .await?;
    if !updated {
        return Err(ApiError::NotFound(format!("no watch with id {id}")));
    }
    Ok(Json(load_watch(&state, id).await?))
}

/// Every watch.
#[utoipa::path(get, path = "/api/v1/watches", tag = "watches",
    responses((status = 200, body = [Watch])))]
async fn list_watches(State(state): State<AppState>) -> ApiResult<Json<Vec<Watch>>> {
    Ok(Json(load_watches(&state, None).await?))
}

/// One watch.
#[utoipa::path(get, path = "/api/v1/watches/{id}", tag = "watches",
    params(("id" = i64, Path, description = "Watch id")),
    responses((status = 200, body = Watch), (status = 404, body = ErrorBody)))]
async fn get_watch(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<Json<Watch>> {
    Ok(Json(load_watch(&state, id).await?))
}

/// Push webhook: the repository was pushed to; fetch and measure the new heads now rather
/// than at the next poll. Authenticated with an API token, or, for a forge that cannot send
/// one, signed with the server's webhook secret (`--webhook-secret-file`): GitHub's and
/// Gitea's HMAC-SHA256 of the body (`X-Hub-Signature-256`, `X-Gitea-Signature`) or GitLab's
/// `X-Gitlab-Token`. A forge's `ping` event answers without polling.
#[utoipa::path(post, path = "/api/v1/watches/{id}/push", tag = "watches", request_body = PushEvent,
    params(("id" = i64, Path, description = "Watch id")),
    responses((status = 200, body = PollResult), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 422, body = ErrorBody)),
    security(("api_token" = [])))]
async fn push_webhook(
    State(state): State<AppState>,
    user: Result<ApiUser, ApiError>,
    Path(id): Path<i64>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Json<PollResult>> {
    use crate::webhook::{Signature, verify};
    match verify(state.webhook_secret.as_deref(), &headers, &body) {
        Signature::Valid => {}
        Signature::Absent => {
            user?;
        }
        Signature::Invalid => {
            return Err(ApiError::Unauthorized(
                "the webhook's signature does not match the server's webhook secret".into(),
            ));
        }
    }
    load_watch(&state, id).await?;
    let event = headers
        .get("x-github-event")
        .or_else(|| headers.get("x-gitea-event"))
        .and_then(|v| v.to_str().ok());
    if event == Some("ping") {
        return Ok(Json(PollResult { queued: vec![] }));
    }
    // The body is optional (a bare POST will do) and only informational.
    if !body.is_empty() {
        let event: PushEvent = serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad("body", format!("not a push event: {e}")))?;
        tracing::info!(watch = id, r#ref = ?event.ref_name, after = ?event.after, "push webhook");
    }
    let queued = crate::watch::poll::poll(&state, id)
        .await
        .map_err(|e| ApiError::unprocessable("repository", format!("{e:#}")))?;
    Ok(Json(PollResult { queued }))
}

#[derive(Deserialize, utoipa::IntoParams)]
struct SeriesQuery {
    /// Only this metric (default: every metric of the watch).
    metric: Option<String>,
    /// Only this branch (default: every branch the watch measured).
    branch: Option<String>,
}

/// The series of a watch: every measured commit with its runs and mean, and the change
/// points found, per (branch, metric).
#[utoipa::path(get, path = "/api/v1/watches/{id}/series", tag = "watches",
    params(("id" = i64, Path, description = "Watch id"), SeriesQuery),
    responses((status = 200, body = [Series]), (status = 404, body = ErrorBody)))]
async fn watch_series(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    Query(q): Query<SeriesQuery>,
) -> ApiResult<Json<Vec<Series>>> {
    Ok(Json(
        load_series(&state, id, q.branch.as_deref(), q.metric.as_deref()).await?,
    ))
}

/// The change points found in a watch's series, newest first, with their bisects.
#[utoipa::path(get, path = "/api/v1/watches/{id}/changes", tag = "watches",
    params(("id" = i64, Path, description = "Watch id")),
    responses((status = 200, body = [ChangePoint]), (status = 404, body = ErrorBody)))]
async fn watch_changes(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> ApiResult<Json<Vec<ChangePoint>>> {
    load_watch(&state, id).await?;
    Ok(Json(load_changes(&state, Some(id), false).await?))
}

#[derive(Deserialize, utoipa::IntoParams)]
struct ChangesQuery {
    /// Only open changes: bisecting (or a duplicate of one) and not finished.
    #[serde(default)]
    open: bool,
}

/// Change points of every watch, newest first.
#[utoipa::path(get, path = "/api/v1/changes", tag = "watches", params(ChangesQuery),
    responses((status = 200, body = [ChangePoint])))]
async fn list_changes(
    State(state): State<AppState>,
    Query(q): Query<ChangesQuery>,
) -> ApiResult<Json<Vec<ChangePoint>>> {
    Ok(Json(load_changes(&state, None, q.open).await?))
}
