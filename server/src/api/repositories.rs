//! Registering repositories; the server mirrors each one.

use super::ApiJson;
use crate::AppState;
use crate::auth::ApiUser;
use crate::error::{ApiError, ApiResult};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use perfbisect_wire::api::{CreateRepository, ErrorBody, Repository};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_repository, list_repositories))
}

#[derive(sqlx::FromRow)]
struct RepoRow {
    id: i64,
    name: String,
    url: String,
    created_at: chrono::DateTime<chrono::Utc>,
    fetched_at: Option<chrono::DateTime<chrono::Utc>>,
    web_url: Option<String>,
}

impl From<RepoRow> for Repository {
    fn from(r: RepoRow) -> Self {
        Repository {
            id: r.id,
            name: r.name,
            url: r.url,
            created_at: r.created_at,
            fetched_at: r.fetched_at,
            web_url: r.web_url,
        }
    }
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

/// Register a repository and make its mirror. Registering the same name and URL again refreshes the mirror.
#[utoipa::path(post, path = "/api/v1/repositories", tag = "repositories", request_body = CreateRepository,
    responses((status = 201, body = Repository), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody),
              (status = 422, body = ErrorBody)),
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
    let existing: Option<RepoRow> = sqlx::query_as("SELECT * FROM repositories WHERE name = $1")
        .bind(&req.name)
        .fetch_optional(&state.db)
        .await?;
    if let Some(r) = &existing
        && r.url != req.url
    {
        return Err(ApiError::Conflict(format!(
            "repository `{}` is already registered with url `{}`",
            req.name, r.url
        )));
    }
    // Fetch before storing anything, so an unreachable URL leaves no row behind.
    let id = match &existing {
        Some(r) => r.id,
        None => {
            sqlx::query_scalar("SELECT nextval(pg_get_serial_sequence('repositories', 'id'))")
                .fetch_one(&state.db)
                .await?
        }
    };
    let mirrors = state.mirrors.clone();
    let url = req.url.clone();
    tokio::task::spawn_blocking(move || mirrors.fetch(id, &url))
        .await
        .map_err(|e| ApiError::Internal(e.into()))?
        .map_err(|e| ApiError::unprocessable("url", e.to_string()))?;
    let row: RepoRow = sqlx::query_as(
        "INSERT INTO repositories (id, name, url, fetched_at, web_url) VALUES ($1, $2, $3, now(), $4)
         ON CONFLICT (name) DO UPDATE SET fetched_at = now(),
             web_url = COALESCE(EXCLUDED.web_url, repositories.web_url) RETURNING *",
    )
    .bind(id)
    .bind(&req.name)
    .bind(&req.url)
    .bind(&req.web_url)
    .fetch_one(&state.db)
    .await?;
    let status = if existing.is_some() {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(row.into())))
}

/// Every registered repository.
#[utoipa::path(get, path = "/api/v1/repositories", tag = "repositories",
    responses((status = 200, body = Vec<Repository>)))]
async fn list_repositories(State(state): State<AppState>) -> ApiResult<Json<Vec<Repository>>> {
    let rows: Vec<RepoRow> = sqlx::query_as("SELECT * FROM repositories ORDER BY name")
        .fetch_all(&state.db)
        .await?;
    Ok(Json(rows.into_iter().map(Into::into).collect()))
}
