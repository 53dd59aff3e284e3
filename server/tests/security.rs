//! The API as an attacker or a careless client meets it: who may call what (derived from
//! the OpenAPI document, so a new endpoint cannot be left out), and bad text at the edge.

mod common;

use common::{ENROLL, TOKEN, call, with_repo};
use serde_json::{Value, json};

/// Every string (and object key) position of `body`, each with a NUL put into it.
fn with_nul_everywhere(body: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    fn go(v: &Value, path: &str, root: &Value, out: &mut Vec<(String, Value)>) {
        match v {
            Value::String(_) => {
                let mut copy = root.clone();
                *copy.pointer_mut(path).unwrap() = Value::String("a\u{0}b".into());
                out.push((path.to_string(), copy));
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    go(x, &format!("{path}/{i}"), root, out);
                }
            }
            Value::Object(o) => {
                for (k, x) in o {
                    go(x, &format!("{path}/{k}"), root, out);
                    let mut copy = root.clone();
                    let parent = copy.pointer_mut(path).unwrap().as_object_mut().unwrap();
                    let moved = parent.remove(k).unwrap();
                    parent.insert(format!("{k}\u{0}"), moved);
                    out.push((format!("{path}/{k} (key)"), copy));
                }
            }
            _ => {}
        }
    }
    go(body, "", body, &mut out);
    out
}

#[tokio::test]
async fn a_nul_in_any_text_field_is_refused_with_the_field_named_never_a_5xx() {
    let f = with_repo().await;
    let (s, reg) = call(
        &f,
        "POST",
        "/api/v1/worker/register",
        Some(ENROLL),
        Some(json!({"name": "w1", "host_group": "g"})),
    )
    .await;
    assert!(s.is_success(), "{reg}");
    let worker = reg["token"].as_str().unwrap().to_string();
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let bodies: Vec<(&str, String, &str, Value)> = vec![
        (
            "POST",
            "/api/v1/repositories".into(),
            TOKEN,
            json!({"name": "r2", "url": "/tmp/x"}),
        ),
        (
            "POST",
            "/api/v1/bisects".into(),
            TOKEN,
            json!({"repository": "r", "good": "v1", "bad": "v5", "job": common::JOB,
                   "metric": "t.x", "direction": "higher", "notify": ["a@example.org"]}),
        ),
        (
            "PUT",
            "/api/v1/bisects/1/mail".into(),
            TOKEN,
            json!({"in_reply_to": "<a@b>", "reply_to": "a@example.org", "headers": [["X-Tag", "v"]]}),
        ),
        (
            "POST",
            "/api/v1/subscriptions".into(),
            TOKEN,
            json!({"email": "a@example.org", "repository": "r", "testcase": "t", "metric": "t.x", "events": ["found"]}),
        ),
        (
            "POST",
            "/api/v1/worker/register".into(),
            ENROLL,
            json!({"name": "w2", "host_group": "g", "machine": {"cpu_model": "c", "kernel": "k", "os": "o"}}),
        ),
        (
            "POST",
            "/api/v1/worker/tasks/1/runs".into(),
            &worker,
            json!({"iteration": 0, "sha": sha, "completed": true, "metrics": {"t.x": 1.0},
                   "log": "out", "started_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:00:01Z",
                   "environment": {"host": "h", "kernel_release": "6.1", "kernel_cmdline": "c", "cpu_governor": "g"}}),
        ),
        (
            "POST",
            "/api/v1/worker/tasks/1/builds".into(),
            &worker,
            json!({"sha": sha, "succeeded": true, "log": "built"}),
        ),
        (
            "POST",
            "/api/v1/worker/tasks/1/complete".into(),
            &worker,
            json!({"outcome": "error", "message": "m", "log_tail": "t", "failed_sha": sha}),
        ),
        (
            "POST",
            "/api/v1/worker/tasks/1/handback".into(),
            &worker,
            json!({"message": "m"}),
        ),
        (
            "POST",
            "/api/v1/worker/tasks/1/interrupted".into(),
            &worker,
            json!({"message": "m"}),
        ),
    ];
    let mut checked = 0;
    for (method, path, token, body) in &bodies {
        for (at, bad) in with_nul_everywhere(body) {
            let (status, answer) = call(&f, method, path, Some(token), Some(bad)).await;
            assert_eq!(
                status.as_u16(),
                422,
                "{method} {path} with a NUL at {at}: {answer}"
            );
            let field = answer["error"]["field"].as_str().unwrap_or_default();
            let want = at.trim_start_matches('/').split(['/', ' ']).next().unwrap();
            assert!(
                field.starts_with(want),
                "{method} {path}: NUL at {at} named field {field:?}"
            );
            checked += 1;
        }
    }
    assert!(checked > 40, "only {checked} positions checked");

    // A NUL inside the job spec's YAML (an escape, not a JSON NUL) is named by its key.
    let job = format!("{}params: {{p: \"a\\0b\"}}\n", common::JOB);
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(json!({"repository": "r", "good": "v1", "bad": "v5", "job": job, "metric": "t.x"})),
    )
    .await;
    assert!(s.is_client_error(), "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("params.p"),
        "{v}"
    );

    // Path, query and plain-text bodies.
    for path in [
        "/api/v1/kconfigs/a%00b",
        "/api/v1/bisects?status=a%00b",
        "/api/v1/tasks?bisect=1%00",
        "/bisects?status=a%00b",
    ] {
        let (s, v) = call(&f, "GET", path, Some(TOKEN), None).await;
        assert_eq!(s.as_u16(), 422, "{path}: {v}");
    }
    let req = axum::http::Request::builder()
        .method("PUT")
        .uri("/api/v1/kconfigs/k")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "text/plain")
        .body(axum::body::Body::from("CONFIG_A=y\n\0\n"))
        .unwrap();
    use tower::ServiceExt;
    let resp = perfbisect_server::api::router(f.state.clone())
        .oneshot(req)
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 422);
}

