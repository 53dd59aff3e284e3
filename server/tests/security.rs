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
