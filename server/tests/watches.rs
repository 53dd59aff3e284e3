//! Watches in process: the real router, PostgreSQL and git repositories; the worker side
//! through the real worker protocol. A branch is pushed to, its heads are measured, a step
//! is detected and opens one bisect, linked to the change, once for the metrics and watches
//! that see the same range.

mod common;

use axum::http::StatusCode;
use common::{Fixture, JOB, TOKEN, call, git, with_repo};
use serde_json::{Value, json};

/// The value of each metric at commit number `i` of main (c1 = 1): a 10% step at c10, a
/// deterministic wobble of ±0.5%.
fn level(i: usize) -> f64 {
    let wobble = [0.3, -0.4, 0.5, -0.1, 0.2, -0.5, 0.0, 0.4, -0.3, 0.1][i % 10];
    let base = if i >= 10 { 110.0 } else { 100.0 };
    base * (1.0 + wobble / 100.0)
}

fn watch_body(name: &str) -> Value {
    json!({
        "name": name, "repository": "r", "branch": "main", "job": JOB,
        "metrics": [
            {"name": "t.x", "direction": "either", "threshold_pct": 2.0},
            {"name": "t.y", "threshold_pct": 2.0}
        ],
        "runs_per_head": 2, "backfill": 4, "cadence_secs": 3600,
        "recipients": ["team@example.org"]
    })
}

async fn worker(f: &Fixture) -> String {
    common::register_worker(f, "h1", "g").await
}

