//! What every request passes at the edge of the API, whatever its handler: a NUL character
//! in the path or the query is refused (PostgreSQL cannot store or compare it), and an
//! error that axum answers by itself (a path or query that does not parse, an unknown
//! route, a wrong method) comes back as the API's JSON error body, naming the field.

use crate::error::ApiError;
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use perfbisect_wire::api::{ErrorBody, ErrorDetail};

/// The field of a request URI that holds a NUL character: `path`, or the query's key.
fn nul_in_uri(uri: &axum::http::Uri) -> Option<String> {
    if uri.path().contains("%00") {
        return Some("path".into());
    }
    let query = uri.query()?;
    match serde_urlencoded::from_str::<Vec<(String, String)>>(query) {
        Ok(pairs) => pairs
            .into_iter()
            .find(|(k, v)| k.contains('\0') || v.contains('\0'))
            .map(|(k, _)| if k.contains('\0') { "query".into() } else { k }),
        Err(_) => query.contains("%00").then(|| "query".into()),
    }
}

pub async fn refuse_nul_in_uri(req: Request, next: Next) -> Response {
    if let Some(field) = nul_in_uri(req.uri()) {
        return ApiError::unprocessable(&field, "contains a NUL character").into_response();
    }
    next.run(req).await
}

/// The `{name}` parameters of a route pattern.
fn route_params(pattern: &str) -> Vec<String> {
    pattern
        .split('/')
        .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
        .map(|s| s.trim_start_matches('*').to_string())
        .collect()
}

/// Which field an axum rejection message is about.
fn field_of(message: &str, params: &[String]) -> Option<String> {
    if message.contains("Failed to deserialize query string") {
        return super::field_in_serde_message(message).or_else(|| Some("query".into()));
    }
    if message.starts_with("Invalid URL") || message.contains("path") {
        if let Some(p) = params.iter().find(|p| message.contains(&format!("`{p}`"))) {
            return Some(p.clone());
        }
        if params.len() == 1 {
            return Some(params[0].clone());
        }
        return Some("path".into());
    }
    None
}

/// Turns axum's own plain-text client errors under `/api/` into the JSON error body.
pub async fn json_errors(req: Request, next: Next) -> Response {
    if !req.uri().path().starts_with("/api/") {
        return next.run(req).await;
    }
    let params = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| route_params(m.as_str()))
        .unwrap_or_default();
    let resp = next.run(req).await;
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !status.is_client_error() || is_json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let text = match axum::body::to_bytes(body, 64 << 10).await {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(_) => String::new(),
    };
    let message = if !text.trim().is_empty() {
        text.trim().to_string()
    } else {
        match status {
            StatusCode::NOT_FOUND => "no such endpoint".into(),
            StatusCode::METHOD_NOT_ALLOWED => "this endpoint does not accept this method".into(),
            other => other
                .canonical_reason()
                .unwrap_or("client error")
                .to_string(),
        }
    };
    let field = field_of(&message, &params);
    let body = serde_json::to_vec(&ErrorBody {
        error: ErrorDetail { field, message },
    })
    .unwrap_or_default();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nul_in_path_and_query() {
        let uri: axum::http::Uri = "/api/v1/kconfigs/a%00b".parse().unwrap();
        assert_eq!(nul_in_uri(&uri).as_deref(), Some("path"));
        let uri: axum::http::Uri = "/api/v1/bisects?status=a%00&x=1".parse().unwrap();
        assert_eq!(nul_in_uri(&uri).as_deref(), Some("status"));
        let uri: axum::http::Uri = "/api/v1/bisects?status=ok".parse().unwrap();
        assert_eq!(nul_in_uri(&uri), None);
    }

    #[test]
    fn names_the_field_of_a_rejection() {
        let p = vec!["id".to_string()];
        assert_eq!(
            field_of("Invalid URL: Cannot parse `abc` to a `i64`", &p).as_deref(),
            Some("id")
        );
        assert_eq!(
            field_of(
                "Failed to deserialize query string: missing field `bisect`",
                &[]
            )
            .as_deref(),
            Some("bisect")
        );
    }
}