/// The credentials a request can carry.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cred {
    None,
    Reader,
    Submitter,
    Operator,
    Enroll,
    Worker,
}

const CREDS: [Cred; 6] = [
    Cred::None,
    Cred::Reader,
    Cred::Submitter,
    Cred::Operator,
    Cred::Enroll,
    Cred::Worker,
];

/// Who passes the gate of an operation whose `security` names `scheme` (None: open).
fn allowed(scheme: Option<&str>, cred: Cred, reads_need_token: bool) -> bool {
    match scheme {
        Some("api_token") => matches!(cred, Cred::Submitter | Cred::Operator),
        Some("operator_token") => cred == Cred::Operator,
        Some("enroll_token") => matches!(cred, Cred::Enroll | Cred::Operator),
        Some("worker_token") => cred == Cred::Worker,
        Some(other) => panic!("unknown security scheme {other}: add it to the matrix"),
        None => !reads_need_token || !matches!(cred, Cred::None | Cred::Enroll),
    }
}

struct Tokens {
    reader: String,
    operator: String,
    worker: String,
}

impl Tokens {
    fn of(&self, c: Cred) -> Option<&str> {
        match c {
            Cred::None => None,
            Cred::Reader => Some(&self.reader),
            Cred::Submitter => Some(TOKEN),
            Cred::Operator => Some(&self.operator),
            Cred::Enroll => Some(ENROLL),
            Cred::Worker => Some(&self.worker),
        }
    }
}

async fn tokens(f: &common::Fixture) -> Tokens {
    perfbisect_server::auth::ensure_token(
        &f.state.db,
        perfbisect_wire::states::TokenKind::Operator,
        "test",
        "test-operator-token",
    )
    .await
    .unwrap();
    let (s, v) = call(
        f,
        "POST",
        "/api/v1/tokens",
        Some("test-operator-token"),
        Some(json!({"name": "a reader", "role": "reader"})),
    )
    .await;
    assert_eq!(s.as_u16(), 201, "{v}");
    let reader = v["token"].as_str().unwrap().to_string();
    let (s, reg) = call(
        f,
        "POST",
        "/api/v1/worker/register",
        Some(ENROLL),
        Some(json!({"name": "matrix", "host_group": "g"})),
    )
    .await;
    assert!(s.is_success(), "{reg}");
    Tokens {
        reader,
        operator: "test-operator-token".into(),
        worker: reg["token"].as_str().unwrap().to_string(),
    }
}

/// Every operation of the OpenAPI document: method, path with its parameters filled in,
/// its security scheme, and whether it takes a body.
fn operations() -> Vec<(String, String, Option<String>, bool)> {
    let doc = serde_json::to_value(perfbisect_server::api::openapi()).unwrap();
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if !["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                continue;
            }
            let scheme = op["security"]
                .as_array()
                .and_then(|s| s.first())
                .and_then(|s| s.as_object())
                .and_then(|s| s.keys().next().cloned());
            // Ids that do not exist: an allowed call must change nothing.
            let concrete = path
                .split('/')
                .map(|seg| match seg {
                    "{id}" => "999999".to_string(),
                    s if s.starts_with('{') => "nosuch".to_string(),
                    s => s.to_string(),
                })
                .collect::<Vec<_>>()
                .join("/");
            let concrete = if concrete == "/api/v1/tasks" {
                "/api/v1/tasks?bisect=999999".into()
            } else {
                concrete
            };
            out.push((
                method.to_uppercase(),
                concrete,
                scheme,
                !op["requestBody"].is_null(),
            ));
        }
    }
    out
}

