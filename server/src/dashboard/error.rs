//! What a page answers when it cannot show what was asked: an HTML page with the status and
//! a way back (the JSON error body is for API clients, not for people).

use crate::error::ApiError;
use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("rendering a page: {0}")]
    Template(#[from] askama::Error),
    /// Anything else the API's loaders refused or failed with.
    #[error(transparent)]
    Api(ApiError),
}

impl From<ApiError> for PageError {
    fn from(e: ApiError) -> Self {
        match e {
            ApiError::NotFound(m) => PageError::NotFound(m),
            other => PageError::Api(other),
        }
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    nav: &'a str,
    status: u16,
    title: &'a str,
    message: String,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let (status, title, message) = match &self {
            PageError::NotFound(m) => (StatusCode::NOT_FOUND, "Not found", m.clone()),
            PageError::BadRequest(m) => (StatusCode::BAD_REQUEST, "Bad request", m.clone()),
            PageError::Api(ApiError::BadRequest { message, .. }) => {
                (StatusCode::BAD_REQUEST, "Bad request", message.clone())
            }
            other => {
                tracing::error!(error = ?other, "dashboard page failed");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Server error",
                    "The server could not build this page; its log says why.".to_string(),
                )
            }
        };
        let page = ErrorPage {
            nav: "",
            status: status.as_u16(),
            title,
            message,
        };
        match page.render() {
            Ok(html) => (status, Html(html)).into_response(),
            // The error page itself failed: plain text still tells the reader something.
            Err(_) => (status, format!("{title}: {}", page.message)).into_response(),
        }
    }
}
