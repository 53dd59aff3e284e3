//! The worker-lab API in-process, against a real PostgreSQL database (fresh per test): kernel
//! configs, build logs, run environments, task detail, hand-back and interrupted tasks.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use perfbisect_server::api;
use serde_json::{Value, json};
use tower::ServiceExt;

mod common;

use common::{ENROLL, Fixture, JOB, TOKEN, call, fixture, with_repo};

const KERNEL_JOB: &str = "testcase: t\ntbox_group: g\nkconfig: tiny-x86_64\nbuild: {kind: kernel}\ndeploy: {kind: qemu}\nrun: {command: 'echo x: 1'}\n";

async fn put_text(f: &Fixture, path: &str, token: Option<&str>, body: &str) -> StatusCode {
    let mut req = Request::builder().method("PUT").uri(path);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let req = req
        .header("content-type", "text/plain")
        .body(Body::from(body.to_string()))
        .unwrap();
    api::router(f.state.clone())
        .oneshot(req)
        .await
        .unwrap()
        .status()
}

async fn get_text(f: &Fixture, path: &str) -> (StatusCode, String) {
    let req = Request::builder().uri(path).body(Body::empty()).unwrap();
    let resp = api::router(f.state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 24)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// A submitted bisect, a registered worker ("h1") holding its first task: (bisect, token, task).
async fn holding_a_task(f: &Fixture) -> (i64, String, Value) {
    let (s, b) = call(
        f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(json!({"repository": "r", "good": "v1", "bad": "v5", "job": JOB, "metric": "t.x"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let token = register(f, "h1").await;
    let (s, task) = call(
        f,
        "POST",
        "/api/v1/worker/claim",
        Some(&token),
        Some(json!({"wait_secs": 0})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{task}");
    (b["id"].as_i64().unwrap(), token, task)
}

async fn register(f: &Fixture, name: &str) -> String {
    let (s, reg) = call(
        f,
        "POST",
        "/api/v1/worker/register",
        Some(ENROLL),
        Some(json!({"name": name, "host_group": "g"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{reg}");
    reg["token"].as_str().unwrap().to_string()
}

async fn task_row(f: &Fixture, id: i64) -> (String, i32, Option<i64>) {
    sqlx::query_as("SELECT state, attempts, host_id FROM tasks WHERE id = $1")
        .bind(id)
        .fetch_one(&f.state.db)
        .await
        .unwrap()
}

async fn events(f: &Fixture, bisect: i64) -> Vec<(String, String)> {
    sqlx::query_as("SELECT kind, message FROM bisect_events WHERE bisect_id = $1 ORDER BY id")
        .bind(bisect)
        .fetch_all(&f.state.db)
        .await
        .unwrap()
}

fn run_body(iteration: u32, sha: &str) -> Value {
    let now = chrono::Utc::now().to_rfc3339();
    json!({"iteration": iteration, "sha": sha, "completed": true, "metrics": {"t.x": 2.0},
           "started_at": now, "finished_at": now,
           "environment": {"host": "vm1", "kernel_release": "6.1.0-57-amd64",
                           "kernel_cmdline": "console=ttyS0", "boot_method": "qemu"}})
}

#[tokio::test]
async fn kconfigs_are_immutable_and_fetched_as_text() {
    let f = fixture().await;
    let config = "CONFIG_64BIT=y\nCONFIG_PRINTK=y\n";
    let path = "/api/v1/kconfigs/tiny-x86_64";
    assert_eq!(
        put_text(&f, path, None, config).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        put_text(&f, path, Some(TOKEN), "hello").await,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        put_text(&f, "/api/v1/kconfigs/a%20b", Some(TOKEN), config).await,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        put_text(&f, path, Some(TOKEN), config).await,
        StatusCode::CREATED
    );
    assert_eq!(
        put_text(&f, path, Some(TOKEN), config).await,
        StatusCode::OK
    );
    // The same name must always mean the same config: a job's hash names it.
    assert_eq!(
        put_text(&f, path, Some(TOKEN), "CONFIG_64BIT=n\n").await,
        StatusCode::CONFLICT
    );
    assert_eq!(
        get_text(&f, path).await,
        (StatusCode::OK, config.to_string())
    );
    assert_eq!(
        get_text(&f, "/api/v1/kconfigs/nope").await.0,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn a_kernel_job_needs_its_kconfig_stored() {
    let f = with_repo().await;
    let body =
        json!({"repository": "r", "good": "v1", "bad": "v5", "job": KERNEL_JOB, "metric": "t.x"});
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(body.clone()),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], json!("job.kconfig"));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tiny-x86_64"),
        "{v}"
    );
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(json!({
        "repository": "r", "good": "v1", "bad": "v5", "metric": "t.x",
        "job": KERNEL_JOB.replace("deploy: {kind: qemu}\n", "")})),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["field"], json!("job.deploy.kind"), "{v}");
    put_text(
        &f,
        "/api/v1/kconfigs/tiny-x86_64",
        Some(TOKEN),
        "CONFIG_64BIT=y\n",
    )
    .await;
    let (s, v) = call(&f, "POST", "/api/v1/bisects", Some(TOKEN), Some(body)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
}

#[tokio::test]
async fn a_handed_back_task_is_queued_again_without_losing_its_runs_or_an_attempt() {
    let f = with_repo().await;
    let (bisect, token, task) = holding_a_task(&f).await;
    let tid = task["task_id"].as_i64().unwrap();
    let sha = task["sha"].as_str().unwrap().to_string();
    assert_eq!(task["done_iterations"], json!([]));
    let (s, v) = call(
        &f,
        "POST",
        &format!("/api/v1/worker/tasks/{tid}/runs"),
        Some(&token),
        Some(run_body(0, &sha)),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let (s, v) = call(
        &f,
        "POST",
        &format!("/api/v1/worker/tasks/{tid}/handback"),
        Some(&token),
        Some(json!({"message": "SIGTERM"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(task_row(&f, tid).await, ("queued".to_string(), 0, None));
    // Handing back what one does not hold is refused.
    let (s, _) = call(
        &f,
        "POST",
        &format!("/api/v1/worker/tasks/{tid}/handback"),
        Some(&token),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert!(
        events(&f, bisect)
            .await
            .iter()
            .any(|(k, m)| k == "handed_back" && m.contains("SIGTERM"))
    );
    // The next holder is told which runs are stored, and the attempt counts once.
    let other = register(&f, "h2").await;
    let (s, again) = call(
        &f,
        "POST",
        "/api/v1/worker/claim",
        Some(&other),
        Some(json!({"wait_secs": 0})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{again}");
    assert_eq!(again["task_id"], json!(tid));
    assert_eq!(again["done_iterations"], json!([0]));
    assert_eq!(task_row(&f, tid).await.1, 1);
}

#[tokio::test]
async fn an_interrupted_task_is_requeued_at_once_and_recorded() {
    let f = with_repo().await;
    let (bisect, token, task) = holding_a_task(&f).await;
    let tid = task["task_id"].as_i64().unwrap();
    let body = json!({"message": "the worker stopped during run 2 of 5"});
    let (s, v) = call(
        &f,
        "POST",
        &format!("/api/v1/worker/tasks/{tid}/interrupted"),
        Some(&token),
        Some(body.clone()),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["requeued"], json!(true));
    let (state, attempts, host) = task_row(&f, tid).await;
    assert_eq!((state.as_str(), host), ("queued", None));
    assert_eq!(
        attempts, 1,
        "an interrupted attempt counts: the task may have brought the host down"
    );
    // Reported again (or after re-registration already requeued it): recorded, nothing moves.
    let (s, v) = call(
        &f,
        "POST",
        &format!("/api/v1/worker/tasks/{tid}/interrupted"),
        Some(&token),
        Some(body),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["requeued"], json!(false));
    let interrupted: Vec<_> = events(&f, bisect)
        .await
        .into_iter()
        .filter(|(k, m)| k == "interrupted" && m.contains("run 2 of 5") && m.contains("h1"))
        .collect();
    assert_eq!(interrupted.len(), 2, "{interrupted:?}");
    // A task that ended before the worker forgot it has no interruption to tell.
    let (s, again) = call(
        &f,
        "POST",
        "/api/v1/worker/claim",
        Some(&token),
        Some(json!({"wait_secs": 0})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{again}");
    let tid2 = again["task_id"].as_i64().unwrap();
    let (s, v) = call(
        &f,
        "POST",
        &format!("/api/v1/worker/tasks/{tid2}/complete"),
        Some(&token),
        Some(json!({"outcome": "build_failed", "message": "build exited with status 2"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let before = events(&f, bisect).await.len();
    let (s, v) = call(
        &f,
        "POST",
        &format!("/api/v1/worker/tasks/{tid2}/interrupted"),
        Some(&token),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["requeued"], json!(false));
    assert_eq!(
        events(&f, bisect).await.len(),
        before,
        "an ended task got an interruption event"
    );
    let (s, _) = call(
        &f,
        "POST",
        "/api/v1/worker/tasks/999999/interrupted",
        Some(&token),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn builds_and_run_environments_are_in_the_task_detail() {
    let f = with_repo().await;
    let (bisect, token, task) = holding_a_task(&f).await;
    let tid = task["task_id"].as_i64().unwrap();
    let sha = task["sha"].as_str().unwrap().to_string();
    let build = json!({"sha": sha, "succeeded": true, "cached": false, "duration_secs": 1.5, "log": "CC init/main.o\n"});
    let (s, v) = call(
        &f,
        "POST",
        &format!("/api/v1/worker/tasks/{tid}/builds"),
        Some(&token),
        Some(build),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let (s, _) = call(
        &f,
        "POST",
        &format!("/api/v1/worker/tasks/{tid}/builds"),
        Some(&token),
        Some(json!({"sha": "0".repeat(40), "succeeded": true})),
    )
    .await;
    assert_eq!(
        s,
        StatusCode::CONFLICT,
        "a build of a commit the task does not measure"
    );
    let (s, v) = call(
        &f,
        "POST",
        &format!("/api/v1/worker/tasks/{tid}/runs"),
        Some(&token),
        Some(run_body(0, &sha)),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let (s, detail) = call(&f, "GET", &format!("/api/v1/tasks/{tid}"), None, None).await;
    assert_eq!(s, StatusCode::OK, "{detail}");
    assert_eq!(detail["state"], json!("running"));
    assert_eq!(detail["host"], json!("h1"));
    assert_eq!(detail["builds"][0]["log"], json!("CC init/main.o\n"));
    assert_eq!(detail["builds"][0]["cached"], json!(false));
    let env = &detail["runs"][0]["environment"];
    assert_eq!(env["kernel_release"], json!("6.1.0-57-amd64"));
    assert_eq!(env["boot_method"], json!("qemu"));
    assert_eq!(env["host"], json!("vm1"));
    let (s, list) = call(
        &f,
        "GET",
        &format!("/api/v1/tasks?bisect={bisect}"),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == json!(tid)),
        "{list}"
    );
    let (s, _) = call(&f, "GET", "/api/v1/tasks/999999", None, None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn another_host_cannot_interrupt_a_task_or_write_into_its_bisect() {
    let f = with_repo().await;
    let (bisect, _h1, task) = holding_a_task(&f).await;
    let tid = task["task_id"].as_i64().unwrap();
    let other = register(&f, "h2").await;
    let before = events(&f, bisect).await.len();
    let (s, v) = call(
        &f,
        "POST",
        &format!("/api/v1/worker/tasks/{tid}/interrupted"),
        Some(&other),
        Some(json!({"message": "not mine"})),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(
        events(&f, bisect).await.len(),
        before,
        "a host that never held the task recorded an event"
    );
    let (state, attempts, host) = task_row(&f, tid).await;
    assert_eq!(
        (state.as_str(), attempts),
        ("running", 1),
        "the holder keeps its task"
    );
    assert!(host.is_some());
}
