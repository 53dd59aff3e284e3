//! Subscriptions: who else gets mail, by repository, testcase or metric (a glob).

use crate::auth::ApiUser;
use crate::error::{ApiError, ApiResult};
use crate::notify::Event;
use crate::notify::recipients::Subscription;
use crate::state::AppState;
use crate::store::subscriptions::{self, NewSubscription};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use perfbisect_wire::api::ErrorBody;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_subscription, list_subscriptions))
        .routes(routes!(delete_subscription))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSubscription {
    /// Who gets the mail (sent as Bcc).
    pub email: String,
    /// Only bisects of this registered repository.
    #[serde(default)]
    pub repository: Option<String>,
    /// Only bisects of this testcase.
    #[serde(default)]
    pub testcase: Option<String>,
    /// Only bisects of a metric matching this glob, e.g. `fio.*_iops`.
    #[serde(default)]
    pub metric: Option<String>,
    /// Events to mail; default found, not_reproduced, inconclusive, failed.
    #[serde(default)]
    pub events: Option<Vec<String>>,
}

fn validate(req: &CreateSubscription) -> ApiResult<Vec<String>> {
    if req.email.parse::<lettre::Address>().is_err() {
        return Err(ApiError::bad(
            "email",
            format!("`{}` is not a mail address", req.email),
        ));
    }
    for (field, value) in [
        ("repository", &req.repository),
        ("testcase", &req.testcase),
        ("metric", &req.metric),
    ] {
        if let Some(v) = value
            && (v.is_empty() || v.len() > 200 || v.chars().any(char::is_whitespace))
        {
            return Err(ApiError::bad(
                field,
                "must be a non-empty name without spaces",
            ));
        }
    }
    let events: Vec<String> = match &req.events {
        Some(list) => list.clone(),
        None => Event::DEFAULT
            .iter()
            .map(|e| e.as_str().to_string())
            .collect(),
    };
    if events.is_empty() {
        return Err(ApiError::bad("events", "must name at least one event"));
    }
    for (i, e) in events.iter().enumerate() {
        if Event::parse(e).is_none() {
            return Err(ApiError::bad(
                &format!("events[{i}]"),
                format!(
                    "`{e}` is not one of started, reproduced, found, not_reproduced, inconclusive, failed"
                ),
            ));
        }
    }
    Ok(events)
}

/// Subscribe an address to bisects of a repository, testcase or metric.
#[utoipa::path(post, path = "/api/v1/subscriptions", tag = "notifications", request_body = CreateSubscription,
    responses((status = 201, body = Subscription), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("api_token" = [])))]
async fn create_subscription(
    State(state): State<AppState>,
    user: ApiUser,
    super::super::ApiJson(req): super::super::ApiJson<CreateSubscription>,
) -> ApiResult<(StatusCode, Json<Subscription>)> {
    let events = validate(&req)?;
    let sub = subscriptions::create(
        &state.db,
        NewSubscription {
            email: &req.email,
            repository: req.repository.as_deref(),
            testcase: req.testcase.as_deref(),
            metric: req.metric.as_deref(),
            events: &events,
            created_by: user.token_id,
        },
    )
    .await?;
    Ok((StatusCode::CREATED, Json(sub)))
}

/// Every subscription, oldest first.
#[utoipa::path(get, path = "/api/v1/subscriptions", tag = "notifications",
    responses((status = 200, body = Vec<Subscription>), (status = 401, body = ErrorBody)),
    security(("api_token" = [])))]
async fn list_subscriptions(
    State(state): State<AppState>,
    _user: ApiUser,
) -> ApiResult<Json<Vec<Subscription>>> {
    Ok(Json(subscriptions::all(&state.db).await?))
}

/// Remove a subscription.
#[utoipa::path(delete, path = "/api/v1/subscriptions/{id}", tag = "notifications",
    params(("id" = i64, Path, description = "Subscription id")),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("api_token" = [])))]
async fn delete_subscription(
    State(state): State<AppState>,
    _user: ApiUser,
    Path(id): Path<i64>,
) -> ApiResult<StatusCode> {
    if !subscriptions::delete(&state.db, id).await? {
        return Err(ApiError::NotFound(format!("no subscription with id {id}")));
    }
    Ok(StatusCode::NO_CONTENT)
}
