//! Registering repositories; the server mirrors each one in the background (`fetcher`).

use super::ApiJson;
use crate::auth::ApiUser;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store::repositories;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use perfbisect_wire::api::{CreateRepository, ErrorBody, Repository};
use perfbisect_wire::states::RepoState;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_repository, list_repositories))
}

/// An http(s) URL template with `{sha}`, and nothing a header or a mail could trip on.
fn valid_web_url(s: &str) -> bool {
    (s.starts_with("https://") || s.starts_with("http://"))
        && s.contains("{sha}")
        && s.len() <= 500
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// Register a repository. It is stored as `mirroring` and this answers at once (202); a
/// background fetch moves it to `ready`, or to `failed` with `fetch_error`. Registering the
/// same name and URL again asks for a fresh fetch (200); a repository that failed before it
/// was ever mirrored may be registered again with another URL.
#[utoipa::path(post, path = "/api/v1/repositories", tag = "repositories", request_body = CreateRepository,
    responses((status = 200, body = Repository), (status = 202, body = Repository), (status = 400, body = ErrorBody),
              (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)),
    security(("api_token" = [])))]
async fn create_repository(
    State(state): State<AppState>,
    _user: ApiUser,
    ApiJson(req): ApiJson<CreateRepository>,
) -> ApiResult<(StatusCode, Json<Repository>)> {
    if !valid_name(&req.name) {
        return Err(ApiError::bad(
            "name",
            "must be 1-100 characters of letters, digits, '-', '_', '.'",
        ));
    }
    if let Some(w) = &req.web_url
        && !valid_web_url(w)
    {
        return Err(ApiError::bad(
            "web_url",
            "must be an http(s) URL with `{sha}` where the commit goes, e.g. `https://github.com/o/r/commit/{sha}`",
        ));
    }
    if req.url.trim().is_empty() {
        return Err(ApiError::bad("url", "must not be empty"));
    }
    // Before anything is stored: a password in the URL would reach the database.
    perfbisect_gitfetch::check_url(&req.url)
        .map_err(|e| ApiError::unprocessable("url", e.to_string()))?;
    // Refused before anything is stored or fetched; the fetch checks again (a name may
    // resolve elsewhere by then).
    state.mirrors.check_url_for_request(&req.url, "url").await?;
    let existing = repositories::by_name(&state.db, &req.name).await?;
    if let Some(r) = &existing
        && r.url != req.url
        && !(r.state == RepoState::Failed && r.fetched_at.is_none())
    {
        return Err(ApiError::Conflict(format!(
            "repository `{}` is already registered with url `{}`",
            req.name, r.url
        )));
    }
    // Each registration asks for the next fetch generation; a new row starts `mirroring`, a
    // failed one mirrors again, a ready one stays ready while it refreshes.
    let row =
        repositories::register(&state.db, &req.name, &req.url, req.web_url.as_deref()).await?;
    crate::fetcher::spawn(&state, row.id, row.fetch_requested);
    let status = if existing.is_some() {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((status, Json(row.into())))
}

/// Every registered repository.
#[utoipa::path(get, path = "/api/v1/repositories", tag = "repositories",
    responses((status = 200, body = Vec<Repository>)))]
async fn list_repositories(State(state): State<AppState>) -> ApiResult<Json<Vec<Repository>>> {
    let rows = repositories::all(&state.db).await?;
    Ok(Json(rows.into_iter().map(Into::into).collect()))
}
