//! Tokens: API tokens (submit, cancel), enrollment tokens (register a worker) and worker
//! tokens (everything a worker does). Only SHA-256 hashes are stored.

use crate::AppState;
use crate::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use rand::Rng;
use sha2::{Digest, Sha256};
use sqlx::PgPool;

pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A new random token: 32 bytes, hex.
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    hex::encode(bytes)
}

fn bearer(parts: &Parts) -> Result<&str, ApiError> {
    let value = parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .ok_or_else(|| {
            ApiError::Unauthorized("missing `Authorization: Bearer <token>` header".into())
        })?;
    value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            ApiError::Unauthorized("the Authorization header must be `Bearer <token>`".into())
        })
}

/// Adds a token of `kind` unless a token with the same value is already stored.
pub async fn ensure_token(db: &PgPool, kind: &str, name: &str, token: &str) -> sqlx::Result<()> {
    sqlx::query("INSERT INTO api_tokens (name, kind, token_hash) VALUES ($1, $2, $3) ON CONFLICT (token_hash) DO NOTHING")
        .bind(name)
        .bind(kind)
        .bind(hash_token(token))
        .execute(db)
        .await?;
    Ok(())
}

async fn token_id(db: &PgPool, kind: &str, token: &str) -> Result<Option<i64>, ApiError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM api_tokens WHERE kind = $1 AND token_hash = $2 AND revoked_at IS NULL",
    )
    .bind(kind)
    .bind(hash_token(token))
    .fetch_optional(db)
    .await?)
}

/// A caller holding a valid API token.
pub struct ApiUser {
    pub token_id: i64,
}

impl FromRequestParts<AppState> for ApiUser {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = bearer(parts)?;
        match token_id(&state.db, "api", token).await? {
            Some(token_id) => Ok(ApiUser { token_id }),
            None => Err(ApiError::Unauthorized("the API token is not valid".into())),
        }
    }
}

/// A caller holding a valid enrollment token.
pub struct Enrollment;

impl FromRequestParts<AppState> for Enrollment {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = bearer(parts)?;
        match token_id(&state.db, "enroll", token).await? {
            Some(_) => Ok(Enrollment),
            None => Err(ApiError::Unauthorized(
                "the enrollment token is not valid".into(),
            )),
        }
    }
}

/// A registered worker, identified by its worker token. Seeing it refreshes `last_seen_at`.
pub struct WorkerHost {
    pub host_id: i64,
    pub host_group: String,
}

impl FromRequestParts<AppState> for WorkerHost {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = bearer(parts)?;
        let row: Option<(i64, String)> = sqlx::query_as(
            "UPDATE hosts SET last_seen_at = now() WHERE token_hash = $1 RETURNING id, host_group",
        )
        .bind(hash_token(token))
        .fetch_optional(&state.db)
        .await?;
        let (host_id, host_group) =
            row.ok_or_else(|| ApiError::Unauthorized("the worker token is not valid".into()))?;
        Ok(WorkerHost {
            host_id,
            host_group,
        })
    }
}
