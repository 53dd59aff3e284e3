//! What the in-process server tests share: a fresh database in the suite's PostgreSQL
//! cluster with the schema and the test tokens, an `AppState` over it, and one request
//! through the real router.
#![allow(dead_code)] // each test file uses a different part

use axum::body::Body;
use axum::http::{Request, StatusCode};
use perfbisect_server::{AppState, api, auth, db};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
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
    auth::ensure_token(
        &pool,
        perfbisect_wire::states::TokenKind::Api,
        "test",
        TOKEN,
    )
    .await
    .unwrap();
    auth::ensure_token(
        &pool,
        perfbisect_wire::states::TokenKind::Enroll,
        "test",
        ENROLL,
    )
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

/// A state plus a real git repository made with the `git` command (see `make_repo`).
pub struct Fixture {
    pub state: AppState,
    pub _dir: tempfile::TempDir,
    pub repo: PathBuf,
}

/// Runs `git` in `dir` with a fixed identity; its trimmed standard output.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "T")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "T")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A repository: main has c1..c5 (tags v1, v5), a side branch forks at c2 with s1 (tag side).
pub fn make_repo(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    for i in 1..=5 {
        std::fs::write(dir.join("f"), format!("{i}\n")).unwrap();
        git(dir, &["add", "f"]);
        git(dir, &["commit", "-q", "-m", &format!("c{i}")]);
        if i == 1 {
            git(dir, &["tag", "v1"]);
        }
        if i == 2 {
            git(dir, &["branch", "side"]);
        }
    }
    git(dir, &["tag", "v5"]);
    git(dir, &["checkout", "-q", "side"]);
    std::fs::write(dir.join("g"), "side\n").unwrap();
    git(dir, &["add", "g"]);
    git(dir, &["commit", "-q", "-m", "s1"]);
    git(dir, &["tag", "sidetag"]);
    git(dir, &["checkout", "-q", "main"]);
}

pub async fn fixture() -> Fixture {
    let (state, dir) = state("http://test").await;
    let repo = dir.path().join("src");
    std::fs::create_dir_all(&repo).unwrap();
    make_repo(&repo);
    Fixture {
        state,
        _dir: dir,
        repo,
    }
}

/// One request through the router; the body as JSON (`Null` when empty or not JSON).
pub async fn call(
    f: &Fixture,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let (status, text) = request(&f.state, method, path, token, body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A minimal job spec whose run prints metric `t.x`.
pub const JOB: &str =
    "testcase: t\ntbox_group: g\nbuild: {command: 'true'}\nrun: {command: 'echo x: 1'}\n";

/// `fixture()` with its repository registered as `r`.
pub async fn with_repo() -> Fixture {
    let f = fixture().await;
    register_repo(&f).await;
    f
}

/// Registers the fixture's repository as `r` and waits for its mirror.
pub async fn register_repo(f: &Fixture) {
    let (s, v) = call(
        f,
        "POST",
        "/api/v1/repositories",
        Some(TOKEN),
        Some(serde_json::json!({"name": "r", "url": f.repo.display().to_string()})),
    )
    .await;
    assert_eq!(s, axum::http::StatusCode::ACCEPTED, "{v}");
    assert_eq!(v["state"], "mirroring", "{v}");
    wait_repository(&f.state, "r", "ready").await;
}

/// Registers worker `name` in host group `group` with the enrollment token; its token.
#[allow(dead_code, reason = "not every test binary registers workers")]
pub async fn register_worker(f: &Fixture, name: &str, group: &str) -> String {
    let (s, reg) = call(
        f,
        "POST",
        "/api/v1/worker/register",
        Some(ENROLL),
        Some(serde_json::json!({"name": name, "host_group": group})),
    )
    .await;
    assert_eq!(s, axum::http::StatusCode::OK, "{reg}");
    reg["token"].as_str().unwrap().to_string()
}

/// `POST /api/v1/bisects` with the test token.
pub async fn submit(f: &Fixture, body: Value) -> (StatusCode, Value) {
    call(f, "POST", "/api/v1/bisects", Some(TOKEN), Some(body)).await
}

/// Polls the bisect until it has left the `fetching` state (and the `queued` one it passes
/// through on its way to the first advance), with a deadline; its JSON.
pub async fn wait_resolved(f: &Fixture, id: &Value) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (_, v) = call(f, "GET", &format!("/api/v1/bisects/{id}"), None, None).await;
        if v["status"] != "fetching" && v["status"] != "queued" {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "{v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `GET /api/v1/repositories` until repository `name` is in `state` (`ready`,
/// `failed`), with a deadline; its JSON.
pub async fn wait_repository(state: &AppState, name: &str, wanted: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let (_, text) = request(state, "GET", "/api/v1/repositories", None, None).await;
        let list: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let repo = list
            .as_array()
            .and_then(|l| l.iter().find(|r| r["name"] == name).cloned());
        if let Some(r) = &repo
            && r["state"] == wanted
        {
            return r.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "repository {name} never reached {wanted}: {repo:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Stores a bisect's graph as a line: the good endpoint (idx -1), then `candidates` in
/// order, each the child of the one before (the first with no parent in the set). One
/// chunk row, as `store::candidates` writes it for up to 1,000 commits.
pub async fn store_line_graph(db: &sqlx::PgPool, bisect: i64, good: &str, candidates: &[&str]) {
    assert!(candidates.len() < 1000, "one chunk holds 1,000 commits");
    let shas: Vec<&str> = std::iter::once(good)
        .chain(candidates.iter().copied())
        .collect();
    // Candidate i (position i + 2 of the chunk, after the good endpoint) has parent i - 1;
    // the good endpoint and the first candidate have no parents in the set.
    let parents: Vec<i32> = (0..candidates.len() as i32 - 1).collect();
    let parent_of: Vec<i32> = (3..=candidates.len() as i32 + 1).collect();
    sqlx::query(
        "INSERT INTO bisect_graph_chunks
             (bisect_id, first_idx, shas, parents, parent_of, first_parent_outside)
         VALUES ($1, -1, $2, $3, $4, array_fill(false, ARRAY[cardinality($2::text[])]))",
    )
    .bind(bisect)
    .bind(&shas)
    .bind(&parents)
    .bind(&parent_of)
    .execute(db)
    .await
    .unwrap();
}
