//! What the in-process server tests share: a fresh database in the suite's PostgreSQL
//! cluster with the schema and the test tokens, an `AppState` over it, and one request
//! through the real router.
#![allow(dead_code)] // each test file uses a different part

use axum::body::Body;
use axum::http::{Request, StatusCode};
use perfbisect_server::{AppState, api, auth, db};
use serde_json::Value;
use std::time::Duration;
use tower::ServiceExt;

pub const TOKEN: &str = "test-api-token";
pub const ENROLL: &str = "test-enroll-token";

/// A migrated, empty database with the API and enrollment tokens, and a state over it whose
/// data directory lives as long as the returned `TempDir`.
pub async fn state(public_url: &str) -> (AppState, tempfile::TempDir) {
    let url = perfbisect_server::pg::testing::fresh_database()
        .await
        .unwrap();
    let pool = db::connect(&url).await.unwrap();
    db::migrate(&pool).await.unwrap();
    auth::ensure_token(&pool, "api", "test", TOKEN)
        .await
        .unwrap();
    auth::ensure_token(&pool, "enroll", "test", ENROLL)
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let state = AppState::new(pool, dir.path(), Duration::from_secs(30), public_url.into());
    (state, dir)
}

/// One request through the router; the body as text.
pub async fn request(
    state: &AppState,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, String) {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let req = match body {
        Some(b) => req
            .header("content-type", "application/json")
            .body(Body::from(b.to_string()))
            .unwrap(),
        None => req.body(Body::empty()).unwrap(),
    };
    let resp = api::router(state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 24)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}