async fn check_matrix(f: &common::Fixture, t: &Tokens, reads_need_token: bool) -> usize {
    let mut checked = 0;
    for (method, path, scheme, has_body) in operations() {
        for cred in CREDS {
            let body = has_body.then(|| json!({}));
            let (status, v) = call(f, &method, &path, t.of(cred), body).await;
            let code = status.as_u16();
            assert!(code < 500, "{method} {path} as {cred:?}: {code} {v}");
            let passed = code != 401 && code != 403;
            assert_eq!(
                passed,
                allowed(scheme.as_deref(), cred, reads_need_token),
                "{method} {path} (security {scheme:?}, reads need a token: {reads_need_token}) as {cred:?}: {code} {v}"
            );
            checked += 1;
        }
    }
    checked
}

#[tokio::test]
async fn auth_matrix_every_endpoint_times_every_kind_of_credential() {
    let f = with_repo().await;
    let t = tokens(&f).await;
    let n = check_matrix(&f, &t, false).await;
    assert!(n >= 30 * CREDS.len(), "only {n} calls");

    // Reads may require a token: then nothing is open but /healthz and the worker protocol.
    let mut locked = common::Fixture {
        state: f.state.clone(),
        _dir: tempfile::tempdir().unwrap(),
        repo: f.repo.clone(),
    };
    locked.state.access = std::sync::Arc::new(perfbisect_server::auth::ReadAccess {
        require_token: true,
        trusted_user_header: Some(axum::http::HeaderName::from_static("x-forwarded-user")),
    });
    check_matrix(&locked, &t, true).await;
    for page in [
        "/bisects",
        "/hosts",
        "/queue",
        "/submit",
        "/api/openapi.json",
    ] {
        let (s, _) = common::request(&locked.state, "GET", page, None, None).await;
        assert_eq!(s.as_u16(), 401, "{page} without a token");
        let (s, _) = common::request(&locked.state, "GET", page, Some(&t.reader), None).await;
        assert!(s.is_success(), "{page} with a reader token: {s}");
    }
    let (s, _) = common::request(&locked.state, "GET", "/healthz", None, None).await;
    assert!(s.is_success());
    // Through a trusted proxy that names the user, and with the dashboard's cookie.
    use tower::ServiceExt;
    for (header, value) in [
        ("x-forwarded-user", "alice".to_string()),
        ("cookie", format!("perfbisect_token={}", t.reader)),
    ] {
        let req = axum::http::Request::builder()
            .uri("/bisects")
            .header(header, value)
            .body(axum::body::Body::empty())
            .unwrap();
        let resp = perfbisect_server::api::router(locked.state.clone())
            .oneshot(req)
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{header}: {}", resp.status());
    }
}

