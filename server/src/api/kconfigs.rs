//! Kernel configs: stored once under a name, fetched by the workers that build kernels.
//!
//! A name is immutable: storing different content under a stored name is refused (409), so
//! a job spec that names a config (and whose hash identifies a measurement) always means the
//! same config.

use crate::auth::ApiUser;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store::kconfigs;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use perfbisect_wire::api::ErrorBody;
use sha2::{Digest, Sha256};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Largest config accepted; real ones are about 300 KB.
const MAX_BYTES: usize = 4 << 20;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(put_kconfig, get_kconfig))
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c))
}

/// Store a kernel config under a name (the job spec's `kconfig`). Storing the same content
/// again is a no-op; different content under a stored name is refused.
#[utoipa::path(put, path = "/api/v1/kconfigs/{name}", tag = "kconfigs",
    params(("name" = String, Path, description = "Config name, e.g. x86_64-rhel-9.4")),
    request_body(content = String, content_type = "text/plain"),
    responses((status = 201, description = "Stored"), (status = 200, description = "Already stored"),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("api_token" = [])))]
async fn put_kconfig(
    State(state): State<AppState>,
    _user: ApiUser,
    Path(name): Path<String>,
    body: String,
) -> ApiResult<StatusCode> {
    if !valid_name(&name) {
        return Err(ApiError::bad(
            "name",
            "must be 1-128 characters of letters, digits, '-', '_', '.', '+'",
        ));
    }
    if body.len() > MAX_BYTES || !body.lines().any(|l| l.starts_with("CONFIG_")) {
        return Err(ApiError::bad(
            "body",
            "must be a kernel .config (CONFIG_... lines), at most 4 MiB",
        ));
    }
    if body.contains('\0') {
        return Err(ApiError::unprocessable(
            "body",
            "contains a NUL character, which cannot be stored",
        ));
    }
    let sha = hex::encode(Sha256::digest(body.as_bytes()));
    let stored = match kconfigs::store(&state.db, &name, &body, &sha).await? {
        kconfigs::Stored::New => return Ok(StatusCode::CREATED),
        kconfigs::Stored::Existing { sha256 } => sha256,
    };
    if stored == sha {
        Ok(StatusCode::OK)
    } else {
        Err(ApiError::Conflict(format!(
            "kconfig `{name}` is stored with other content; configs are immutable, store this one under a new name"
        )))
    }
}

/// The stored config, as text.
#[utoipa::path(get, path = "/api/v1/kconfigs/{name}", tag = "kconfigs",
    params(("name" = String, Path, description = "Config name")),
    responses((status = 200, description = "The config", content_type = "text/plain", body = String),
              (status = 404, body = ErrorBody)))]
async fn get_kconfig(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let content = kconfigs::content(&state.db, &name).await?;
    let content =
        content.ok_or_else(|| ApiError::NotFound(format!("no kconfig named `{name}`")))?;
    Ok((
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        content,
    ))
}
