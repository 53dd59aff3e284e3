//! The materials to reproduce a bisect: its job spec exactly as submitted. (The kernel
//! config it names is at `/api/v1/kconfigs/{name}`.)

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::IntoResponse;
use perfbisect_wire::api::ErrorBody;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_job_yaml))
}

/// The bisect's job spec, the YAML as submitted (the report's "To reproduce" links here).
#[utoipa::path(get, path = "/api/v1/bisects/{id}/job.yaml", tag = "reports",
    params(("id" = i64, Path, description = "Bisect id")),
    responses((status = 200, description = "The job spec", content_type = "application/yaml", body = String),
              (status = 404, body = ErrorBody)))]
async fn get_job_yaml(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> ApiResult<impl IntoResponse> {
    let yaml = crate::store::bisects::job_yaml(&state.db, id).await?;
    let yaml = yaml.ok_or_else(|| ApiError::NotFound(format!("no bisect with id {id}")))?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                "application/yaml; charset=utf-8".to_string(),
            ),
            (
                header::CONTENT_DISPOSITION,
                format!("inline; filename=\"bisect-{id}-job.yaml\""),
            ),
        ],
        yaml,
    ))
}