#[tokio::test]
async fn tokens_are_created_listed_revoked_and_startup_tokens_replace_the_last_ones() {
    let f = with_repo().await;
    let t = tokens(&f).await;
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/tokens",
        Some(&t.operator),
        Some(json!({"name": "ci", "role": "submitter"})),
    )
    .await;
    assert_eq!(s.as_u16(), 201, "{v}");
    let ci = v["token"].as_str().unwrap().to_string();
    let id = v["id"].as_i64().unwrap();
    let (s, _) = call(&f, "GET", "/api/v1/repositories", Some(&ci), None).await;
    assert!(s.is_success());
    let (s, list) = call(&f, "GET", "/api/v1/tokens", Some(&t.operator), None).await;
    assert!(s.is_success());
    assert!(
        !list.to_string().contains(&ci),
        "a listed token shows its value"
    );
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|x| x["id"] == id && x["role"] == "submitter")
    );
    let (s, _) = call(
        &f,
        "DELETE",
        &format!("/api/v1/tokens/{id}"),
        Some(&ci),
        None,
    )
    .await;
    assert_eq!(s.as_u16(), 403, "a submitter revoked a token");
    let (s, v) = call(
        &f,
        "DELETE",
        &format!("/api/v1/tokens/{id}"),
        Some(&t.operator),
        None,
    )
    .await;
    assert!(s.is_success(), "{v}");
    assert!(v["revoked_at"].is_string());
    let (s, _) = call(
        &f,
        "POST",
        "/api/v1/repositories",
        Some(&ci),
        Some(json!({"name": "r9", "url": f.repo.display().to_string()})),
    )
    .await;
    assert_eq!(s.as_u16(), 401, "a revoked token still works");

    // A restart with a new startup token revokes the previous startup token of that kind.
    use perfbisect_server::auth::replace_startup_token;
    replace_startup_token(
        &f.state.db,
        perfbisect_wire::states::TokenKind::Api,
        "first-startup-token",
    )
    .await
    .unwrap();
    let (s, _) = call(
        &f,
        "POST",
        "/api/v1/bisects/999999/cancel",
        Some("first-startup-token"),
        None,
    )
    .await;
    assert_eq!(s.as_u16(), 404);
    let revoked = replace_startup_token(
        &f.state.db,
        perfbisect_wire::states::TokenKind::Api,
        "second-startup-token",
    )
    .await
    .unwrap();
    assert!(revoked >= 1);
    let (s, _) = call(
        &f,
        "POST",
        "/api/v1/bisects/999999/cancel",
        Some("first-startup-token"),
        None,
    )
    .await;
    assert_eq!(s.as_u16(), 401, "the rotated-out token still works");
    let (s, _) = call(
        &f,
        "POST",
        "/api/v1/bisects/999999/cancel",
        Some("second-startup-token"),
        None,
    )
    .await;
    assert_eq!(s.as_u16(), 404);
}

#[tokio::test]
async fn a_worker_name_is_taken_over_only_with_its_token_or_an_operators() {
    let f = with_repo().await;
    let t = tokens(&f).await;
    let register = |token: String, body: Value| {
        let f = &f;
        async move {
            call(
                f,
                "POST",
                "/api/v1/worker/register",
                Some(&token),
                Some(body),
            )
            .await
        }
    };
    let (s, v) = register(ENROLL.into(), json!({"name": "matrix", "host_group": "g"})).await;
    assert_eq!(
        s.as_u16(),
        409,
        "the enrollment token took over a name: {v}"
    );
    assert!(v["error"]["message"].as_str().unwrap().contains("matrix"));
    let (s, _) = call(
        &f,
        "POST",
        "/api/v1/worker/claim",
        Some(&t.worker),
        Some(json!({"wait_secs": 0})),
    )
    .await;
    assert!(s.is_success(), "the refused takeover evicted the worker");
    let (s, v) = register(
        ENROLL.into(),
        json!({"name": "matrix", "host_group": "g", "previous_token": t.worker}),
    )
    .await;
    assert!(s.is_success(), "{v}");
    let second = v["token"].as_str().unwrap().to_string();
    let (s, _) = call(
        &f,
        "POST",
        "/api/v1/worker/claim",
        Some(&t.worker),
        Some(json!({"wait_secs": 0})),
    )
    .await;
    assert_eq!(s.as_u16(), 401, "the replaced token still works");
    let (s, v) = register(
        t.operator.clone(),
        json!({"name": "matrix", "host_group": "g"}),
    )
    .await;
    assert!(
        s.is_success(),
        "an operator could not take the name over: {v}"
    );
    let (s, _) = call(
        &f,
        "POST",
        "/api/v1/worker/claim",
        Some(&second),
        Some(json!({"wait_secs": 0})),
    )
    .await;
    assert_eq!(s.as_u16(), 401);
}

