//! The REST API in-process, against a real PostgreSQL database (fresh per test) and real git
//! repositories made with the `git` command.

use axum::http::StatusCode;
use perfbisect_server::AppState;
use serde_json::{Value, json};
use sqlx::Connection;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

mod common;

use common::{ENROLL, Fixture, JOB, TOKEN, call, fixture, git, register_worker, with_repo};

fn submit_body(good: &str, bad: &str) -> Value {
    json!({"repository": "r", "good": good, "bad": bad, "job": JOB, "metric": "t.x"})
}

async fn count(f: &Fixture, table: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
        .fetch_one(&f.state.db)
        .await
        .unwrap()
}

/// Asserts a 4xx naming `field`, and that no bisect, commit or task row was added.
async fn refused(f: &Fixture, body: Value, status: StatusCode, field: &str) -> String {
    // The subjects and authors of bisects stored earlier are filled in the background after
    // their submit: wait for those first, or their rows land between the two counts.
    let start = std::time::Instant::now();
    while count(f, "bisects WHERE details_missing").await > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "earlier bisects' details were never filled"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = (
        count(f, "bisects").await,
        count(f, "bisect_commits").await,
        count(f, "bisect_commit_details").await,
        count(f, "tasks").await,
    );
    let (s, v) = call(f, "POST", "/api/v1/bisects", Some(TOKEN), Some(body)).await;
    assert_eq!(s, status, "{v}");
    assert_eq!(v["error"]["field"], json!(field), "{v}");
    let after = (
        count(f, "bisects").await,
        count(f, "bisect_commits").await,
        count(f, "bisect_commit_details").await,
        count(f, "tasks").await,
    );
    assert_eq!(before, after, "a refused submission changed what is stored");
    v["error"]["message"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn submit_resolves_range_and_stores_candidates() {
    let f = with_repo().await;
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(submit_body("v1", "v5")),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["candidates_total"], json!(4));
    assert_eq!(
        v["good"]["sha"].as_str().unwrap(),
        git(&f.repo, &["rev-parse", "v1"])
    );
    assert_eq!(
        v["bad"]["sha"].as_str().unwrap(),
        git(&f.repo, &["rev-parse", "v5"])
    );
    let id = v["id"].as_i64().unwrap();
    // The first decision is to reproduce: tasks for the endpoints are queued.
    let (s, v) = call(&f, "GET", &format!("/api/v1/bisects/{id}"), None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["status"], json!("reproducing"), "{v}");
    assert!(v["tasks_pending"].as_u64().unwrap() >= 1, "{v}");
    let (s, list) = call(&f, "GET", "/api/v1/bisects?status=reproducing", None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(list["total"], json!(1));
}

#[tokio::test]
async fn short_sha_and_branch_resolve() {
    let f = with_repo().await;
    let short = git(&f.repo, &["rev-parse", "--short=8", "v1"]);
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(submit_body(&short, "main")),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["candidates_total"], json!(4));
}

#[tokio::test]
async fn bad_input_is_refused_with_the_field_named() {
    let f = with_repo().await;
    let msg = refused(
        &f,
        json!({"repository": "nope", "good": "v1", "bad": "v5", "job": JOB, "metric": "t.x"}),
        StatusCode::UNPROCESSABLE_ENTITY,
        "repository",
    )
    .await;
    assert!(msg.contains("nope"), "{msg}");
    let msg = refused(
        &f,
        submit_body("v1", "deadbeefdeadbeef"),
        StatusCode::UNPROCESSABLE_ENTITY,
        "bad",
    )
    .await;
    assert!(msg.contains("deadbeefdeadbeef"), "{msg}");
    let msg = refused(
        &f,
        submit_body("nosuchtag", "v5"),
        StatusCode::UNPROCESSABLE_ENTITY,
        "good",
    )
    .await;
    assert!(msg.contains("nosuchtag"), "{msg}");
    // Empty range: bad is an ancestor of good.
    let msg = refused(
        &f,
        submit_body("v5", "v1"),
        StatusCode::UNPROCESSABLE_ENTITY,
        "bad",
    )
    .await;
    assert!(msg.contains("empty"), "{msg}");
    let msg = refused(
        &f,
        submit_body("v5", "v5"),
        StatusCode::UNPROCESSABLE_ENTITY,
        "bad",
    )
    .await;
    assert!(msg.contains("empty"), "{msg}");
    // good not an ancestor of bad: refused, naming the merge base.
    let msg = refused(
        &f,
        submit_body("sidetag", "v5"),
        StatusCode::UNPROCESSABLE_ENTITY,
        "good",
    )
    .await;
    let base = git(&f.repo, &["merge-base", "sidetag", "v5"]);
    assert!(
        msg.contains(&base[..12]) && msg.contains("not an ancestor"),
        "{msg}"
    );
    // Malformed job specs name the key.
    let mut body = submit_body("v1", "v5");
    body["job"] =
        json!("testcase: t\ntbox_group: g\nbuild: {command: make}\nrun: {command: x}\nrunz: 3\n");
    let msg = refused(&f, body.clone(), StatusCode::BAD_REQUEST, "job").await;
    assert!(msg.contains("runz"), "{msg}");
    body["job"] = json!(
        "testcase: t\ntbox_group: g\nbuild: {command: make}\nrun: {command: x}\nruns_per_task: 0\n"
    );
    refused(
        &f,
        body.clone(),
        StatusCode::BAD_REQUEST,
        "job.runs_per_task",
    )
    .await;
    body["job"] = json!("[not, a, mapping");
    refused(&f, body, StatusCode::BAD_REQUEST, "job").await;
    // Field-level checks.
    let mut body = submit_body("v1", "v5");
    body["direction"] = json!("sideways");
    refused(&f, body, StatusCode::BAD_REQUEST, "direction").await;
    let mut body = submit_body("v1", "v5");
    body["confidence"] = json!(1.5);
    refused(&f, body, StatusCode::BAD_REQUEST, "confidence").await;
    let mut body = submit_body("v1", "v5");
    body["metric"] = json!("has space");
    refused(&f, body, StatusCode::BAD_REQUEST, "metric").await;
    let mut body = submit_body("v1", "v5");
    body.as_object_mut().unwrap().remove("metric");
    refused(&f, body, StatusCode::BAD_REQUEST, "metric").await;
    let mut body = submit_body("v1", "v5");
    body["colour"] = json!("blue");
    refused(&f, body, StatusCode::BAD_REQUEST, "colour").await;
}

#[tokio::test]
async fn merge_base_is_used_when_asked() {
    let f = with_repo().await;
    let mut body = submit_body("sidetag", "v5");
    body["use_merge_base"] = json!(true);
    let (s, v) = call(&f, "POST", "/api/v1/bisects", Some(TOKEN), Some(body)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(
        v["good"]["sha"].as_str().unwrap(),
        git(&f.repo, &["merge-base", "sidetag", "v5"])
    );
    assert_eq!(v["candidates_total"], json!(3));
    let (_, events) = call(
        &f,
        "GET",
        &format!("/api/v1/bisects/{}/events", v["id"]),
        None,
        None,
    )
    .await;
    assert!(
        events[0]["message"]
            .as_str()
            .unwrap()
            .contains("merge base"),
        "{events}"
    );
}

#[tokio::test]
async fn tokens_are_required_to_change_things() {
    let f = with_repo().await;
    let before = count(&f, "bisects").await;
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        None,
        Some(submit_body("v1", "v5")),
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Authorization")
    );
    let (s, _) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some("wrong"),
        Some(submit_body("v1", "v5")),
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    // The enrollment token is not an API token, and the reverse.
    let (s, _) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(ENROLL),
        Some(submit_body("v1", "v5")),
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _) = call(
        &f,
        "POST",
        "/api/v1/worker/register",
        Some(TOKEN),
        Some(json!({"name": "h", "host_group": "g"})),
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(count(&f, "bisects").await, before);
    let (s, _) = call(&f, "POST", "/api/v1/bisects/1/cancel", None, None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
}

/// A bisect with a task claimed by worker "h1" (a second worker "h2" registered too):
/// (task id, its runs, h1's token, h2's token).
async fn a_claimed_task(f: &Fixture) -> (i64, i64, String, String) {
    let (s, b) = call(
        f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(submit_body("v1", "v5")),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let h1 = register_worker(f, "h1", "g").await;
    let h2 = register_worker(f, "h2", "g").await;
    let (s, task) = call(
        f,
        "POST",
        "/api/v1/worker/claim",
        Some(&h1),
        Some(json!({"wait_secs": 0})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{task}");
    let runs = task["runs"].as_i64().unwrap() * if task["pair_sha"].is_string() { 2 } else { 1 };
    assert!(runs >= 2, "{task}");
    (task["task_id"].as_i64().unwrap(), runs, h1, h2)
}

/// How soon after its deployment a run came is the runner's to say (a VM a run, a boot per
/// side of a couple): what the worker uploads in `environment.runs_since_deploy` is what the
/// scheduler's evidence reads back; a run without it reads as unknown.
#[tokio::test]
async fn a_run_s_distance_from_its_deployment_is_read_back_for_the_engine() {
    let f = with_repo().await;
    let (tid, _, h1, _) = a_claimed_task(&f).await;
    let bisect: i64 = sqlx::query_scalar("SELECT bisect_id FROM tasks WHERE id = $1")
        .bind(tid)
        .fetch_one(&f.state.db)
        .await
        .unwrap();
    let now = chrono::Utc::now().to_rfc3339();
    let upload = |iteration: i32, environment: Value| {
        let body = json!({"iteration": iteration, "completed": true, "metrics": {"t.x": 2.0},
                          "started_at": now, "finished_at": now, "environment": environment});
        let (f, h1) = (&f, &h1);
        async move {
            let path = format!("/api/v1/worker/tasks/{tid}/runs");
            call(f, "POST", &path, Some(h1), Some(body)).await
        }
    };
    for (iteration, environment) in [
        (0, json!({"host": "vm", "runs_since_deploy": 0})),
        (1, json!({"host": "metal", "runs_since_deploy": 7})),
        (2, json!({"host": "local"})),
    ] {
        let (s, v) = upload(iteration, environment).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    // Not a count: refused with the field named, nothing stored.
    let (s, v) = upload(3, json!({"runs_since_deploy": -1})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert!(v.to_string().contains("runs_since_deploy"), "{v}");
    let mut conn = f.state.db.acquire().await.unwrap();
    let samples = perfbisect_server::store::runs::samples(&mut conn, bisect, "t.x")
        .await
        .unwrap();
    let read: Vec<Option<i64>> = samples.iter().map(|s| s.since_deploy).collect();
    assert_eq!(read, [Some(0), Some(7), None]);
}

/// What a boot costs is measured as it goes: a run that came first after a deployment holds
/// its boot (the ssh runner times it from before the boot), so its median over that of the
/// runs after it is the boot's cost, which sets how many runs one boot is worth.
#[tokio::test]
async fn a_boot_s_cost_is_read_from_the_runs_that_followed_one() {
    let f = with_repo().await;
    let (tid, runs, h1, _) = a_claimed_task(&f).await;
    assert!(runs >= 3, "{runs}");
    let job_spec: i64 = sqlx::query_scalar("SELECT job_spec_id FROM tasks WHERE id = $1")
        .bind(tid)
        .fetch_one(&f.state.db)
        .await
        .unwrap();
    let costs = |f: &common::Fixture| {
        let db = f.state.db.clone();
        async move {
            let mut conn = db.acquire().await.unwrap();
            perfbisect_server::findings::measured_costs(&mut conn, job_spec)
                .await
                .unwrap()
        }
    };
    let t0 = chrono::Utc::now();
    let at = |secs: i64| (t0 + chrono::Duration::seconds(secs)).to_rfc3339();
    // A run of the local runner says nothing of deployments: no boot cost is known.
    let run = |iteration: i32, from: i64, to: i64, environment: Value| {
        json!({"iteration": iteration, "completed": true, "metrics": {"t.x": 2.0},
               "started_at": at(from), "finished_at": at(to), "environment": environment})
    };
    let path = format!("/api/v1/worker/tasks/{tid}/runs");
    let (s, v) = call(&f, "POST", &path, Some(&h1), Some(run(0, 0, 10, json!({})))).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(costs(&f).await.boot_secs, 0.0);
    // A boot of 90 s before the first run of a deployment, 10 s runs after it.
    for (i, from, to, since) in [(1, 10, 110, 0), (2, 110, 120, 1)] {
        let body = run(i, from, to, json!({"runs_since_deploy": since}));
        let (s, v) = call(&f, "POST", &path, Some(&h1), Some(body)).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    let c = costs(&f).await;
    assert!((c.boot_secs - 90.0).abs() < 1e-6, "{c:?}");
    assert!((c.boot_in_runs() - 9.0).abs() < 1e-6, "{c:?}");
}

/// The uploads one statement stores together (`store::runs::upload_batch`) are each judged on
/// their own: in one batch, a valid run is stored, and a run out of the task's range, one by a
/// host that does not hold the task, one with an unknown token, one to a task that does not
/// exist and one without the bisect's metric are not, each answered with what it found.
#[tokio::test]
async fn uploads_stored_in_one_statement_are_each_judged_on_their_own() {
    use perfbisect_server::auth::hash_token;
    use perfbisect_server::store::runs::{NewUpload, upload_batch};
    let f = with_repo().await;
    let (tid, runs, h1, h2) = a_claimed_task(&f).await;
    let now = chrono::Utc::now();
    let upload = |token: &str, task: i64, iteration: i32, metrics: Value| NewUpload {
        token_hash: hash_token(token),
        task,
        sha: None,
        iteration,
        completed: true,
        metrics,
        log: String::new(),
        started_at: now,
        finished_at: now,
        environment: json!({}),
        writable: true,
    };
    let x = || json!({"t.x": 1.5});
    let batch = [
        upload(&h1, tid, 0, x()),
        upload(&h1, tid, runs as i32, x()),
        upload(&h2, tid, 1, x()),
        upload("not-a-token", tid, 1, x()),
        upload(&h1, tid + 1000, 0, x()),
        upload(&h1, tid, 1, json!({"t.y": 2.0})),
        NewUpload {
            writable: false,
            ..upload(&h1, tid, 1, x())
        },
        upload(&h1, tid, 0, x()),
    ];
    let answers = upload_batch(&f.state.db, &batch.iter().collect::<Vec<_>>(), 60.0, 30.0)
        .await
        .unwrap();
    assert_eq!(answers.len(), batch.len());
    let h1_id: i64 = sqlx::query_scalar("SELECT id FROM hosts WHERE name = 'h1'")
        .fetch_one(&f.state.db)
        .await
        .unwrap();
    let found: Vec<(Option<i64>, bool, bool, bool)> = answers
        .iter()
        .map(|a| (a.host, a.target.is_some(), a.stored, a.renewed))
        .collect();
    let h2_id = found[2].0;
    assert!(h2_id.is_some() && h2_id != Some(h1_id), "{found:?}");
    assert_eq!(
        found,
        vec![
            (Some(h1_id), true, true, true), // valid: stored, lease renewed
            // Not stored; h1 holds the task, whose lease the valid run renewed.
            (Some(h1_id), true, false, true), // iteration out of range
            (h2_id, true, false, false),      // not the holder
            (None, true, false, false),       // unknown token
            (Some(h1_id), false, false, false), // no such task
            (Some(h1_id), true, false, true), // no t.x in a completed run
            (Some(h1_id), true, false, true), // refused by the API already
            (Some(h1_id), true, true, true),  // the same iteration again: one row
        ]
    );
    let target = answers[0].target.as_ref().unwrap();
    assert_eq!(
        (target.holder, target.metric.as_str()),
        (Some(h1_id), "t.x")
    );
    let stored: Vec<(i32, f64)> =
        sqlx::query_as("SELECT iteration, (metrics->>'t.x')::float8 FROM runs WHERE task_id = $1")
            .bind(tid)
            .fetch_all(&f.state.db)
            .await
            .unwrap();
    assert_eq!(stored, vec![(0, 1.5)]);
}

/// The completions one statement makes together (`store::queue::complete_batch`) are each
/// judged on their own: the holder's ends its task (an error queues it again), and one by a
/// host that does not hold the task, one with an unknown token, a second one of a task and
/// one of a task that does not exist end nothing.
#[tokio::test]
async fn completions_made_in_one_statement_are_each_judged_on_their_own() {
    use perfbisect_server::auth::hash_token;
    use perfbisect_server::store::queue::{Completion, complete_batch};
    use perfbisect_wire::worker::TaskOutcome;
    let f = with_repo().await;
    let (t1, _, h1, h2) = a_claimed_task(&f).await;
    // A second task of the bisect, for h2.
    sqlx::query(
        "INSERT INTO tasks (bisect_id, sha, pair_sha, job_spec_id, host_group, runs, phase)
         SELECT bisect_id, sha, pair_sha, job_spec_id, host_group, runs, phase FROM tasks
         WHERE id = $1",
    )
    .bind(t1)
    .execute(&f.state.db)
    .await
    .unwrap();
    let (s, task) = call(
        &f,
        "POST",
        "/api/v1/worker/claim",
        Some(&h2),
        Some(json!({"wait_secs": 0})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{task}");
    let t2 = task["task_id"].as_i64().unwrap();
    let end = |token: &str, task: i64, outcome: TaskOutcome| Completion {
        token_hash: hash_token(token),
        task,
        outcome,
        message: Some(format!("ended by {token}")),
        log_tail: None,
        failed_sha: None,
    };
    let batch = [
        end(&h1, t1, TaskOutcome::Done),
        end(&h2, t2, TaskOutcome::Error),
        end(&h1, t2, TaskOutcome::Done),
        end("not-a-token", t1, TaskOutcome::Done),
        end(&h1, t1, TaskOutcome::BuildFailed),
        end(&h1, t2 + 1000, TaskOutcome::Done),
    ];
    let answers = complete_batch(&f.state.db, &batch.iter().collect::<Vec<_>>(), 30.0)
        .await
        .unwrap();
    let hosts: Vec<Option<i64>> = answers.iter().map(|a| a.host).collect();
    let (id1, id2) = (hosts[0].unwrap(), hosts[1].unwrap());
    assert_ne!(id1, id2);
    assert_eq!(
        hosts,
        vec![Some(id1), Some(id2), Some(id1), None, Some(id1), Some(id1)]
    );
    let ended: Vec<bool> = answers.iter().map(|a| a.owner.is_some()).collect();
    assert_eq!(ended, vec![true, true, false, false, false, false]);
    let rows: Vec<(String, Option<i64>, Option<String>)> = sqlx::query_as(
        "SELECT state, host_id, message FROM tasks WHERE id = ANY($1) ORDER BY id = $2 DESC",
    )
    .bind(vec![t1, t2])
    .bind(t1)
    .fetch_all(&f.state.db)
    .await
    .unwrap();
    assert_eq!(
        rows,
        vec![
            (
                "done".to_string(),
                Some(id1),
                Some(format!("ended by {h1}"))
            ),
            ("queued".to_string(), None, Some(format!("ended by {h2}"))),
        ]
    );
}

/// Uploads that arrive together (they share statements) each get the answer their own run
/// deserves, and only the valid runs are stored, once each.
#[tokio::test]
async fn uploads_that_arrive_together_each_get_their_own_answer() {
    let f = with_repo().await;
    let (tid, runs, h1, h2) = a_claimed_task(&f).await;
    let now = chrono::Utc::now().to_rfc3339();
    let path = format!("/api/v1/worker/tasks/{tid}/runs");
    let run = |iteration: i64, metrics: Value| {
        json!({"iteration": iteration, "completed": true, "metrics": metrics,
               "started_at": now, "finished_at": now})
    };
    let x = json!({"t.x": 1.0});
    // (token, path, body, expected status), sent at once, valid uploads twice each.
    let mut calls: Vec<(String, String, Value, StatusCode)> = Vec::new();
    for i in 0..runs {
        for _ in 0..2 {
            calls.push((
                h1.clone(),
                path.clone(),
                run(i, x.clone()),
                StatusCode::CREATED,
            ));
        }
    }
    calls.push((
        h1.clone(),
        path.clone(),
        run(runs, x.clone()),
        StatusCode::BAD_REQUEST,
    ));
    calls.push((
        h2.clone(),
        path.clone(),
        run(0, x.clone()),
        StatusCode::CONFLICT,
    ));
    calls.push((
        "nobody".into(),
        path.clone(),
        run(0, x.clone()),
        StatusCode::UNAUTHORIZED,
    ));
    calls.push((
        h1.clone(),
        format!("/api/v1/worker/tasks/{}/runs", tid + 1000),
        run(0, x.clone()),
        StatusCode::NOT_FOUND,
    ));
    calls.push((
        h1.clone(),
        path.clone(),
        run(0, json!({"t.y": 1.0})),
        StatusCode::UNPROCESSABLE_ENTITY,
    ));
    // A body the API cannot read is judged after the token: 401 for a stranger, 400 for h1.
    calls.push((
        "nobody".into(),
        path.clone(),
        json!({"iteration": "zero"}),
        StatusCode::UNAUTHORIZED,
    ));
    calls.push((
        h1.clone(),
        path.clone(),
        json!({"iteration": "zero"}),
        StatusCode::BAD_REQUEST,
    ));
    let answers = futures_util::future::join_all(
        calls
            .iter()
            .map(|(token, path, body, _)| call(&f, "POST", path, Some(token), Some(body.clone()))),
    )
    .await;
    for ((_, path, body, wanted), (status, answer)) in calls.iter().zip(&answers) {
        assert_eq!(status, wanted, "{path} {body}: {answer}");
    }
    let stored: BTreeSet<i32> = sqlx::query_scalar("SELECT iteration FROM runs WHERE task_id = $1")
        .bind(tid)
        .fetch_all(&f.state.db)
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(stored, (0..runs as i32).collect());
    assert_eq!(count(&f, "runs").await, runs);
}

#[tokio::test]
async fn worker_protocol_claim_upload_and_metric_check() {
    let f = with_repo().await;
    let (_, b) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(submit_body("v1", "v5")),
    )
    .await;
    let bisect = b["id"].as_i64().unwrap();
    let (s, reg) = call(
        &f,
        "POST",
        "/api/v1/worker/register",
        Some(ENROLL),
        Some(json!({"name": "h1", "host_group": "g", "machine": {"threads": 4}})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{reg}");
    let wt = reg["token"].as_str().unwrap().to_string();
    let (s, task) = call(
        &f,
        "POST",
        "/api/v1/worker/claim",
        Some(&wt),
        Some(json!({"wait_secs": 0})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{task}");
    assert_eq!(task["bisect_id"], json!(bisect));
    assert_eq!(task["metric"], json!("t.x"));
    let tid = task["task_id"].as_i64().unwrap();
    let now = chrono::Utc::now().to_rfc3339();
    // A complete run without the bisect's metric is refused, naming the metric and what came.
    let (s, v) = call(&f, "POST", &format!("/api/v1/worker/tasks/{tid}/runs"), Some(&wt), Some(json!({
        "iteration": 0, "completed": true, "metrics": {"t.y": 2.0}, "started_at": now, "finished_at": now}))).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], json!("metrics"));
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("t.x") && msg.contains("t.y"), "{msg}");
    assert_eq!(count(&f, "runs").await, 0);
    // A good run is stored once, however often it is uploaded.
    for _ in 0..2 {
        let (s, v) = call(&f, "POST", &format!("/api/v1/worker/tasks/{tid}/runs"), Some(&wt), Some(json!({
            "iteration": 0, "completed": true, "metrics": {"t.x": 2.0}, "started_at": now, "finished_at": now}))).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    assert_eq!(count(&f, "runs").await, 1);
    // Another host cannot upload to a task it does not hold.
    let (_, reg2) = call(
        &f,
        "POST",
        "/api/v1/worker/register",
        Some(ENROLL),
        Some(json!({"name": "h2", "host_group": "g"})),
    )
    .await;
    let wt2 = reg2["token"].as_str().unwrap().to_string();
    let (s, _) = call(&f, "POST", &format!("/api/v1/worker/tasks/{tid}/runs"), Some(&wt2), Some(json!({
        "iteration": 1, "completed": true, "metrics": {"t.x": 2.0}, "started_at": now, "finished_at": now}))).await;
    assert_eq!(s, StatusCode::CONFLICT);
    // Heartbeats renew; after cancel they say stop.
    let (s, hb) = call(
        &f,
        "POST",
        &format!("/api/v1/worker/tasks/{tid}/heartbeat"),
        Some(&wt),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(hb["cancelled"], json!(false));
    let (s, v) = call(
        &f,
        "POST",
        &format!("/api/v1/bisects/{bisect}/cancel"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["status"], json!("cancelled"));
    let (_, hb) = call(
        &f,
        "POST",
        &format!("/api/v1/worker/tasks/{tid}/heartbeat"),
        Some(&wt),
        None,
    )
    .await;
    assert_eq!(hb["cancelled"], json!(true));
    let (s, _) = call(
        &f,
        "POST",
        &format!("/api/v1/bisects/{bisect}/cancel"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);
    // Nothing is claimable any more.
    let (s, _) = call(
        &f,
        "POST",
        "/api/v1/worker/claim",
        Some(&wt),
        Some(json!({"wait_secs": 0})),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn expired_lease_goes_back_to_the_queue() {
    let f = with_repo().await;
    let state = AppState {
        lease: Duration::from_millis(1),
        ..f.state.clone()
    };
    let f = Fixture { state, ..f };
    call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(submit_body("v1", "v5")),
    )
    .await;
    let wt = register_worker(&f, "h1", "g").await;
    let (s, task) = call(
        &f,
        "POST",
        "/api/v1/worker/claim",
        Some(&wt),
        Some(json!({"wait_secs": 0})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let tid = task["task_id"].as_i64().unwrap();
    // Wait until the database's clock has passed the lease (1 ms), then reap.
    sqlx::query("SELECT pg_sleep(0.01)")
        .execute(&f.state.db)
        .await
        .unwrap();
    perfbisect_server::queue::reap_once(&f.state).await.unwrap();
    let (state, attempts): (String, i32) =
        sqlx::query_as("SELECT state, attempts FROM tasks WHERE id = $1")
            .bind(tid)
            .fetch_one(&f.state.db)
            .await
            .unwrap();
    assert_eq!((state.as_str(), attempts), ("queued", 1));
    // The old holder is told to stop; another host gets the same task.
    let (_, hb) = call(
        &f,
        "POST",
        &format!("/api/v1/worker/tasks/{tid}/heartbeat"),
        Some(&wt),
        None,
    )
    .await;
    assert_eq!(hb["cancelled"], json!(true));
    let (_, reg2) = call(
        &f,
        "POST",
        "/api/v1/worker/register",
        Some(ENROLL),
        Some(json!({"name": "h2", "host_group": "g"})),
    )
    .await;
    let wt2 = reg2["token"].as_str().unwrap().to_string();
    let (_, again) = call(
        &f,
        "POST",
        "/api/v1/worker/claim",
        Some(&wt2),
        Some(json!({"wait_secs": 0})),
    )
    .await;
    assert_eq!(again["task_id"].as_i64(), Some(tid), "{again}");
}

#[tokio::test]
async fn openapi_document_lists_the_api() {
    let f = fixture().await;
    let (s, doc) = call(&f, "GET", "/api/openapi.json", None, None).await;
    assert_eq!(s, StatusCode::OK);
    for path in [
        "/api/v1/bisects",
        "/api/v1/bisects/{id}",
        "/api/v1/bisects/{id}/cancel",
        "/api/v1/worker/claim",
        "/api/v1/repositories",
        "/api/v1/hosts",
    ] {
        assert!(
            doc["paths"][path].is_object(),
            "{path} missing from the OpenAPI document"
        );
    }
    // The served document is `api::openapi()`.
    let built = serde_json::to_value(perfbisect_server::api::openapi()).unwrap();
    assert_eq!(doc["paths"], built["paths"]);
}

/// Every route the router serves, with its methods (HEAD left out: axum adds it to GET), as
/// axum's `Debug` of the router lists them: `routes: {RouteId(n): MethodRouter(..
/// allow_header: Bytes(b"GET,HEAD")), ..}` and `node: Node { paths: {RouteId(n): "/path", ..}`.
fn served_routes(router: &axum::Router) -> BTreeMap<String, BTreeSet<String>> {
    let debug = format!("{router:?}");
    // The fallback router's own paths are not routes.
    let debug = &debug[..debug.find("fallback_router:").expect("axum's Router Debug")];
    let (routes, node) = debug
        .split_once("node: Node { paths: {")
        .expect("axum's Router Debug names its paths");
    let mut methods: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for entry in routes.split("RouteId(").skip(1) {
        let (id, rest) = entry.split_once(')').unwrap();
        let allowed = rest
            .split_once("allow_header: Bytes(b\"")
            .and_then(|(_, h)| h.split_once('"'))
            .map_or("", |(h, _)| h);
        methods.insert(
            id,
            allowed
                .split(',')
                .filter(|m| !m.is_empty() && *m != "HEAD")
                .map(str::to_lowercase)
                .collect(),
        );
    }
    let mut out = BTreeMap::new();
    for entry in node.split("RouteId(").skip(1) {
        let (id, rest) = entry.split_once("): \"").unwrap();
        let path = rest.split_once('"').unwrap().0.to_string();
        out.insert(path, methods.get(id).cloned().unwrap_or_default());
    }
    out
}

/// One route list feeds the router and the OpenAPI document: every API route the router
/// serves is in the document with the same methods, and nothing else is served but the pages.
#[tokio::test]
async fn openapi_document_lists_every_route_the_router_serves() {
    let f = fixture().await;
    let served = served_routes(&perfbisect_server::api::router(f.state.clone()));
    let doc = serde_json::to_value(perfbisect_server::api::openapi()).unwrap();
    let documented: BTreeMap<String, BTreeSet<String>> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(path, item)| {
            (
                path.clone(),
                item.as_object().unwrap().keys().cloned().collect(),
            )
        })
        .collect();
    let (api, rest): (BTreeMap<_, _>, BTreeMap<_, _>) = served
        .into_iter()
        .partition(|(path, _)| path.starts_with("/api/v1/"));
    assert!(
        api.len() >= 40,
        "only {} API routes found: {api:?}",
        api.len()
    );
    assert_eq!(
        api, documented,
        "the router's API routes and the OpenAPI document differ"
    );
    // Served beside the API, undocumented by design: the dashboard, health, metrics, the
    // document itself and its Swagger UI.
    let rest: Vec<&str> = rest.keys().map(String::as_str).collect();
    assert_eq!(
        rest,
        [
            "/",
            "/api/openapi.json",
            "/bisects",
            "/bisects/{id}",
            "/bisects/{id}/live",
            "/docs",
            "/docs/",
            "/docs/{*rest}",
            "/healthz",
            "/hosts",
            "/metrics",
            "/queue",
            "/static/{name}",
            "/submit",
            "/tasks/{id}",
            "/watches",
            "/watches/{id}",
        ],
        "a route outside /api/v1 (document it, or list it here if it is a page)"
    );
}

#[tokio::test]
async fn a_merge_whose_first_parent_is_good_is_marked_for_first_parent_mode() {
    let f = with_repo().await;
    // X = merge of side's s1 into c2 (detached): first parent c2 is good, second parent s1 a candidate.
    git(&f.repo, &["checkout", "-q", "--detach", "main~3"]);
    git(
        &f.repo,
        &["merge", "-q", "--no-ff", "-m", "merge side", "sidetag"],
    );
    git(&f.repo, &["tag", "x"]);
    git(&f.repo, &["checkout", "-q", "main"]);
    let mut body = submit_body("main~3", "x");
    body["first_parent"] = json!(true);
    let (s, v) = call(&f, "POST", "/api/v1/bisects", Some(TOKEN), Some(body)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["candidates_total"], json!(2), "{v}");
    let id = v["id"].as_i64().unwrap();
    let rows: Vec<(String, Vec<i32>, bool)> = sqlx::query_as(
        "SELECT sha, parents, first_parent_outside FROM bisect_commits WHERE bisect_id = $1 AND idx >= 0 ORDER BY idx",
    )
    .bind(id)
    .fetch_all(&f.state.db)
    .await
    .unwrap();
    let x = git(&f.repo, &["rev-parse", "x"]);
    let s1 = git(&f.repo, &["rev-parse", "sidetag"]);
    assert_eq!(
        rows[0],
        (s1, vec![], false),
        "s1 has no parent among the candidates"
    );
    assert_eq!(
        rows[1],
        (x, vec![0], true),
        "x's first parent (c2) is good, its second is s1"
    );
    let first_parent: bool = sqlx::query_scalar("SELECT first_parent FROM bisects WHERE id = $1")
        .bind(id)
        .fetch_one(&f.state.db)
        .await
        .unwrap();
    assert!(first_parent);
}

#[tokio::test]
async fn a_metric_the_job_never_produced_is_refused_and_the_known_names_are_listed() {
    let f = with_repo().await;
    // Nothing is known about a job that never ran: any well-formed name is taken.
    let (s, first) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(submit_body("v1", "v5")),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{first}");
    let host: i64 = sqlx::query_scalar(
        "INSERT INTO hosts (name, host_group, machine, token_hash) VALUES ('h', 'g', '{}', 'x') RETURNING id",
    )
    .fetch_one(&f.state.db)
    .await
    .unwrap();
    let task: i64 = sqlx::query_scalar(
        "INSERT INTO tasks (bisect_id, sha, job_spec_id, host_group, runs, phase, state)
         SELECT id, good_sha, job_spec_id, 'g', 1, 'reproducing', 'done' FROM bisects WHERE id = $1 RETURNING id",
    )
    .bind(first["id"].as_i64().unwrap())
    .fetch_one(&f.state.db)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO runs (task_id, bisect_id, sha, host_id, iteration, completed, metrics, started_at, finished_at)
         SELECT $1, bisect_id, sha, $2, 0, true, '{\"t.x\": 1, \"time.elapsed_time\": 0.1}', now(), now()
         FROM tasks WHERE id = $1",
    )
    .bind(task)
    .bind(host)
    .execute(&f.state.db)
    .await
    .unwrap();

    // Now the job's names are known: a name it never produced is refused, naming them.
    let mut body = submit_body("v1", "v5");
    body["metric"] = json!("t.y");
    let message = refused(&f, body, StatusCode::UNPROCESSABLE_ENTITY, "metric").await;
    assert!(
        message.contains("`t.y`") && message.contains("t.x, time.elapsed_time"),
        "{message}"
    );
    let (s, again) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(submit_body("v1", "v5")),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "a produced name is taken: {again}");

    // The names can be looked up by job hash before submitting.
    let hash = first["job_hash"].as_str().unwrap();
    let (s, names) = call(
        &f,
        "GET",
        &format!("/api/v1/metric-names?job={hash}"),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(names["metrics"], json!(["t.x", "time.elapsed_time"]));
    let (s, bad) = call(&f, "GET", "/api/v1/metric-names?job=zz", None, None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(bad["error"]["field"], "job");
}

#[tokio::test]
async fn the_bisect_json_carries_the_materials_to_reproduce() {
    let f = fixture().await;
    let template = "https://git.example.org/cgit/r.git/commit/?id={sha}";
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/repositories",
        Some(TOKEN),
        Some(json!({"name": "r", "url": f.repo.display().to_string(), "web_url": template})),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    common::wait_repository(&f.state, "r", "ready").await;
    let job = format!("{JOB}kconfig: x86_64-rhel-9.4\n");
    let mut body = submit_body("v1", "v5");
    body["job"] = json!(job);
    let (s, v) = common::submit(&f, body).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let id = v["id"].as_i64().unwrap();
    let (good, bad) = (
        git(&f.repo, &["rev-parse", "v1"]),
        git(&f.repo, &["rev-parse", "v5"]),
    );
    let (_, v) = call(&f, "GET", &format!("/api/v1/bisects/{id}"), None, None).await;
    let m = &v["materials"];
    assert_eq!(
        m["job_url"],
        json!(format!("http://test/api/v1/bisects/{id}/job.yaml")),
        "{m}"
    );
    assert_eq!(
        m["kconfig_url"],
        json!("http://test/api/v1/kconfigs/x86_64-rhel-9.4")
    );
    let line = m["submit_line"].as_str().unwrap();
    assert!(
        line.starts_with("perfbisect submit --server http://test --repo r")
            && line.contains(&format!("--good {good} --bad {bad}")),
        "{line}"
    );
    assert_eq!(
        m["commit_links"],
        json!([
            {"role": "good", "sha": good, "url": template.replace("{sha}", &good)},
            {"role": "bad", "sha": bad, "url": template.replace("{sha}", &bad)},
        ])
    );
    // The job spec link serves the YAML as submitted.
    let (s, text) = common::request(
        &f.state,
        "GET",
        &format!("/api/v1/bisects/{id}/job.yaml"),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(text, job);
    // And the OpenAPI document describes them.
    let (_, doc) = call(&f, "GET", "/api/openapi.json", None, None).await;
    let schemas = &doc["components"]["schemas"];
    assert!(
        schemas["Bisect"]["properties"]["materials"].is_object(),
        "{}",
        schemas["Bisect"]
    );
    for field in ["job_url", "kconfig_url", "submit_line", "commit_links"] {
        assert!(
            schemas["BisectMaterials"]["properties"][field].is_object(),
            "{field}: {}",
            schemas["BisectMaterials"]
        );
    }
    assert!(schemas["CommitLink"]["properties"]["url"].is_object());
}

#[tokio::test]
async fn a_bisect_submitted_while_mirroring_waits_and_an_unknown_revision_fails_it() {
    let f = fixture().await;
    // The test holds the repository's fetch lock, as another replica mid-fetch would.
    let mut holder = sqlx::PgConnection::connect_with(&f.state.db.connect_options())
        .await
        .unwrap();
    sqlx::query("SELECT pg_advisory_lock($1, 1)")
        .bind(perfbisect_server::store::fetches::FETCH_LOCK_CLASS)
        .execute(&mut holder)
        .await
        .unwrap();
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/repositories",
        Some(TOKEN),
        Some(json!({"name": "r", "url": f.repo.display().to_string()})),
    )
    .await;
    assert_eq!(
        (s, v["id"].as_i64()),
        (StatusCode::ACCEPTED, Some(1)),
        "{v}"
    );
    let (s, ok) = common::submit(&f, submit_body("v1", "v5")).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{ok}");
    assert_eq!(ok["status"], json!("fetching"), "{ok}");
    assert_eq!(ok["candidates_total"], json!(0), "{ok}");
    let (s, bad) = common::submit(&f, submit_body("v1", "nosuchtag")).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{bad}");
    let (_, list) = call(&f, "GET", "/api/v1/bisects?status=fetching", None, None).await;
    assert_eq!(list["total"], json!(2), "{list}");
    // The dashboard shows it waiting, and the list filters on the status.
    let (s, page) = common::request(
        &f.state,
        "GET",
        &format!("/bisects/{}", ok["id"]),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert!(page.contains("fetching"), "{page}");
    let (s, page) = common::request(&f.state, "GET", "/bisects?status=fetching", None, None).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    // Still mirroring while the lock is held: nothing fetched behind the holder's back.
    let (_, repos) = call(&f, "GET", "/api/v1/repositories", None, None).await;
    assert_eq!(repos[0]["state"], json!("mirroring"), "{repos}");
    holder.close().await.unwrap();
    common::wait_repository(&f.state, "r", "ready").await;
    let ok = common::wait_resolved(&f, &ok["id"]).await;
    assert_eq!(ok["status"], json!("reproducing"), "{ok}");
    assert_eq!(ok["candidates_total"], json!(4));
    assert_eq!(
        ok["bad"]["sha"].as_str().unwrap(),
        git(&f.repo, &["rev-parse", "v5"])
    );
    let bad = common::wait_resolved(&f, &bad["id"]).await;
    assert_eq!(bad["status"], json!("failed"), "{bad}");
    let reason = bad["status_reason"].as_str().unwrap();
    assert!(reason.contains("nosuchtag"), "{reason}");
    // Its report says why, as any failed bisect's does.
    let (s, report) = common::request(
        &f.state,
        "GET",
        &format!("/api/v1/bisects/{}/report", bad["id"]),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{report}");
    assert!(report.contains("nosuchtag"), "{report}");
    let (_, events) = call(
        &f,
        "GET",
        &format!("/api/v1/bisects/{}/events", ok["id"]),
        None,
        None,
    )
    .await;
    let kinds: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(&kinds[..2], ["fetching", "submitted"], "{events}");
}

type StoredCommit = (i32, String, Vec<i32>, String, String);

/// A bisect's stored commits with their subjects and authors, by idx (empty details where
/// they are missing).
async fn stored_commits(f: &Fixture, id: i64) -> Vec<StoredCommit> {
    sqlx::query_as(
        "SELECT c.idx, c.sha, c.parents, coalesce(d.subject, ''), coalesce(d.author, '')
         FROM bisect_commits c
         LEFT JOIN bisect_commit_details d ON d.bisect_id = c.bisect_id AND d.idx = c.idx
         WHERE c.bisect_id = $1 ORDER BY c.idx",
    )
    .bind(id)
    .fetch_all(&f.state.db)
    .await
    .unwrap()
}

async fn details_missing(f: &Fixture, id: i64) -> bool {
    sqlx::query_scalar("SELECT details_missing FROM bisects WHERE id = $1")
        .bind(id)
        .fetch_one(&f.state.db)
        .await
        .unwrap()
}

/// Polls until the bisect's details are stored (the flag cleared, in the transaction
/// that stores them), with a deadline.
async fn wait_details(f: &Fixture, id: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while details_missing(f, id).await {
        assert!(
            std::time::Instant::now() < deadline,
            "bisect {id}: details never filled"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a server that died between the submit's commit and its fill leaves: the graph,
/// no details, the flag set.
async fn lose_details(f: &Fixture, id: i64) {
    sqlx::query("DELETE FROM bisect_commit_details WHERE bisect_id = $1")
        .bind(id)
        .execute(&f.state.db)
        .await
        .unwrap();
    sqlx::query("UPDATE bisects SET details_missing = true WHERE id = $1")
        .bind(id)
        .execute(&f.state.db)
        .await
        .unwrap();
}

/// Submits `good..m`, where m merges `sidetag` into main: a range with a merge.
async fn submit_merge_range(f: &Fixture) -> i64 {
    git(&f.repo, &["checkout", "-q", "main"]);
    git(
        &f.repo,
        &[
            "merge",
            "-q",
            "--no-ff",
            "-m",
            "merge side\n\nwith  a body",
            "sidetag",
        ],
    );
    git(&f.repo, &["tag", "m"]);
    let (s, v) = call(
        f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(submit_body("v1", "m")),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    v["id"].as_i64().unwrap()
}

/// libgit2's walk of v1..m with its subjects and authors, the good endpoint first (idx -1).
fn libgit2_rows(f: &Fixture) -> Vec<StoredCommit> {
    libgit2_walk(f, "v1", "m")
}

/// libgit2's walk of good..bad with its subjects and authors, the good endpoint first.
fn libgit2_walk(f: &Fixture, good: &str, bad: &str) -> Vec<StoredCommit> {
    let repo = git2::Repository::open(&f.repo).unwrap();
    let row = |idx: i32, c: &git2::Commit, parents: Vec<i32>| {
        let a = c.author();
        (
            idx,
            c.id().to_string(),
            parents,
            String::from_utf8_lossy(c.summary_bytes().unwrap_or_default()).into_owned(),
            format!("{} <{}>", a.name().unwrap(), a.email().unwrap()),
        )
    };
    let good = repo
        .revparse_single(good)
        .unwrap()
        .peel_to_commit()
        .unwrap();
    let mut expected = vec![row(-1, &good, vec![])];
    let mut walk = repo.revwalk().unwrap();
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)
        .unwrap();
    walk.push(repo.revparse_single(bad).unwrap().id()).unwrap();
    walk.hide(good.id()).unwrap();
    let order: Vec<git2::Oid> = walk.map(Result::unwrap).collect();
    let at: std::collections::HashMap<git2::Oid, i32> = order
        .iter()
        .enumerate()
        .map(|(i, o)| (*o, i as i32))
        .collect();
    for (i, oid) in order.iter().enumerate() {
        let c = repo.find_commit(*oid).unwrap();
        let parents = c.parent_ids().filter_map(|p| at.get(&p).copied()).collect();
        expected.push(row(i as i32, &c, parents));
    }
    expected
}

/// The candidates a submission stores are libgit2's topological walk, merges included, and
/// their subjects and authors (read with the git command once the submit has answered)
/// libgit2's.
#[tokio::test]
async fn stored_candidates_are_libgit2s_walk_with_its_subjects_and_authors() {
    let f = with_repo().await;
    let id = submit_merge_range(&f).await;
    // The submit's own fill: nothing else fills details in this process.
    wait_details(&f, id).await;
    let rows = stored_commits(&f, id).await;
    assert_eq!(rows, libgit2_rows(&f));
    assert!(rows.iter().any(|r| r.2.len() == 2), "the range has a merge");
}

/// A range of several chunks (the graph is stored 1,000 commits a row) reads back as
/// libgit2 walks it, merges whose parents sit in another chunk included; and a commit's
/// first parent is found across a chunk's edge, with its details stored and without.
#[tokio::test]
async fn a_range_of_several_chunks_reads_back_whole() {
    let f = fixture().await;
    // 2,100 commits on main after v5 and a side branch of 5 forking at main's 990th, merged
    // back at its 1,010th and again (an octopus of two sides) at its 2,050th.
    let mut stream = String::new();
    let mut commit = |mark: usize, branch: &str, from: Option<String>, merges: &[usize]| {
        let msg = format!("commit {mark}");
        stream += &format!(
            "commit refs/heads/{branch}\nmark :{mark}\n\
             committer T <t@example.invalid> {} +0000\ndata {}\n{msg}\n",
            1_700_000_000 + mark,
            msg.len()
        );
        if let Some(from) = from {
            stream += &format!("from {from}\n");
        }
        for m in merges {
            stream += &format!("merge :{m}\n");
        }
    };
    for i in 1..=2100 {
        let from = (i == 1).then(|| "refs/heads/main^0".to_string());
        match i {
            1010 => commit(i, "main", from, &[3005]),
            2050 => commit(i, "main", from, &[3005, 3003]),
            _ => commit(i, "main", from, &[]),
        }
        if i == 990 {
            for s in 3001..=3005 {
                commit(s, "side2", (s == 3001).then(|| ":990".to_string()), &[]);
            }
        }
    }
    let mut import = std::process::Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(&f.repo)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    import
        .stdin
        .take()
        .unwrap()
        .write_all(stream.as_bytes())
        .unwrap();
    assert!(import.wait().unwrap().success());
    common::register_repo(&f).await;
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(submit_body("v5", "main")),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["candidates_total"], json!(2105), "{v}");
    let id = v["id"].as_i64().unwrap();
    wait_details(&f, id).await;
    let expected = libgit2_walk(&f, "v5", "main");
    assert_eq!(stored_commits(&f, id).await, expected);
    let chunks: Vec<i32> = sqlx::query_scalar(
        "SELECT first_idx FROM bisect_graph_chunks WHERE bisect_id = $1 ORDER BY first_idx",
    )
    .bind(id)
    .fetch_all(&f.state.db)
    .await
    .unwrap();
    assert_eq!(chunks, [-1, 999, 1999]);
    let crossing = expected
        .iter()
        .filter(|c| c.2.iter().any(|&p| (p + 1) / 1000 != (c.0 + 1) / 1000))
        .count();
    assert!(crossing >= 3, "parents in another chunk: {crossing}");
    // The first parent of the commits at the chunks' edges and of the merges: libgit2's,
    // when it is a candidate (else the good endpoint stands in, and the store says none).
    let repo = git2::Repository::open(&f.repo).unwrap();
    let checked: Vec<(&StoredCommit, Option<String>)> = expected[1..]
        .iter()
        .filter(|c| (c.0 + 1) % 1000 < 3 || (c.0 + 1) % 1000 > 997 || c.2.len() > 1)
        .map(|c| {
            let oid = git2::Oid::from_str(&c.1).unwrap();
            let first = repo
                .find_commit(oid)
                .unwrap()
                .parent_id(0)
                .unwrap()
                .to_string();
            let inside = expected[1..].iter().any(|e| e.1 == first);
            (c, inside.then_some(first))
        })
        .collect();
    assert!(checked.len() > 12, "{}", checked.len());
    let mut conn = f.state.db.acquire().await.unwrap();
    for missing in [false, true] {
        if missing {
            lose_details(&f, id).await;
        }
        for (c, want) in &checked {
            let got = perfbisect_server::store::candidates::first_parent(&mut conn, id, &c.1)
                .await
                .unwrap();
            assert_eq!(&got, want, "idx {}, details missing: {missing}", c.0);
        }
    }
}

/// Details lost to a crash between the submit and its fill: the pages and the API still
/// answer (commits by sha), a report fills them before it is built, and so does the sweep
/// every replica runs.
#[tokio::test]
async fn details_a_crash_left_missing_are_filled_by_a_report_and_by_the_sweep() {
    let f = with_repo().await;
    let id = submit_merge_range(&f).await;
    wait_details(&f, id).await;
    let expected = libgit2_rows(&f);
    lose_details(&f, id).await;
    assert!(
        stored_commits(&f, id)
            .await
            .iter()
            .all(|r| r.3.is_empty() && r.4.is_empty()),
        "the details are gone"
    );
    let (s, v) = call(&f, "GET", &format!("/api/v1/bisects/{id}"), None, None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, page) = common::request(&f.state, "GET", &format!("/bisects/{id}"), None, None).await;
    assert_eq!(s, StatusCode::OK, "{page}");

    // The sweep of another replica, whose mirror has never seen the repository, fetches it
    // and fills them, once.
    let other_dir = tempfile::tempdir().unwrap();
    let other = AppState::new(
        f.state.db.clone(),
        other_dir.path(),
        Duration::from_secs(30),
        "http://test".into(),
    );
    assert_eq!(perfbisect_server::details::sweep(&other).await.unwrap(), 1);
    assert!(!details_missing(&f, id).await);
    assert_eq!(stored_commits(&f, id).await, expected);
    assert_eq!(perfbisect_server::details::sweep(&other).await.unwrap(), 0);

    // A report of the ended bisect fills them before it reads them.
    lose_details(&f, id).await;
    let (s, v) = call(
        &f,
        "POST",
        &format!("/api/v1/bisects/{id}/cancel"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, report) = common::request(
        &f.state,
        "GET",
        &format!("/api/v1/bisects/{id}/report"),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{report}");
    assert!(!details_missing(&f, id).await);
    assert_eq!(stored_commits(&f, id).await, expected);
}

/// A name the remote moved since the mirror's last fetch means where the remote has it now:
/// the range walked while the fetch ran (from the mirror's old tag) is not the one stored.
#[tokio::test]
async fn a_tag_moved_on_the_remote_is_resolved_where_it_is_now() {
    let f = with_repo().await;
    let (s, v) = common::submit(&f, submit_body("v1", "v5")).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["candidates_total"], json!(4), "{v}");
    for i in 6..=7 {
        std::fs::write(f.repo.join("f"), format!("{i}\n")).unwrap();
        git(&f.repo, &["add", "f"]);
        git(&f.repo, &["commit", "-q", "-m", &format!("c{i}")]);
    }
    git(&f.repo, &["tag", "-f", "v5"]);
    let (s, v) = common::submit(&f, submit_body("v1", "v5")).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["candidates_total"], json!(6), "{v}");
    assert_eq!(
        v["bad"]["sha"].as_str().unwrap(),
        git(&f.repo, &["rev-parse", "v5"])
    );
}

/// A worker token replaced while its long poll waits claims nothing from then on: every look
/// of the poll checks the token in its own statement, so the task queued after the
/// replacement goes to the new token, and the old poll ends with 401.
#[tokio::test]
async fn a_token_replaced_during_a_long_poll_claims_nothing_after() {
    let f = with_repo().await;
    let old = register_worker(&f, "h1", "g").await;
    let old_hash = perfbisect_server::auth::hash_token(&old);
    let poll = call(
        &f,
        "POST",
        "/api/v1/worker/claim",
        Some(&old),
        Some(json!({"wait_secs": 60})),
    );
    let replace = async {
        // The poll has looked once (and found the queue empty) when its group is known.
        while f.state.task_queued.group_of(&old_hash).is_none() {
            tokio::task::yield_now().await;
        }
        let (s, v) = call(
            &f,
            "POST",
            "/api/v1/worker/register",
            Some(ENROLL),
            Some(json!({"name": "h1", "host_group": "g", "previous_token": old})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let new = v["token"].as_str().unwrap().to_string();
        let (s, v) = call(
            &f,
            "POST",
            "/api/v1/bisects",
            Some(TOKEN),
            Some(submit_body("v1", "v5")),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        // Wake the waiting poll at once, as the task listener would.
        f.state.task_queued.queued("g", 1);
        new
    };
    let ((s, v), new) = tokio::join!(poll, replace);
    assert_eq!(
        s,
        StatusCode::UNAUTHORIZED,
        "the replaced token claimed: {v}"
    );
    let running: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks WHERE state = 'running'")
        .fetch_one(&f.state.db)
        .await
        .unwrap();
    assert_eq!(running, 0);
    // The new token gets the task, with its job, metric and no runs stored yet.
    let (s, task) = call(
        &f,
        "POST",
        "/api/v1/worker/claim",
        Some(&new),
        Some(json!({"wait_secs": 0})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{task}");
    assert_eq!(task["metric"], json!("t.x"));
    assert_eq!(task["job"]["testcase"], json!("t"));
    assert_eq!(task["repository_url"], json!(f.repo.display().to_string()));
    assert_eq!(task["done_iterations"], json!([]));
}

/// The candidate graph goes in as a binary COPY and comes back as it went in: the good
/// endpoint without parents, a merge with two candidate parents, a first parent outside.
#[tokio::test]
async fn the_candidate_graph_is_stored_as_walked() {
    use perfbisect_server::git::{CandidateCommit, Range};
    let f = fixture().await;
    let commit = |sha: &str, parents: Vec<usize>, outside: bool| CandidateCommit {
        sha: sha.into(),
        parents,
        first_parent_outside: outside,
        subject: String::new(),
        author: String::new(),
    };
    let range = Range {
        good: "g".repeat(40),
        bad: "d".repeat(40),
        merge_base_note: None,
        candidates: vec![
            commit(&"a".repeat(40), vec![], false),
            commit(&"b".repeat(40), vec![0], true),
            commit(&"c".repeat(40), vec![0], false),
            commit(&"d".repeat(40), vec![1, 2], false),
        ],
        good_subject: String::new(),
        good_author: String::new(),
    };
    let mut tx = f.state.db.begin().await.unwrap();
    perfbisect_server::store::candidates::insert(&mut tx, 424242, &range)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let rows = perfbisect_server::store::candidates::graph(&f.state.db, 424242)
        .await
        .unwrap();
    let got: Vec<(i32, String, Vec<i32>, bool)> = rows
        .into_iter()
        .map(|r| (r.idx, r.sha, r.parents, r.first_parent_outside))
        .collect();
    assert_eq!(
        got,
        vec![
            (-1, "g".repeat(40), vec![], false),
            (0, "a".repeat(40), vec![], false),
            (1, "b".repeat(40), vec![0], true),
            (2, "c".repeat(40), vec![0], false),
            (3, "d".repeat(40), vec![1, 2], false),
        ]
    );
}

/// Every claim statement slot of the replica, held until dropped.
async fn hold_batch_slots(f: &Fixture) -> tokio::sync::SemaphorePermit<'_> {
    f.state
        .task_queued
        .batch_slots()
        .acquire_many(perfbisect_server::queue::BATCHES_AT_ONCE as u32)
        .await
        .unwrap()
}

/// A look waits for one of the replica's claim statement slots before it takes a connection:
/// while every slot is held, a claim claims nothing; once one is free, it claims.
#[tokio::test]
async fn a_claim_looks_only_with_a_free_batch_slot() {
    let f = with_repo().await;
    let wt = register_worker(&f, "h1", "g").await;
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(submit_body("v1", "v5")),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let running = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM tasks WHERE state = 'running'")
            .fetch_one(&f.state.db)
            .await
            .unwrap()
    };
    let slots = hold_batch_slots(&f).await;
    let claim = call(
        &f,
        "POST",
        "/api/v1/worker/claim",
        Some(&wt),
        Some(json!({"wait_secs": 0})),
    );
    tokio::pin!(claim);
    // However often it is polled, the claim cannot look while the slots are held.
    for _ in 0..100 {
        tokio::select! {
            biased;
            (s, v) = &mut claim => panic!("claimed without a look slot: {s} {v}"),
            () = tokio::task::yield_now() => {}
        }
    }
    assert_eq!(running().await, 0);
    drop(slots);
    let (s, task) = claim.await;
    assert_eq!(s, StatusCode::OK, "{task}");
    assert_eq!(running().await, 1);
}

/// Looks that wait together are answered by one claim statement: each host of the group takes
/// a task of its own, an unknown token is refused, a drained host and a host whose group has
/// nothing queued get nothing; a look that comes alone is a statement of its own.
#[tokio::test]
async fn looks_that_wait_together_are_answered_by_one_statement() {
    let f = with_repo().await;
    let mut tokens = Vec::new();
    for i in 0..4 {
        tokens.push(register_worker(&f, &format!("g{i}"), "g").await);
    }
    let drained = register_worker(&f, "drained", "g").await;
    let elsewhere = register_worker(&f, "elsewhere", "other").await;
    sqlx::query("UPDATE hosts SET drained_at = now() WHERE name = 'drained'")
        .execute(&f.state.db)
        .await
        .unwrap();
    for _ in 0..2 {
        let (s, v) = common::submit(&f, submit_body("v1", "v5")).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    let queued = "SELECT count(*) FROM tasks WHERE state = 'queued'";
    let queued_before: i64 = sqlx::query_scalar(queued)
        .fetch_one(&f.state.db)
        .await
        .unwrap();
    assert!(queued_before >= 4, "{queued_before} tasks queued");
    let batches = || async {
        let (_, text) = common::request(&f.state, "GET", "/metrics", None, None).await;
        text.lines()
            .find_map(|l| l.strip_prefix("perfbisect_claim_batch_looks_count "))
            .map_or(0, |n| n.trim().parse::<u64>().unwrap())
    };
    let before = batches().await;
    let slots = hold_batch_slots(&f).await;
    let who: Vec<&str> = tokens
        .iter()
        .map(String::as_str)
        .chain([drained.as_str(), elsewhere.as_str(), "no-such-token"])
        .collect();
    let claims = who.iter().map(|t| {
        call(
            &f,
            "POST",
            "/api/v1/worker/claim",
            Some(t),
            Some(json!({"wait_secs": 0})),
        )
    });
    let all = futures_util::future::join_all(claims);
    tokio::pin!(all);
    // Every look waits for a slot; none is answered while the test holds them all.
    while f.state.task_queued.waiting_looks() < who.len() {
        tokio::select! {
            biased;
            _ = &mut all => panic!("a claim was answered without a statement slot"),
            () = tokio::task::yield_now() => {}
        }
    }
    drop(slots);
    let answers = all.await;
    assert_eq!(batches().await, before + 1, "{answers:?}");
    let mut ids: Vec<i64> = answers[..4]
        .iter()
        .map(|(s, v)| {
            assert_eq!(*s, StatusCode::OK, "{v}");
            v["task_id"].as_i64().unwrap()
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 4, "two hosts were handed one task: {answers:?}");
    assert_eq!(
        answers[4].0,
        StatusCode::NO_CONTENT,
        "drained: {:?}",
        answers[4]
    );
    assert_eq!(
        answers[5].0,
        StatusCode::NO_CONTENT,
        "elsewhere: {:?}",
        answers[5]
    );
    assert_eq!(answers[6].0, StatusCode::UNAUTHORIZED, "{:?}", answers[6]);
    let hosts: Vec<(String, i64)> = sqlx::query_as(
        "SELECT h.name, count(t.id) FROM hosts h LEFT JOIN tasks t
           ON t.host_id = h.id AND t.state = 'running' GROUP BY h.name ORDER BY h.name",
    )
    .fetch_all(&f.state.db)
    .await
    .unwrap();
    let want: Vec<(String, i64)> = ["drained", "elsewhere", "g0", "g1", "g2", "g3"]
        .iter()
        .map(|n| (n.to_string(), i64::from(n.starts_with('g'))))
        .collect();
    assert_eq!(hosts, want);
    let queued_after: i64 = sqlx::query_scalar(queued)
        .fetch_one(&f.state.db)
        .await
        .unwrap();
    assert_eq!(queued_after, queued_before - 4);
    // Alone, a look is a statement at once.
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/worker/claim",
        Some(&elsewhere),
        Some(json!({"wait_secs": 0})),
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{v}");
    assert_eq!(batches().await, before + 2);
}

/// The claim and write connections open ready: their statements are prepared (and the
/// backend's caches filled) before the first look or upload uses them, since a cold
/// connection's first claim took 40-80 ms for one look at the fleet loadtest's start; and the
/// claim connections keep one generic plan.
#[tokio::test]
async fn side_connections_open_with_their_statements_prepared() {
    let f = with_repo().await;
    let prepared = |pool: sqlx::PgPool| async move {
        let mut conn = pool.acquire().await.unwrap();
        let mode: String = sqlx::query_scalar("SHOW plan_cache_mode")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        let statements: Vec<String> =
            sqlx::query_scalar("SELECT statement FROM pg_prepared_statements")
                .fetch_all(&mut *conn)
                .await
                .unwrap();
        (mode, statements)
    };
    // A statement takes a connection without a ping: each pool keeps a spare per statement
    // for the ping sqlx makes as a connection goes back (`db::side_pool`).
    for pool in [&f.state.claims_db, &f.state.writes_db] {
        assert!(!pool.options().get_test_before_acquire());
    }
    assert_eq!(
        f.state.claims_db.options().get_max_connections() as usize,
        2 * perfbisect_server::queue::BATCHES_AT_ONCE
    );
    let (mode, statements) = prepared(f.state.claims_db.clone()).await;
    assert_eq!(mode, "force_generic_plan");
    assert!(
        statements
            .iter()
            .any(|s| s.contains("FOR UPDATE SKIP LOCKED")),
        "the claim statement is not prepared on a fresh claim connection: {statements:?}"
    );
    let (mode, statements) = prepared(f.state.writes_db.clone()).await;
    assert_eq!(mode, "auto");
    for what in ["INSERT INTO runs", "retry, fixed, message"] {
        assert!(
            statements.iter().any(|s| s.contains(what)),
            "no statement with {what:?} is prepared on a fresh write connection: {statements:?}"
        );
    }
}

/// An advance reads a job's costs from its recent tasks, not its whole history: a job that
/// ran for months would make every advance scan all of it (the fleet loadtest's advances
/// spent 120-160 ms there with 15,000 tasks), and a lab whose builds got faster is seen so.
#[tokio::test]
async fn a_jobs_costs_are_the_medians_of_its_recent_tasks() {
    use perfbisect_server::store::runs::{COST_TASKS, median_costs};
    let f = with_repo().await;
    let (tid, _, _, _) = a_claimed_task(&f).await;
    // Tasks done earlier in this job: each built for `build` s, then ran one 10 s run.
    let history = |count: i64, build: f64| {
        let db = f.state.db.clone();
        async move {
            sqlx::query(
                "WITH t AS (
                   INSERT INTO tasks (bisect_id, sha, job_spec_id, host_group, runs, phase, state,
                                      host_id, started_at, finished_at)
                   SELECT bisect_id, sha, job_spec_id, host_group, 1, phase, 'done', host_id,
                          now() - interval '1 day', now()
                   FROM tasks, generate_series(1, $2) WHERE id = $1
                   RETURNING id, bisect_id, sha, host_id, started_at)
                 INSERT INTO runs (task_id, bisect_id, sha, host_id, iteration, completed, metrics,
                                   started_at, finished_at)
                 SELECT id, bisect_id, sha, host_id, 0, true, '{}',
                        started_at + make_interval(secs => $3),
                        started_at + make_interval(secs => $3 + 10)
                 FROM t",
            )
            .bind(tid)
            .bind(count)
            .bind(build)
            .execute(&db)
            .await
            .unwrap();
        }
    };
    let job_spec: i64 = sqlx::query_scalar("SELECT job_spec_id FROM tasks WHERE id = $1")
        .bind(tid)
        .fetch_one(&f.state.db)
        .await
        .unwrap();
    let costs = || {
        let db = f.state.db.clone();
        async move {
            let mut conn = db.acquire().await.unwrap();
            median_costs(&mut conn, job_spec).await.unwrap()
        }
    };
    // Long builds first, then as many short ones: over the whole history the median would
    // lie between them.
    history(COST_TASKS, 500.0).await;
    assert_eq!(costs().await.build, Some(500.0));
    history(COST_TASKS, 50.0).await;
    let c = costs().await;
    assert_eq!(c.build, Some(50.0), "{c:?}");
    assert_eq!(c.run, Some(10.0), "{c:?}");
}
