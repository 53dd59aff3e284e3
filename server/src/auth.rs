//! Tokens and roles. Who may do what is written down in ARCHITECTURE.md ("Roles"):
//! readers read (only asked for when `--require-read-token` is on), submitters (`api`
//! tokens) submit and cancel, operators also manage tokens, the outbox and worker names,
//! enrollment tokens register workers, and each worker acts with its own worker token.
//! Only SHA-256 hashes of tokens are stored.

use crate::error::ApiError;
use crate::state::AppState;
use crate::store;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use perfbisect_wire::states::TokenKind;
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

/// The roles of API tokens, each allowed what the ones before it are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Reader,
    Submitter,
    Operator,
}

impl Role {
    /// The stored `api_tokens.kind`.
    pub fn kind(self) -> TokenKind {
        match self {
            Role::Reader => TokenKind::Reader,
            Role::Submitter => TokenKind::Api,
            Role::Operator => TokenKind::Operator,
        }
    }

    /// The role a token of `kind` has; none for an enrollment token, which only registers
    /// workers.
    pub fn from_kind(kind: TokenKind) -> Option<Role> {
        match kind {
            TokenKind::Reader => Some(Role::Reader),
            TokenKind::Api => Some(Role::Submitter),
            TokenKind::Operator => Some(Role::Operator),
            TokenKind::Enroll => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Submitter => "submitter",
            Role::Operator => "operator",
        }
    }
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
pub async fn ensure_token(
    db: &PgPool,
    kind: TokenKind,
    name: &str,
    token: &str,
) -> sqlx::Result<()> {
    store::tokens::ensure(db, kind, name, &hash_token(token)).await
}

/// Makes `token` the startup token of `kind`: stored (again valid if it had been revoked)
/// and every other startup token of that kind revoked, in one transaction. Tokens made
/// through the API are not touched.
pub async fn replace_startup_token(db: &PgPool, kind: TokenKind, token: &str) -> sqlx::Result<u64> {
    store::tokens::replace_startup(db, kind, &hash_token(token)).await
}

/// The valid (not revoked) API token with this value: its id and kind.
async fn lookup(db: &PgPool, token: &str) -> Result<Option<(i64, TokenKind)>, ApiError> {
    Ok(store::tokens::valid(db, &hash_token(token)).await?)
}

/// A caller whose API token has at least role `min`.
async fn api_role(parts: &Parts, state: &AppState, min: Role) -> Result<(i64, Role), ApiError> {
    let token = bearer(parts)?;
    let found = lookup(&state.db, token).await?;
    match found.and_then(|(id, kind)| Role::from_kind(kind).map(|r| (id, r))) {
        Some((id, role)) if role >= min => Ok((id, role)),
        Some((_, role)) => Err(ApiError::Forbidden(format!(
            "a {} token may not do this: it needs a {} token",
            role.name(),
            min.name()
        ))),
        None => Err(ApiError::Unauthorized("the API token is not valid".into())),
    }
}

/// A caller holding a valid submitter (or operator) token.
pub struct ApiUser {
    pub token_id: i64,
    pub role: Role,
}

impl FromRequestParts<AppState> for ApiUser {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let (token_id, role) = api_role(parts, state, Role::Submitter).await?;
        Ok(ApiUser { token_id, role })
    }
}

/// A caller holding a valid operator token.
pub struct Operator {
    pub token_id: i64,
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let (token_id, _) = api_role(parts, state, Role::Operator).await?;
        Ok(Operator { token_id })
    }
}

/// A caller allowed to register a worker: an enrollment token, or an operator's (which
/// may also take over a registered name).
pub struct Enrollment {
    pub operator: bool,
}

impl FromRequestParts<AppState> for Enrollment {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = bearer(parts)?;
        match lookup(&state.db, token).await?.map(|(_, kind)| kind) {
            Some(TokenKind::Enroll) => Ok(Enrollment { operator: false }),
            Some(TokenKind::Operator) => Ok(Enrollment { operator: true }),
            _ => Err(ApiError::Unauthorized(
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

/// How often a worker's requests refresh `hosts.last_seen_at` at most.
pub const SEEN_EVERY_SECS: f64 = 5.0;

impl FromRequestParts<AppState> for WorkerHost {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = bearer(parts)?;
        let row =
            store::hosts::authenticate(&state.db, &hash_token(token), SEEN_EVERY_SECS).await?;
        let (host_id, host_group) = row.ok_or_else(unknown_worker_token)?;
        Ok(WorkerHost {
            host_id,
            host_group,
        })
    }
}

/// A worker token, not yet checked: the claim checks it in its own statement, at every look
/// of its long poll (`queue::claim_wait`), instead of a round trip of its own.
pub struct WorkerToken {
    /// The token's SHA-256, as `hosts.token_hash` stores it.
    pub hash: String,
}

impl FromRequestParts<AppState> for WorkerToken {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, ApiError> {
        Ok(WorkerToken {
            hash: hash_token(bearer(parts)?),
        })
    }
}

/// The answer to a worker token that no host holds.
pub fn unknown_worker_token() -> ApiError {
    ApiError::Unauthorized(
        "the worker token is not valid (another registration of this worker name replaced it, or it was revoked)".into(),
    )
}

/// Who may read (the API's GET endpoints, the dashboard, the OpenAPI document).
#[derive(Debug, Clone, Default)]
pub struct ReadAccess {
    /// Reads need a token of any kind (reader, submitter, operator, or a worker's).
    pub require_token: bool,
    /// A request carrying this header (set by a reverse proxy that authenticated the user)
    /// may read without a token. Only safe when nothing but the proxy reaches the server.
    pub trusted_user_header: Option<axum::http::HeaderName>,
}

/// The cookie the dashboard may carry the token in (a browser cannot send a bearer header
/// when following a link).
pub const TOKEN_COOKIE: &str = "perfbisect_token";

fn cookie_token(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == TOKEN_COOKIE)
        .map(|(_, v)| v)
}

/// Is `token` any valid token (API token of any role, or a worker's)?
async fn any_valid_token(db: &PgPool, token: &str) -> Result<bool, ApiError> {
    Ok(store::tokens::may_read(db, &hash_token(token)).await?)
}

/// The read gate in front of every route: with `require_token`, a request needs a valid
/// token (bearer or cookie) or the trusted proxy header. `/healthz` and the worker
/// protocol (which has its own tokens) pass.
pub async fn read_gate(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let access = &state.access;
    let path = req.uri().path();
    if !access.require_token || path == "/healthz" || path.starts_with("/api/v1/worker/") {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    if let Some(h) = &access.trusted_user_header
        && parts.headers.get(h).is_some_and(|v| !v.is_empty())
    {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let token = bearer(&parts).ok().or_else(|| cookie_token(&parts));
    let allowed = match token {
        Some(t) => match any_valid_token(&state.db, t).await {
            Ok(ok) => ok,
            Err(e) => return e.into_response(),
        },
        None => false,
    };
    if allowed {
        next.run(Request::from_parts(parts, body)).await
    } else {
        ApiError::Unauthorized(format!(
            "reading needs a token on this server: `Authorization: Bearer <token>` or the `{TOKEN_COOKIE}` cookie"
        ))
        .into_response()
    }
}
