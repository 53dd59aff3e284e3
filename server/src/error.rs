//! The one error type that HTTP handlers return, rendered as `{"error": {field, message}}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use perfbisect_wire::api::{ErrorBody, ErrorDetail};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request is wrong; `field` names the part of it.
    #[error("{message}")]
    BadRequest {
        field: Option<String>,
        message: String,
    },
    /// Well-formed but refused (e.g. a revision that does not exist).
    #[error("{message}")]
    Unprocessable {
        field: Option<String>,
        message: String,
    },
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Unauthorized(String),
    /// A valid token of a kind (role) that may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// The body is larger than the server accepts.
    #[error("{0}")]
    TooLarge(String),
    /// The server cannot serve now (its database is unreachable); retry later.
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn bad(field: &str, message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            field: Some(field.to_string()),
            message: message.into(),
        }
    }
    pub fn unprocessable(field: &str, message: impl Into<String>) -> Self {
        ApiError::Unprocessable {
            field: Some(field.to_string()),
            message: message.into(),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            // The database is away (stopped, restarting, unreachable): the request may be
            // retried, and nothing was written.
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
                tracing::error!(error = %e, "database unavailable");
                ApiError::Unavailable("the database is unavailable; retry later".into())
            }
            _ => ApiError::Internal(e.into()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, field) = match &self {
            ApiError::BadRequest { field, .. } => (StatusCode::BAD_REQUEST, field.clone()),
            ApiError::Unprocessable { field, .. } => {
                (StatusCode::UNPROCESSABLE_ENTITY, field.clone())
            }
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, None),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, None),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, None),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, None),
            ApiError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, None),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, None),
            ApiError::Internal(e) => {
                tracing::error!(error = ?e, "internal error");
                (StatusCode::INTERNAL_SERVER_ERROR, None)
            }
        };
        let message = match &self {
            ApiError::Internal(_) => "internal server error (see the server log)".to_string(),
            other => other.to_string(),
        };
        (
            status,
            Json(ErrorBody {
                error: ErrorDetail { field, message },
            }),
        )
            .into_response()
    }
}
