//! A bisect's priority: its weight when its host group's hosts are shared (`allocator`).

use super::ApiJson;
use crate::auth::ApiUser;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store::{allocation, wakeups};
use axum::Json;
use axum::extract::{Path, State};
use perfbisect_wire::api::ErrorBody;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(set_priority))
}

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Priority {
    /// 1 to 100; a bisect of priority 2 gets twice the hosts of one of priority 1.
    pub priority: i32,
}

/// Set a bisect's priority; its group's shares are recomputed at once.
#[utoipa::path(put, path = "/api/v1/bisects/{id}/priority", tag = "bisects", request_body = Priority,
    params(("id" = i64, Path, description = "Bisect id")),
    responses((status = 200, body = Priority), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)),
    security(("api_token" = [])))]
async fn set_priority(
    State(state): State<AppState>,
    _user: ApiUser,
    Path(id): Path<i64>,
    ApiJson(req): ApiJson<Priority>,
) -> ApiResult<Json<Priority>> {
    if !(1..=100).contains(&req.priority) {
        return Err(ApiError::bad("priority", "must be between 1 and 100"));
    }
    let group = allocation::set_priority(&state.db, id, req.priority)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no bisect with id {id}")))?;
    wakeups::wake_group(&state.db, &group, wakeups::Reason::ShareChanged).await?;
    Ok(Json(req))
}
