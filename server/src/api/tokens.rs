//! Token lifecycle for operators: create (the token is shown once), list, revoke.

use super::ApiJson;
use crate::auth::{Operator, Role, hash_token, new_token};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store::tokens::{self, TokenRow};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use perfbisect_wire::api::ErrorBody;
use perfbisect_wire::states::TokenKind;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_token, list_tokens))
        .routes(routes!(revoke_token))
}

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TokenRole {
    /// Read the API and the dashboard (when reads need a token).
    Reader,
    /// Also submit and cancel bisects, add repositories, subscriptions and kconfigs.
    Submitter,
    /// Also manage tokens and the outbox, and take over a worker's name.
    Operator,
    /// Register workers.
    Enroll,
}

impl TokenRole {
    fn kind(self) -> TokenKind {
        match self {
            TokenRole::Reader => Role::Reader.kind(),
            TokenRole::Submitter => Role::Submitter.kind(),
            TokenRole::Operator => Role::Operator.kind(),
            TokenRole::Enroll => TokenKind::Enroll,
        }
    }

    fn from_kind(kind: TokenKind) -> TokenRole {
        match kind {
            TokenKind::Reader => TokenRole::Reader,
            TokenKind::Api => TokenRole::Submitter,
            TokenKind::Operator => TokenRole::Operator,
            TokenKind::Enroll => TokenRole::Enroll,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    /// Who or what holds it (1-128 characters).
    pub name: String,
    pub role: TokenRole,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TokenInfo {
    pub id: i64,
    pub name: String,
    pub role: TokenRole,
    /// `startup` (given to the server at start) or `api` (made through this API).
    pub source: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedToken {
    #[serde(flatten)]
    pub info: TokenInfo,
    /// The token itself: shown only now, stored only as a hash.
    pub token: String,
}

impl From<TokenRow> for TokenInfo {
    fn from(r: TokenRow) -> Self {
        TokenInfo {
            id: r.id,
            name: r.name,
            role: TokenRole::from_kind(r.kind),
            source: r.source,
            created_at: r.created_at,
            revoked_at: r.revoked_at,
        }
    }
}

/// Create a token. Its value is in this answer only.
#[utoipa::path(post, path = "/api/v1/tokens", tag = "tokens", request_body = CreateToken,
    responses((status = 201, body = CreatedToken), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 422, body = ErrorBody)),
    security(("operator_token" = [])))]
async fn create_token(
    State(state): State<AppState>,
    _op: Operator,
    ApiJson(req): ApiJson<CreateToken>,
) -> ApiResult<(StatusCode, Json<CreatedToken>)> {
    let name = req.name.trim();
    if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
        return Err(ApiError::bad(
            "name",
            "must be 1-128 characters without control characters",
        ));
    }
    let token = new_token();
    let row = tokens::create(&state.db, name, req.role.kind(), &hash_token(&token)).await?;
    tracing::info!(id = row.id, name, kind = %row.kind, "token created");
    Ok((
        StatusCode::CREATED,
        Json(CreatedToken {
            info: row.into(),
            token,
        }),
    ))
}

/// Every token (never its value), newest first.
#[utoipa::path(get, path = "/api/v1/tokens", tag = "tokens",
    responses((status = 200, body = Vec<TokenInfo>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("operator_token" = [])))]
async fn list_tokens(
    State(state): State<AppState>,
    _op: Operator,
) -> ApiResult<Json<Vec<TokenInfo>>> {
    let rows = tokens::all(&state.db).await?;
    Ok(Json(rows.into_iter().map(Into::into).collect()))
}

/// Revoke a token: it stops working at once. Revoking a revoked token changes nothing.
#[utoipa::path(delete, path = "/api/v1/tokens/{id}", tag = "tokens",
    params(("id" = i64, Path, description = "Token id")),
    responses((status = 200, body = TokenInfo), (status = 401, body = ErrorBody),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("operator_token" = [])))]
async fn revoke_token(
    State(state): State<AppState>,
    _op: Operator,
    Path(id): Path<i64>,
) -> ApiResult<Json<TokenInfo>> {
    let row = tokens::revoke(&state.db, id).await?;
    let row = row.ok_or_else(|| ApiError::NotFound(format!("no token with id {id}")))?;
    tracing::info!(id, "token revoked");
    Ok(Json(row.into()))
}