/// Waits until the server has done what finished tasks call for: a task's completion
/// answers at once and analyses the watch's series in the background, then opens the
/// bisects of the changes found. Every series analysed up to its last commit, and no change
/// waiting for its bisect.
async fn settle(f: &Fixture) {
    let start = std::time::Instant::now();
    loop {
        let settled: bool = sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM watch_series s
                     WHERE s.analyzed_seq >= (SELECT max(h.seq) FROM watch_heads h
                                              WHERE h.watch_id = s.watch_id AND h.ref_name = s.ref_name))
                  = (SELECT coalesce(sum(json_array_length(metrics::json)), 0) FROM watches)
               AND NOT EXISTS (SELECT 1 FROM watch_changes
                               WHERE action = 'bisecting' AND bisect_id IS NULL)",
        )
        .fetch_one(&f.state.db)
        .await
        .unwrap();
        if settled {
            return;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "the analysis after the last tasks never ended"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Measures every queued watch task (bisect tasks are left alone): each run reports both
/// metrics at the commit's level, then waits for the analysis they start ([`settle`]).
/// Returns the shas measured.
async fn measure_all(f: &Fixture, wt: &str, subjects: &dyn Fn(&str) -> usize) -> Vec<String> {
    let mut done = Vec::new();
    loop {
        let pending: Option<(i64,)> = sqlx::query_as(
            "SELECT id FROM tasks WHERE watch_id IS NOT NULL AND state = 'queued' LIMIT 1",
        )
        .fetch_optional(&f.state.db)
        .await
        .unwrap();
        if pending.is_none() {
            settle(f).await;
            return done;
        }
        let (s, task) = call(
            f,
            "POST",
            "/api/v1/worker/claim",
            Some(wt),
            Some(json!({"wait_secs": 0})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{task}");
        assert_eq!(
            task["bisect_id"],
            json!(0),
            "a bisect task came before the watch's: {task}"
        );
        assert_eq!(task["metric"], json!("t.x"));
        let tid = task["task_id"].as_i64().unwrap();
        let sha = task["sha"].as_str().unwrap().to_string();
        let v = level(subjects(&sha));
        let now = chrono::Utc::now().to_rfc3339();
        for it in 0..task["runs"].as_u64().unwrap() {
            let (s, body) = call(
                f,
                "POST",
                &format!("/api/v1/worker/tasks/{tid}/runs"),
                Some(wt),
                Some(json!({"iteration": it, "completed": true,
                    "metrics": {"t.x": v, "t.y": v * 2.0}, "started_at": now, "finished_at": now})),
            )
            .await;
            assert_eq!(s, StatusCode::CREATED, "{body}");
        }
        let (s, body) = call(
            f,
            "POST",
            &format!("/api/v1/worker/tasks/{tid}/complete"),
            Some(wt),
            Some(json!({"outcome": "done"})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{body}");
        done.push(sha);
    }
}

fn commit(repo: &std::path::Path, i: usize) -> String {
    std::fs::write(repo.join("f"), format!("{i}\n")).unwrap();
    git(repo, &["commit", "-q", "-am", &format!("c{i}")]);
    git(repo, &["rev-parse", "HEAD"])
}

#[tokio::test]
async fn bad_watches_are_refused_naming_the_field() {
    let f = with_repo().await;
    let cases = [
        ("name", json!("has space"), StatusCode::BAD_REQUEST, "name"),
        ("metrics", json!([]), StatusCode::BAD_REQUEST, "metrics"),
        (
            "metrics",
            json!([{"name": "t.x", "direction": "up"}]),
            StatusCode::BAD_REQUEST,
            "metrics[0].direction",
        ),
        (
            "metrics",
            json!([{"name": "t.x", "threshold_pct": -1.0}]),
            StatusCode::BAD_REQUEST,
            "metrics[0].threshold_pct",
        ),
        (
            "runs_per_head",
            json!(0),
            StatusCode::BAD_REQUEST,
            "runs_per_head",
        ),
        (
            "recipients",
            json!(["nobody"]),
            StatusCode::BAD_REQUEST,
            "recipients[0]",
        ),
        (
            "job",
            json!("testcase: [unclosed"),
            StatusCode::BAD_REQUEST,
            "job",
        ),
        (
            "repository",
            json!("nope"),
            StatusCode::UNPROCESSABLE_ENTITY,
            "repository",
        ),
    ];
    for (key, value, status, field) in cases {
        let mut body = watch_body("w");
        body[key] = value;
        let (s, v) = call(&f, "POST", "/api/v1/watches", Some(TOKEN), Some(body)).await;
        assert_eq!(s, status, "{key}: {v}");
        assert_eq!(v["error"]["field"], json!(field), "{key}: {v}");
    }
    let (s, _) = call(&f, "POST", "/api/v1/watches", None, Some(watch_body("w"))).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM watches")
        .fetch_one(&f.state.db)
        .await
        .unwrap();
    assert_eq!(n, 0, "a refused watch was stored");
    let (s, _) = call(
        &f,
        "POST",
        "/api/v1/watches",
        Some(TOKEN),
        Some(watch_body("w")),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/watches",
        Some(TOKEN),
        Some(watch_body("w")),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    // A change keeps what it does not name.
    let (s, v) = call(
        &f,
        "PATCH",
        "/api/v1/watches/1",
        Some(TOKEN),
        Some(json!({"cadence_secs": 60, "recipients": ["a@example.org"]})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["cadence_secs"], json!(60));
    assert_eq!(v["recipients"], json!(["a@example.org"]));
    assert_eq!(v["runs_per_head"], json!(2));
    assert_eq!(v["metrics"].as_array().unwrap().len(), 2);
    let (s, v) = call(
        &f,
        "PATCH",
        "/api/v1/watches/1",
        Some(TOKEN),
        Some(json!({"cadence_secs": 0})),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["field"], json!("cadence_secs"));
    let (s, _) = call(
        &f,
        "PATCH",
        "/api/v1/watches/99",
        Some(TOKEN),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_step_on_a_watched_branch_opens_one_bisect_linked_to_its_change() {
    let f = with_repo().await;
    // The fixture's main has c1..c5.
    let mut shas: Vec<String> = git(&f.repo, &["rev-list", "--reverse", "main"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(shas.len(), 5);
    let (s, w) = call(
        &f,
        "POST",
        "/api/v1/watches",
        Some(TOKEN),
        Some(watch_body("main-watch")),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{w}");
    let id = w["id"].as_i64().unwrap();
    // A second watch of the same branch and job: its change must not open a second bisect.
    let mut other = watch_body("other-watch");
    other["metrics"] = json!([{"name": "t.x"}]);
    let (s, w2) = call(&f, "POST", "/api/v1/watches", Some(TOKEN), Some(other)).await;
    assert_eq!(s, StatusCode::CREATED, "{w2}");
    let id2 = w2["id"].as_i64().unwrap();
    let wt = worker(&f).await;

    // First sight: the head and its 4 first-parent ancestors (backfill).
    let (s, polled) = call(
        &f,
        "POST",
        &format!("/api/v1/watches/{id}/push"),
        Some(TOKEN),
        Some(json!({"ref": "refs/heads/main"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{polled}");
    assert_eq!(polled["queued"], json!(shas));
    let (s, _) = call(
        &f,
        "POST",
        &format!("/api/v1/watches/{id2}/push"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, v) = call(
        &f,
        "POST",
        &format!("/api/v1/watches/{id}/push"),
        Some(TOKEN),
        Some(json!("not an event")),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");

    let index_of = |all: &[String]| {
        let all = all.to_vec();
        move |sha: &str| all.iter().position(|s| s == sha).unwrap() + 1
    };
    for i in 6..=14 {
        shas.push(commit(&f.repo, i));
    }
    let idx = index_of(&shas);
    measure_all(&f, &wt, &idx).await;
    // Pushes one commit at a time: each head measured in turn.
    let mut repo_head = 5;
    let mut found = None;
    while repo_head < 14 {
        repo_head += 1;
        // The watched branch is `main`: move it to the next commit, as a push would.
        git(
            &f.repo,
            &["update-ref", "refs/heads/main", &shas[repo_head - 1]],
        );
        for w in [id, id2] {
            let (s, polled) = call(
                &f,
                "POST",
                &format!("/api/v1/watches/{w}/push"),
                Some(TOKEN),
                None,
            )
            .await;
            assert_eq!(s, StatusCode::OK, "{polled}");
            assert_eq!(polled["queued"], json!([shas[repo_head - 1]]));
        }
        measure_all(&f, &wt, &idx).await;
        let (_, changes) = call(&f, "GET", "/api/v1/changes", None, None).await;
        if !changes.as_array().unwrap().is_empty() {
            found = Some((repo_head, changes));
            break;
        }
    }
    let (head, changes) = found.expect("the 10% step at c10 was never detected");
    assert!(head <= 10 + 4, "detected only at c{head}");
    let changes = changes.as_array().unwrap();
    // Three series changed at once (t.x and t.y of the first watch, t.x of the second).
    assert_eq!(changes.len(), 3, "{changes:#?}");
    for c in changes {
        assert_eq!(c["before_sha"], json!(shas[8]), "{c}");
        assert_eq!(c["after_sha"], json!(shas[9]), "{c}");
        assert!(
            (c["change_pct"].as_f64().unwrap() - 10.0).abs() < 1.5,
            "{c}"
        );
        assert!(c["confidence"].as_f64().unwrap() > 0.99, "{c}");
    }
    let bisects: Vec<i64> = changes
        .iter()
        .map(|c| c["bisect_id"].as_i64().expect("linked"))
        .collect();
    assert!(bisects.iter().all(|b| *b == bisects[0]), "{changes:#?}");
    let actions: Vec<&str> = changes
        .iter()
        .map(|c| c["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions.iter().filter(|a| **a == "bisecting").count(),
        1,
        "{actions:?}"
    );
    assert_eq!(
        actions.iter().filter(|a| **a == "duplicate").count(),
        2,
        "{actions:?}"
    );
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM bisects")
        .fetch_one(&f.state.db)
        .await
        .unwrap();
    assert_eq!(n, 1, "the same change was bisected more than once");
    // The bisect is an ordinary one, between the heads around the change, mailed to the
    // watch's recipients.
    let (s, b) = call(
        &f,
        "GET",
        &format!("/api/v1/bisects/{}", bisects[0]),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    // One measured commit wider on each side than the detected pair c9..c10.
    assert_eq!(b["good"]["sha"], json!(shas[7]));
    assert_eq!(b["bad"]["sha"], json!(shas[10]));
    let notify: Value = sqlx::query_scalar("SELECT notify FROM bisects WHERE id = $1")
        .bind(bisects[0])
        .fetch_one(&f.state.db)
        .await
        .unwrap();
    assert_eq!(notify, json!(["team@example.org"]));
    // Open changes list it while the bisect runs.
    let (_, open) = call(&f, "GET", "/api/v1/changes?open=true", None, None).await;
    assert_eq!(open.as_array().unwrap().len(), 3);

    // The series: every head with its runs and mean, and the change point.
    let (s, series) = call(
        &f,
        "GET",
        &format!("/api/v1/watches/{id}/series?metric=t.x"),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{series}");
    let series = series.as_array().unwrap();
    assert_eq!(series.len(), 1);
    let points = series[0]["points"].as_array().unwrap();
    assert_eq!(points.len(), head);
    assert_eq!(points[0]["kind"], json!("backfill"));
    assert_eq!(points[4]["kind"], json!("head"));
    assert_eq!(points[9]["runs"].as_array().unwrap().len(), 2);
    assert!((points[9]["mean"].as_f64().unwrap() - level(10)).abs() < 1e-9);
    assert_eq!(series[0]["changes"].as_array().unwrap().len(), 1);

    // The same step placed one head earlier by another series (here: the second watch's
    // t.x seeing it at c8..c9, so its range is c7..c10): the range overlaps the open
    // bisect's (c8..c11), so it links to that bisect instead of opening a second one.
    let head_id = |sha: &str| {
        let db = f.state.db.clone();
        let sha = sha.to_string();
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT id FROM watch_heads WHERE watch_id = $1 AND sha = $2",
            )
            .bind(id2)
            .bind(sha)
            .fetch_one(&db)
            .await
            .unwrap()
        }
    };
    let (before, after) = (head_id(&shas[7]).await, head_id(&shas[8]).await);
    let late: i64 = sqlx::query_scalar(
        "INSERT INTO watch_changes (watch_id, ref_name, metric, before_head_id, after_head_id,
             detected_head_id, relative, confidence, detection, action)
         VALUES ($1, 'refs/heads/main', 't.x', $2, $3, $3, 0.1, 0.999, '{}', 'bisecting')
         RETURNING id",
    )
    .bind(id2)
    .bind(before)
    .bind(after)
    .fetch_one(&f.state.db)
    .await
    .unwrap();
    perfbisect_server::watch::open::open_pending(&f.state)
        .await
        .unwrap();
    let (action, linked, message): (String, Option<i64>, Option<String>) =
        sqlx::query_as("SELECT action, bisect_id, message FROM watch_changes WHERE id = $1")
            .bind(late)
            .fetch_one(&f.state.db)
            .await
            .unwrap();
    assert_eq!(
        (action.as_str(), linked),
        ("duplicate", Some(bisects[0])),
        "{message:?}"
    );
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM bisects")
        .fetch_one(&f.state.db)
        .await
        .unwrap();
    assert_eq!(n, 1, "an overlapping range was bisected again");

    // Later pushes queue their heads as before.
    for i in head + 1..=14 {
        git(&f.repo, &["update-ref", "refs/heads/main", &shas[i - 1]]);
        call(
            &f,
            "POST",
            &format!("/api/v1/watches/{id}/push"),
            Some(TOKEN),
            None,
        )
        .await;
    }
    let measured: i64 =
        sqlx::query_scalar("SELECT count(*) FROM tasks WHERE watch_id = $1 AND state = 'queued'")
            .bind(id)
            .fetch_one(&f.state.db)
            .await
            .unwrap();
    assert_eq!(measured as usize, 14 - head);

    // The pages: the watch's chart marks the change and links its bisect; zoom cuts it.
    let page = |path: String| {
        let state = f.state.clone();
        async move { common::request(&state, "GET", &path, None, None).await }
    };
    let (s, html) = page(format!("/watches/{id}")).await;
    assert_eq!(s, StatusCode::OK, "{html}");
    assert_eq!(
        html.matches("<svg class=\"plot series\"").count(),
        2,
        "one chart per metric"
    );
    assert!(html.contains(&format!("<a href=\"/bisects/{}\">", bisects[0])));
    assert!(
        html.contains("(14 of 14 commits)"),
        "every head is listed, measured or not"
    );
    let (s, html) = page(format!("/watches/{id}?from=5&to=9")).await;
    assert_eq!(s, StatusCode::OK);
    assert!(html.contains("(5 of 14 commits)"), "{html}");
    let (s, _) = page(format!("/watches/{id}?from=soon")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, html) = page("/watches".into()).await;
    assert_eq!(s, StatusCode::OK);
    assert!(html.contains("main-watch") && html.contains(&format!("/bisects/{}", bisects[0])));
    // The queue page still renders with watch tasks in the table.
    let (s, html) = page("/queue".into()).await;
    assert_eq!(s, StatusCode::OK);
    assert!(!html.contains("/bisects/0"), "{html}");
}

/// A forge's push webhook, as GitHub and GitLab send it: no bearer token, the body signed
/// with (or the header carrying) the server's webhook secret.
#[tokio::test]
async fn forge_webhooks_are_taken_with_the_secret_and_refused_without_it() {
    use axum::body::Body;
    use axum::http::Request;
    use hmac::{Hmac, Mac};
    use tower::ServiceExt;
    let mut f = with_repo().await;
    f.state.webhook_secret = Some("hook-secret".into());
    let (s, w) = call(
        &f,
        "POST",
        "/api/v1/watches",
        Some(TOKEN),
        Some(watch_body("forge-watch")),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{w}");
    let id = w["id"].as_i64().unwrap();
    let body = r#"{"ref":"refs/heads/main","after":"0000","repository":{"full_name":"o/r"}}"#;
    let sign = |secret: &str| {
        let mut m = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        m.update(body.as_bytes());
        format!("sha256={}", hex::encode(m.finalize().into_bytes()))
    };
    let send = |headers: Vec<(&'static str, String)>| {
        let state = f.state.clone();
        async move {
            let mut req = Request::builder()
                .method("POST")
                .uri(format!("/api/v1/watches/{id}/push"))
                .header("content-type", "application/json");
            for (k, v) in headers {
                req = req.header(k, v);
            }
            let resp = perfbisect_server::api::router(state)
                .oneshot(req.body(Body::from(body)).unwrap())
                .await
                .unwrap();
            let status = resp.status();
            let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
                .await
                .unwrap();
            (status, String::from_utf8_lossy(&bytes).into_owned())
        }
    };
    let queued_tasks = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM tasks WHERE watch_id = $1")
            .bind(id)
            .fetch_one(&f.state.db)
            .await
            .unwrap()
    };
    // Refused: no credential, a wrong signature, a wrong GitLab token. Nothing is queued.
    for headers in [
        vec![],
        vec![
            ("x-hub-signature-256", sign("guess")),
            ("x-github-event", "push".into()),
        ],
        vec![("x-gitlab-token", "guess".into())],
    ] {
        let (s, v) = send(headers).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    }
    assert_eq!(queued_tasks().await, 0);
    // GitHub's ping when the hook is set up: answered, nothing polled.
    let (s, v) = send(vec![
        ("x-hub-signature-256", sign("hook-secret")),
        ("x-github-event", "ping".into()),
    ])
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(queued_tasks().await, 0);
    // A signed push measures the branch's heads (first sight: the head and its backfill).
    let (s, v) = send(vec![
        ("x-hub-signature-256", sign("hook-secret")),
        ("x-github-event", "push".into()),
    ])
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(queued_tasks().await, 5, "{v}");
    // GitLab's token header is taken too (nothing new to measure).
    let (s, v) = send(vec![("x-gitlab-token", "hook-secret".into())]).await;
    assert_eq!(s, StatusCode::OK, "{v}");
}