#[tokio::test]
async fn reserved_mail_headers_and_too_many_recipients_are_refused() {
    let f = with_repo().await;
    let (s, b) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(json!({"repository": "r", "good": "v1", "bad": "v5", "job": common::JOB, "metric": "t.x"})),
    )
    .await;
    assert!(s.is_success(), "{b}");
    let path = format!("/api/v1/bisects/{}/mail", b["id"]);
    for name in [
        "From",
        "Message-ID",
        "Content-Type",
        "Bcc",
        "Disposition-Notification-To",
    ] {
        let (s, v) = call(
            &f,
            "PUT",
            &path,
            Some(TOKEN),
            Some(json!({"headers": [["X-Ok", "1"], [name, "x"]]})),
        )
        .await;
        assert_eq!(s.as_u16(), 422, "{name}: {v}");
        assert_eq!(v["error"]["field"], "headers[1]", "{v}");
    }
    let (s, v) = call(
        &f,
        "PUT",
        &path,
        Some(TOKEN),
        Some(json!({"headers": [["X-Team", "perf"], ["List-Id", "<perf.example.org>"]]})),
    )
    .await;
    assert!(s.is_success(), "{v}");
    let many: Vec<String> = (0..101).map(|i| format!("u{i}@example.org")).collect();
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(json!({"repository": "r", "good": "v1", "bad": "v5", "job": common::JOB, "metric": "t.x", "notify": many})),
    )
    .await;
    assert_eq!(s.as_u16(), 422, "{v}");
    assert_eq!(v["error"]["field"], "notify");
    // A run command longer than the kernel takes as one argument is refused at submit.
    let long = format!(
        "testcase: t\ntbox_group: g\nbuild: {{command: 'true'}}\nrun: {{command: 'echo {}'}}\n",
        "x".repeat(70_000)
    );
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(json!({"repository": "r", "good": "v1", "bad": "v5", "job": long, "metric": "t.x"})),
    )
    .await;
    assert!(s.is_client_error(), "{v}");
    assert!(
        v["error"]["field"]
            .as_str()
            .unwrap()
            .contains("run.command"),
        "{v}"
    );
    // A body over the limit is 413 with the JSON error body.
    let huge = "y".repeat(3 << 20);
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/repositories",
        Some(TOKEN),
        Some(json!({"name": "big", "url": huge})),
    )
    .await;
    assert_eq!(s.as_u16(), 413, "{v}");
    // Path parameters that do not parse are named, as JSON.
    let (s, v) = call(&f, "GET", "/api/v1/bisects/abc", None, None).await;
    assert_eq!(s.as_u16(), 400, "{v}");
    assert_eq!(v["error"]["field"], "id", "{v}");
}

#[tokio::test]
async fn registration_answers_before_a_silent_remote_times_out() {
    let mut f = common::fixture().await;
    // The silent remote is on loopback: allowed explicitly.
    f.state.mirrors = (f.state.mirrors.clone())
        .with_url_policy(perfbisect_server::url_policy::UrlPolicy::allowing_private());
    perfbisect_server::repo_policy::set_fetch_timeouts(
        std::time::Duration::from_secs(2),
        std::time::Duration::from_secs(8),
    );
    // Accepts connections and never answers; says when one arrived.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (accepted, connections) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            held.push(conn);
            accepted.send(()).ok();
        }
    });
    let urls = [
        ("silent", format!("git://127.0.0.1:{port}/silent.git")),
        ("silent-http", format!("http://127.0.0.1:{port}/silent.git")),
    ];
    for (name, url) in &urls {
        let (s, v) = call(
            &f,
            "POST",
            "/api/v1/repositories",
            Some(TOKEN),
            Some(json!({"name": name, "url": url})),
        )
        .await;
        assert_eq!(s.as_u16(), 202, "{url}: {v}");
        assert_eq!(v["state"], "mirroring", "{v}");
    }
    // Both fetches reached the remote, which holds them: the registrations answered while
    // their fetches were still waiting for a first byte.
    for _ in &urls {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while connections.try_recv().is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "no fetch reached the remote"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    let (_, list) = call(&f, "GET", "/api/v1/repositories", None, None).await;
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .all(|r| r["state"] == "mirroring"),
        "{list}"
    );
    // A bisect submitted meanwhile waits for the fetch, then fails with its reason.
    let silent_bisect = json!({"repository": "silent", "good": "v1", "bad": "v5", "job": common::JOB, "metric": "t.x"});
    let (s, b) = common::submit(&f, silent_bisect.clone()).await;
    assert_eq!(s.as_u16(), 202, "{b}");
    assert_eq!(b["status"], "fetching", "{b}");
    for (name, url) in &urls {
        let r = common::wait_repository(&f.state, name, "failed").await;
        let msg = r["fetch_error"].as_str().unwrap().to_lowercase();
        assert!(
            msg.contains("timed out") || msg.contains("timeout"),
            "{url}: {msg}"
        );
    }
    let failed = common::wait_resolved(&f, &b["id"]).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let reason = failed["status_reason"].as_str().unwrap();
    assert!(reason.contains("could not be fetched"), "{reason}");
    // A failed repository refuses submissions with its error, and may be registered again.
    let (s, v) = common::submit(&f, silent_bisect.clone()).await;
    assert_eq!(s.as_u16(), 422, "{v}");
    assert_eq!(v["error"]["field"], "repository", "{v}");
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/repositories",
        Some(TOKEN),
        Some(json!({"name": "silent", "url": f.repo.display().to_string()})),
    )
    .await;
    assert_eq!(s.as_u16(), 200, "{v}");
    assert_eq!(v["state"], "mirroring", "{v}");
    common::wait_repository(&f.state, "silent", "ready").await;
}
