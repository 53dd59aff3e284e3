//! `GET /api/v1/outbox`: every mail and how its delivery went; retrying a failed one.

use crate::auth::ApiUser;
use crate::error::{ApiError, ApiResult};
use crate::notify::outbox::{self as store, OutboxMail};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, Query, State};
use perfbisect_wire::api::ErrorBody;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_outbox))
        .routes(routes!(get_mail))
        .routes(routes!(retry_mail))
}

const STATES: &[&str] = &["pending", "sending", "sent", "failed", "skipped"];

#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct OutboxQuery {
    /// Only the mails of this bisect.
    bisect: Option<i64>,
    /// Only mails in this state: pending, sending, sent, failed, skipped.
    state: Option<String>,
    /// Page size (default 50, at most 500).
    limit: Option<i64>,
    offset: Option<i64>,
}

/// Mails, newest first: state, attempts, the last error, Message-ID and recipients.
#[utoipa::path(get, path = "/api/v1/outbox", tag = "notifications", params(OutboxQuery),
    responses((status = 200, body = Vec<OutboxMail>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("api_token" = [])))]
async fn list_outbox(
    State(state): State<AppState>,
    _user: ApiUser,
    Query(q): Query<OutboxQuery>,
) -> ApiResult<Json<Vec<OutboxMail>>> {
    if let Some(s) = &q.state
        && !STATES.contains(&s.as_str())
    {
        return Err(ApiError::bad(
            "state",
            format!("`{s}` is not one of {}", STATES.join(", ")),
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
    Ok(Json(
        store::list(&state.db, q.bisect, q.state.as_deref(), limit, offset).await?,
    ))
}

/// One mail.
#[utoipa::path(get, path = "/api/v1/outbox/{id}", tag = "notifications",
    params(("id" = i64, Path, description = "Mail id")),
    responses((status = 200, body = OutboxMail), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("api_token" = [])))]
async fn get_mail(
    State(state): State<AppState>,
    _user: ApiUser,
    Path(id): Path<i64>,
) -> ApiResult<Json<OutboxMail>> {
    store::get(&state.db, id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("no mail with id {id}")))
}

/// Puts a failed or skipped mail back in the queue, with a fresh count of attempts.
#[utoipa::path(post, path = "/api/v1/outbox/{id}/retry", tag = "notifications",
    params(("id" = i64, Path, description = "Mail id")),
    responses((status = 200, body = OutboxMail), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 409, description = "The mail is not failed or skipped", body = ErrorBody)),
    security(("api_token" = [])))]
async fn retry_mail(
    State(state): State<AppState>,
    _user: ApiUser,
    Path(id): Path<i64>,
) -> ApiResult<Json<OutboxMail>> {
    let mail = store::get(&state.db, id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no mail with id {id}")))?;
    if !store::retry(&state.db, id).await? {
        return Err(ApiError::Conflict(format!(
            "mail {id} is {}; only failed or skipped mails are retried",
            mail.state
        )));
    }
    Ok(Json(store::get(&state.db, id).await?.unwrap_or(mail)))
}
