//! The dashboard's pages in-process, against a real PostgreSQL database (fresh per test)
//! holding rows written as the server writes them. The browser tests (cli/tests/browser.rs)
//! drive the same pages in Chromium with real workers; these check what needs exact data:
//! filters and pages, stale hosts, starving host groups, error pages, several change points.

mod common;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use perfbisect_server::api;
use sqlx::PgPool;
use tower::ServiceExt;

struct Fixture {
    router: Router,
    db: PgPool,
    state: perfbisect_server::AppState,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let (state, dir) = common::state("http://test").await;
    Fixture {
        db: state.db.clone(),
        router: api::router(state.clone()),
        state,
        _dir: dir,
    }
}

struct Page {
    status: StatusCode,
    content_type: String,
    cache_control: String,
    body: String,
}

async fn get(f: &Fixture, path: &str) -> Page {
    let resp = f
        .router
        .clone()
        .oneshot(Request::get(path).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let header_of = |name| {
        resp.headers()
            .get(name)
            .map(|v: &header::HeaderValue| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    let (content_type, cache_control) = (
        header_of(header::CONTENT_TYPE),
        header_of(header::CACHE_CONTROL),
    );
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    Page {
        status,
        content_type,
        cache_control,
        body: String::from_utf8(bytes.to_vec()).unwrap(),
    }
}

fn sha(n: u32) -> String {
    format!("{n:040x}")
}

/// A bisect of `repo` as submission stores it: the good endpoint (idx -1) and `candidates`
/// commits, the last one the bad endpoint.
async fn seed_bisect(db: &PgPool, repo: &str, status: &str, candidates: u32) -> i64 {
    let repo_id: i64 = sqlx::query_scalar(
        "INSERT INTO repositories (name, url) VALUES ($1, '/srv/git/' || $1)
         ON CONFLICT (name) DO UPDATE SET url = EXCLUDED.url RETURNING id",
    )
    .bind(repo)
    .fetch_one(db)
    .await
    .unwrap();
    let job: i64 = sqlx::query_scalar(
        "INSERT INTO job_specs (hash, spec, yaml, testcase, tbox_group)
         VALUES ('h1', '{}', 'testcase: demo', 'demo', 'local')
         ON CONFLICT (hash) DO UPDATE SET hash = EXCLUDED.hash RETURNING id",
    )
    .fetch_one(db)
    .await
    .unwrap();
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO bisects (repository_id, job_spec_id, good_rev, bad_rev, good_sha, bad_sha, metric,
                              confidence, max_runs, status)
         VALUES ($1, $2, 'v1', 'v2', $3, $4, 'demo.score', 0.99, 400, $5) RETURNING id",
    )
    .bind(repo_id)
    .bind(job)
    .bind(sha(0))
    .bind(sha(candidates))
    .bind(status)
    .fetch_one(db)
    .await
    .unwrap();
    let shas: Vec<String> = (1..=candidates).map(sha).collect();
    let shas: Vec<&str> = shas.iter().map(String::as_str).collect();
    common::store_line_graph(db, id, &sha(0), &shas).await;
    for i in 0..=candidates {
        sqlx::query(
            "INSERT INTO bisect_commit_details (bisect_id, idx, sha, subject, author)
             VALUES ($1, $2, $3, $4, 'Dev <dev@example.invalid>')",
        )
        .bind(id)
        .bind(i as i32 - 1)
        .bind(sha(i))
        .bind(format!("change {i}"))
        .execute(db)
        .await
        .unwrap();
    }
    id
}

/// Ends bisect `id` with candidate `culprit` found, storing its assessments or findings as
/// the scheduler does when it finishes.
async fn finish_found(
    db: &PgPool,
    id: i64,
    culprit: u32,
    confidence: f64,
    assessments: Option<serde_json::Value>,
    findings: Option<serde_json::Value>,
) {
    sqlx::query(
        "UPDATE bisects SET culprit_sha = $2, culprit_confidence = $3,
                assessments = COALESCE($4, assessments), findings = COALESCE($5, findings),
                status_reason = 'culprit found', finished_at = now()
         WHERE id = $1",
    )
    .bind(id)
    .bind(sha(culprit))
    .bind(confidence)
    .bind(assessments)
    .bind(findings)
    .execute(db)
    .await
    .unwrap();
}

async fn seed_host(db: &PgPool, name: &str, group: &str, seen_secs_ago: f64) -> i64 {
    sqlx::query_scalar(
        "INSERT INTO hosts (name, host_group, machine, token_hash, last_seen_at)
         VALUES ($1, $2, '{\"threads\": 4}', $1, now() - make_interval(secs => $3)) RETURNING id",
    )
    .bind(name)
    .bind(group)
    .bind(seen_secs_ago)
    .fetch_one(db)
    .await
    .unwrap()
}

#[tokio::test]
async fn pages_and_assets_answer_with_their_types() {
    let f = fixture().await;
    let root = get(&f, "/").await;
    assert_eq!(root.status, StatusCode::SEE_OTHER);
    for (path, needle) in [
        ("/bisects", "No bisects yet"),
        ("/submit", "id=\"example-demo\""),
        ("/hosts", "No worker has registered yet"),
        ("/queue", "Nothing is waiting or running"),
    ] {
        let p = get(&f, path).await;
        assert_eq!(p.status, StatusCode::OK, "{path}: {}", p.body);
        assert!(p.content_type.starts_with("text/html"), "{path}");
        assert!(
            p.body.contains(needle),
            "{path} lacks {needle}:\n{}",
            p.body
        );
        assert!(
            !p.body.contains("http://") && !p.body.contains("https://"),
            "{path} refers to another site"
        );
    }
    let css = get(&f, "/static/style.css").await;
    assert_eq!(css.status, StatusCode::OK);
    assert!(css.content_type.starts_with("text/css"));
    let js = get(&f, "/static/dashboard.js").await;
    assert!(js.content_type.starts_with("text/javascript"));
    assert_eq!(
        get(&f, "/static/nope.js").await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn the_list_filters_and_pages_newest_first() {
    let f = fixture().await;
    let mut ids = Vec::new();
    for i in 0..28 {
        let (repo, status) = if i % 4 == 0 {
            ("glibc", "found")
        } else {
            ("linux", "searching")
        };
        ids.push(seed_bisect(&f.db, repo, status, 3).await);
    }
    let row = |id: i64| format!("data-bisect=\"{id}\"");
    let first = get(&f, "/bisects").await;
    assert!(first.body.contains("28 bisects; newest first."));
    assert!(first.body.contains(&row(ids[27])), "newest on page 1");
    assert!(!first.body.contains(&row(ids[2])), "oldest not on page 1");
    assert_eq!(first.body.matches("data-bisect=").count(), 25);
    assert!(first.body.contains("href=\"/bisects?page=2\""));
    let second = get(&f, "/bisects?page=2").await;
    assert_eq!(second.body.matches("data-bisect=").count(), 3);
    assert!(second.body.contains(&row(ids[0])));

    let glibc = get(&f, "/bisects?status=&repository=glibc&testcase=&metric=").await;
    assert!(
        glibc.body.contains("7 bisects match the filters"),
        "{}",
        glibc.body
    );
    assert!(glibc.body.contains("<option value=\"glibc\" selected>"));
    let found_linux = get(&f, "/bisects?status=found&repository=linux").await;
    assert!(found_linux.body.contains("No bisects match these filters"));

    let bad = get(&f, "/bisects?status=done").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.content_type.starts_with("text/html"));
    assert!(bad.body.contains("`done` is not a status"), "{}", bad.body);
    assert_eq!(
        get(&f, "/bisects?page=0").await.status,
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn the_filters_offer_each_metric_once_sorted_and_count_by_testcase() {
    let f = fixture().await;
    for metric in ["b.score", "a.score", "b.score", "c.score", "a.score"] {
        let id = seed_bisect(&f.db, "linux", "found", 3).await;
        set_metric(&f.db, id, metric).await;
    }
    let page = get(&f, "/bisects").await;
    let offered: Vec<&str> = page
        .body
        .split("<option value=\"")
        .skip(1)
        .filter_map(|o| o.split('"').next())
        .filter(|v| v.ends_with(".score"))
        .collect();
    assert_eq!(offered, ["a.score", "b.score", "c.score"], "{}", page.body);
    let b = get(&f, "/bisects?metric=b.score").await;
    assert!(b.body.contains("2 bisects match the filters"), "{}", b.body);
    let demo = get(&f, "/bisects?testcase=demo&repository=linux").await;
    assert!(
        demo.body.contains("5 bisects match the filters"),
        "{}",
        demo.body
    );
    let other = get(&f, "/bisects?testcase=other").await;
    assert!(other.body.contains("No bisects match these filters"));
}

#[tokio::test]
async fn a_bisect_page_shows_samples_verdicts_and_the_culprit() {
    let f = fixture().await;
    let id = seed_bisect(&f.db, "linux", "found", 3).await;
    let host = seed_host(&f.db, "h1", "local", 0.0).await;
    // Samples: endpoints and the culprit (candidate 1, sha 2), one incomplete run.
    let task: i64 = sqlx::query_scalar(
        "INSERT INTO tasks (bisect_id, sha, job_spec_id, host_group, runs, phase, state)
         SELECT $1, $2, job_spec_id, 'local', 3, 'searching', 'done' FROM bisects WHERE id = $1 RETURNING id",
    )
    .bind(id)
    .bind(sha(2))
    .fetch_one(&f.db)
    .await
    .unwrap();
    let runs = [
        (0, true, 100.0),
        (0, true, 101.0),
        (2, true, 110.0),
        (2, true, 111.0),
        (2, false, 0.0),
        (3, true, 109.0),
    ];
    for (i, (commit, completed, value)) in runs.iter().enumerate() {
        sqlx::query(
            "INSERT INTO runs (task_id, bisect_id, sha, host_id, iteration, completed, metrics, started_at, finished_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, now(), now())",
        )
        .bind(task)
        .bind(id)
        .bind(sha(*commit))
        .bind(host)
        .bind(i as i32)
        .bind(completed)
        .bind(if *completed {
            serde_json::json!({ "demo.score": value })
        } else {
            serde_json::json!({})
        })
        .execute(&f.db)
        .await
        .unwrap();
    }
    let assessments = serde_json::json!([
        { "sha": null, "verdict": "good", "p": null },
        { "sha": sha(1), "verdict": "good", "p": 0.004 },
        { "sha": sha(2), "verdict": "bad", "p": 0.995 },
        { "sha": sha(3), "verdict": "bad", "p": 0.001 },
    ]);
    finish_found(&f.db, id, 2, 0.995, Some(assessments), None).await;

    let page = get(&f, &format!("/bisects/{id}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let body = &page.body;
    assert!(body.contains(&format!("<code id=\"culprit-sha\">{}</code>", sha(2))));
    assert!(body.contains("change 2") && body.contains("Dev &#60;dev@example.invalid&#62;"));
    assert!(body.contains("<dd>99.5%</dd>"), "the culprit's confidence");
    // Five complete samples plotted (the incomplete run is not a sample), culprit marked.
    let plot = &body[body.find("<svg class=\"plot\"").unwrap()..];
    let plot = &plot[..plot.find("</svg>").unwrap()];
    assert_eq!(
        plot.matches("<circle cx=").count() - 2,
        5,
        "two legend dots"
    );
    assert!(plot.contains("class=\"culprit\""));
    assert!(body.contains(&format!(
        "<tr id=\"commit-{}\" class=\"is-culprit\">",
        sha(2)
    )));
    assert!(body.contains("+1 failed"), "the incomplete run is counted");
    assert!(body.contains("data-final=\"true\""));
    assert!(!body.contains("updating live"));

    let live = get(&f, &format!("/bisects/{id}/live")).await;
    assert_eq!(live.status, StatusCode::OK);
    assert_eq!(live.cache_control, "no-store");
    assert!(live.body.trim_start().starts_with("<div id=\"live\""));
    assert!(!live.body.contains("<html"), "only the live part");

    let missing = get(&f, "/bisects/9999").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.body.contains("no bisect with id 9999"));
    assert_eq!(
        get(&f, "/bisects/9999/live").await.status,
        StatusCode::NOT_FOUND
    );

    // Re-run: the form starts from the bisect.
    let rerun = get(&f, &format!("/submit?from={id}")).await;
    assert!(rerun.body.contains("Re-running <a href=\"/bisects/"));
    assert!(
        rerun
            .body
            .contains("id=\"good\" name=\"good\" value=\"v1\"")
    );
    assert!(rerun.body.contains(">testcase: demo</textarea>"));
}

#[tokio::test]
async fn several_change_points_are_listed_in_order_and_an_unnamed_one_says_why() {
    let f = fixture().await;
    let id = seed_bisect(&f.db, "linux", "found", 6).await;
    // As the scheduler stores a settled multi-change outcome: the first change point named,
    // the second left as a candidate set, the third surely below the size of interest.
    let findings = serde_json::json!({
        "change": 0.061,
        "noise": 0.02,
        "more_than_one_change": true,
        "verification_alpha": 0.1,
        "changes": [
            { "culprit": sha(2), "probability": 0.997,
              "candidates": [{ "sha": sha(2), "probability": 0.997 }], "change": 0.031 },
            { "culprit": null, "probability": 0.93,
              "candidates": [{ "sha": sha(4), "probability": 0.61 },
                             { "sha": sha(5), "probability": 0.32 }], "change": 0.024 },
            { "culprit": null, "probability": 0.99,
              "candidates": [{ "sha": sha(6), "probability": 0.99 }], "change": 0.004,
              "below_interest": true },
        ],
    });
    finish_found(&f.db, id, 2, 0.997, None, Some(findings)).await;

    let page = get(&f, &format!("/bisects/{id}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let body = &page.body;
    let table = &body[body
        .find("<table class=\"changes\" id=\"changes\">")
        .expect("the change-point table")..];
    let table = &table[..table.find("</table>").unwrap()];
    // One row a change point, in history order, each with its signed size.
    let steps: Vec<&str> = table.split("<tr class=\"step\">").skip(1).collect();
    assert_eq!(steps.len(), 3, "{table}");
    for (row, size) in steps.iter().zip(["+3.1%", "+2.4%", "+0.4%"]) {
        assert!(row.contains(size), "{size} in {row}");
    }
    // The named one shows its commit and subject.
    assert!(steps[0].contains(&format!("data-sha=\"{}\"", sha(2))));
    assert!(steps[0].contains("change 2"));
    // The candidate set is counted and listed under its row with the subjects.
    assert!(steps[1].contains("one of 2 commits:"), "{}", steps[1]);
    assert_eq!(steps[1].matches("<tr class=\"step-candidate\">").count(), 2);
    assert!(steps[1].contains("change 4") && steps[1].contains("change 5"));
    // The one below the size of interest says why it is not named, not "one of 1 commits".
    assert!(
        steps[2].contains("not named: its own step is below the size this bisect looks for"),
        "{}",
        steps[2]
    );
    assert!(!steps[2].contains("one of 1 commits"));
    assert!(steps[2].contains(&format!("data-sha=\"{}\"", sha(6))));
}

#[tokio::test]
async fn stale_hosts_stand_out_and_a_group_without_hosts_is_named() {
    let f = fixture().await;
    let id = seed_bisect(&f.db, "linux", "searching", 3).await;
    let busy = seed_host(&f.db, "fresh", "local", 1.0).await;
    seed_host(&f.db, "gone", "local", 600.0).await;
    seed_host(&f.db, "waiting", "local", 5.0).await;
    sqlx::query(
        "INSERT INTO tasks (bisect_id, sha, job_spec_id, host_group, runs, phase, state, host_id, started_at)
         SELECT $1, $2, job_spec_id, 'local', 5, 'searching', 'running', $3, now() FROM bisects WHERE id = $1",
    )
    .bind(id)
    .bind(sha(1))
    .bind(busy)
    .execute(&f.db)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO tasks (bisect_id, sha, job_spec_id, host_group, runs, phase, created_at)
         SELECT $1, $2, job_spec_id, 'lkp-skl-d01', 5, 'reproducing', now() - interval '2 hours'
         FROM bisects WHERE id = $1",
    )
    .bind(id)
    .bind(sha(3))
    .execute(&f.db)
    .await
    .unwrap();

    let hosts = get(&f, "/hosts").await.body;
    assert!(hosts.contains("3 registered: 1 busy, 1 idle,"), "{hosts}");
    assert!(hosts.contains("<strong class=\"stale-text\">1 stale</strong>"));
    assert!(hosts.contains("<tr class=\"host-stale\" data-host=\"gone\">"));
    assert!(hosts.contains("<tr class=\"host-busy\" data-host=\"fresh\">"));
    assert!(hosts.contains("<tr class=\"host-idle\" data-host=\"waiting\">"));
    assert!(hosts.contains("4 threads"));

    let queue = get(&f, "/queue").await.body;
    assert!(queue.contains("1 task running, 1 waiting."), "{queue}");
    let starving = &queue[queue.find("lkp-skl-d01").unwrap()..];
    assert!(starving.contains("(longest for 2 h 0 min)"), "{starving}");
    assert!(starving.contains("no live host serves this group"));
    let local = &queue[queue.find("<h2 id=\"group-2\">local").unwrap()..];
    assert!(local.contains("2 live hosts"), "{local}");
}

/// Stores complete runs of `metric` for commits (by `sha` number) in one done task.
async fn seed_runs(db: &PgPool, id: i64, host: i64, metric: &str, runs: &[(u32, f64)]) -> i64 {
    let task: i64 = sqlx::query_scalar(
        "INSERT INTO tasks (bisect_id, sha, job_spec_id, host_group, runs, phase, state, started_at, finished_at)
         SELECT $1, $2, job_spec_id, 'local', 3, 'searching', 'done', now() - interval '5 seconds', now()
         FROM bisects WHERE id = $1 RETURNING id",
    )
    .bind(id)
    .bind(sha(runs[0].0))
    .fetch_one(db)
    .await
    .unwrap();
    for (i, (commit, value)) in runs.iter().enumerate() {
        sqlx::query(
            "INSERT INTO runs (task_id, bisect_id, sha, host_id, iteration, completed, metrics, log,
                               environment, started_at, finished_at)
             VALUES ($1, $2, $3, $4, $5, true, $6, 'bench: run log line', $7, now(), now())",
        )
        .bind(task)
        .bind(id)
        .bind(sha(*commit))
        .bind(host)
        .bind(i as i32)
        .bind(serde_json::json!({ metric: value }))
        .bind(serde_json::json!({ "kernel_release": "6.1.0-test", "cpu_governor": "performance" }))
        .execute(db)
        .await
        .unwrap();
    }
    task
}

async fn set_metric(db: &PgPool, id: i64, metric: &str) {
    sqlx::query("UPDATE bisects SET metric = $2 WHERE id = $1")
        .bind(id)
        .bind(metric)
        .execute(db)
        .await
        .unwrap();
}

#[tokio::test]
async fn the_change_is_at_the_top_coloured_by_what_it_is_and_listed_with_its_sign() {
    let f = fixture().await;
    let host = seed_host(&f.db, "h1", "local", 0.0).await;
    // fio.write_iops: higher is better. Up 10% is an improvement, down 10% a regression.
    let up = seed_bisect(&f.db, "linux", "searching", 3).await;
    let down = seed_bisect(&f.db, "linux", "searching", 3).await;
    for id in [up, down] {
        set_metric(&f.db, id, "fio.write_iops").await;
    }
    seed_runs(
        &f.db,
        up,
        host,
        "fio.write_iops",
        &[(0, 100.0), (0, 100.0), (3, 110.0)],
    )
    .await;
    seed_runs(
        &f.db,
        down,
        host,
        "fio.write_iops",
        &[(0, 100.0), (3, 90.0), (3, 90.0)],
    )
    .await;

    let page = get(&f, &format!("/bisects/{up}")).await;
    assert!(
        page.body.contains("class=\"change ch-improvement\""),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("<span class=\"change-pct\">+10.0%</span>")
    );
    assert!(
        page.body.contains("bad vs good endpoint, 1 + 2 runs"),
        "which runs"
    );
    // The change comes before the progress panel: at the top of the live part.
    assert!(
        page.body.find("id=\"change\"").unwrap() < page.body.find("id=\"progress-h\"").unwrap()
    );
    let page = get(&f, &format!("/bisects/{down}")).await;
    assert!(page.body.contains("class=\"change ch-regression\""));
    assert!(page.body.contains("\u{2212}10.0%"));

    // The list has a Δ column, coloured the same way.
    let list = get(&f, "/bisects").await;
    assert!(list.body.contains(">Δ</th>"));
    assert!(list.body.contains("class=\"num delta ch-improvement\""));
    assert!(list.body.contains("class=\"num delta ch-regression\""));

    // The API says the same number and which runs it used, in the bisect and in the list.
    let (_, body) = common::request(
        &f.state,
        "GET",
        &format!("/api/v1/bisects/{down}"),
        None,
        None,
    )
    .await;
    let b: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!((b["measured_change"]["pct"].as_f64().unwrap() + 10.0).abs() < 1e-9);
    assert_eq!(b["measured_change"]["kind"], "regression");
    assert_eq!(b["measured_change"]["basis"], "endpoints");
    let (_, body) = common::request(&f.state, "GET", "/api/v1/bisects", None, None).await;
    let l: serde_json::Value = serde_json::from_str(&body).unwrap();
    let row = l["bisects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == down)
        .unwrap();
    assert!((row["change_pct"].as_f64().unwrap() + 10.0).abs() < 1e-9);
    assert_eq!(row["change_kind"], "regression");
}

#[tokio::test]
async fn a_failed_bisect_reads_as_a_sentence_with_the_plumbing_folded() {
    let f = fixture().await;
    let id = seed_bisect(&f.db, "linux", "failed", 240).await;
    // An even spread over 240 candidates, as the engine leaves it when nothing was measured.
    let spread: Vec<serde_json::Value> = (1..=240)
        .map(|i| serde_json::json!({ "sha": sha(i), "verdict": "unknown", "p": 1.0 / 240.0 }))
        .collect();
    sqlx::query(
        "UPDATE bisects SET assessments = $2, finished_at = now(), status_reason =
           'A task could not be completed, so the bisect stopped (task 1 for commit 000000000000 failed on every attempt; this says nothing about the commit).' || chr(10) || 'uploading a run: server answered 422 Unprocessable Entity:'
         WHERE id = $1",
    )
    .bind(id)
    .bind(serde_json::Value::Array(spread))
    .execute(&f.db)
    .await
    .unwrap();
    let page = get(&f, &format!("/bisects/{id}")).await;
    let body = &page.body;
    let outcome = &body[body.find("id=\"outcome\"").unwrap()..];
    let outcome = &outcome[..outcome.find("</p>").unwrap()];
    assert!(
        outcome.contains("The bisect failed") && outcome.contains("says nothing about the commit"),
        "{outcome}"
    );
    assert!(
        !outcome.contains("422"),
        "the plumbing is folded away: {outcome}"
    );
    assert!(body.contains("<summary>Details</summary><pre>uploading a run: server answered 422"));
    assert!(
        !body.contains("Most likely culprits"),
        "ten commits at 0.4% say nothing"
    );
    assert!(!body.contains("first runs are on their way"));
    assert!(body.contains("No samples: the bisect ended before any run completed."));
    assert!(!body.contains("No report for this bisect yet"));
    // The failure report is on the page, as /report serves it.
    let (status, report) = common::request(
        &f.state,
        "GET",
        &format!("/api/v1/bisects/{id}/report"),
        None,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    let first_line = report.lines().find(|l| !l.trim().is_empty()).unwrap();
    assert!(
        body.contains(&first_line.replace('<', "&#60;").replace('>', "&#62;")),
        "the report on the page: {first_line}"
    );
}

#[tokio::test]
async fn verdicts_implied_by_position_are_told_from_measured_ones_and_progress_moves() {
    let f = fixture().await;
    let host = seed_host(&f.db, "h1", "local", 0.0).await;
    let id = seed_bisect(&f.db, "linux", "searching", 4).await;
    // Endpoints at 100 and 110; candidate sha(3) measured once at 100.5 but judged bad
    // because it descends from sha(2), which the engine judges bad.
    let task = seed_runs(
        &f.db,
        id,
        host,
        "demo.score",
        &[
            (0, 100.0),
            (0, 100.2),
            (4, 110.0),
            (4, 110.4),
            (3, 100.5),
            (2, 109.8),
        ],
    )
    .await;
    let assessments = serde_json::json!([
        { "sha": sha(1), "verdict": "good", "p": 0.05 },
        { "sha": sha(2), "verdict": "bad", "p": 0.8 },
        { "sha": sha(3), "verdict": "bad", "p": 0.12 },
        { "sha": sha(4), "verdict": "bad", "p": 0.03 },
    ]);
    sqlx::query("UPDATE bisects SET assessments = $2 WHERE id = $1")
        .bind(id)
        .bind(assessments)
        .execute(&f.db)
        .await
        .unwrap();
    let page = get(&f, &format!("/bisects/{id}")).await;
    let body = &page.body;
    let row = |s: u32| {
        let r = &body[body.find(&format!("<tr id=\"commit-{}\"", sha(s))).unwrap()..];
        r[..r.find("</tr>").unwrap()].to_string()
    };
    assert!(
        row(3).contains("by position") && row(3).contains("look good"),
        "{}",
        row(3)
    );
    assert!(
        !row(2).contains("by position") && row(2).contains("look bad"),
        "{}",
        row(2)
    );

    // Progress: the most likely culprit, the candidates holding 90%, the bits left.
    assert!(
        body.contains("<code>000000000000</code> at 80.0%"),
        "{body}"
    );
    let c90 = &body[body.find("id=\"c90\">").unwrap() + 9..];
    assert!(c90.starts_with("2 "), "80% + 12% hold 90%: {c90:.40}");
    let entropy: f64 = {
        let e = &body[body.find("data-entropy=\"").unwrap() + 14..];
        e[..e.find('"').unwrap()].parse().unwrap()
    };
    let expected: f64 = [0.05f64, 0.8, 0.12, 0.03]
        .iter()
        .map(|p| -p * p.log2())
        .sum();
    assert!(
        (entropy - expected).abs() < 1e-3,
        "{entropy} bits, not {expected}"
    );
    assert!(body.contains("bits <span class=\"muted\">of 2.0</span>"));

    // Each task links to its runs, whose log and environment the task page shows.
    assert!(body.contains(&format!("href=\"/tasks/{task}\"")));
    let t = get(&f, &format!("/tasks/{task}")).await;
    assert_eq!(t.status, StatusCode::OK, "{}", t.body);
    assert!(t.body.contains("bench: run log line"));
    assert!(t.body.contains("6.1.0-test") && t.body.contains("performance"));
    assert!(t.body.contains("6 stored, 6 complete"));
    assert!(t.body.contains("as the host has it"), "{}", t.body);
    // A task that asked for a deployment of its own says so, in the API and on its page.
    sqlx::query("UPDATE tasks SET fresh_deploy = true WHERE id = $1")
        .bind(task)
        .execute(&f.db)
        .await
        .unwrap();
    let t = get(&f, &format!("/tasks/{task}")).await;
    assert!(t.body.contains("deployed afresh"), "{}", t.body);
    // And the task list in the API says how many runs each task has and how long it took.
    let (_, tasks) = common::request(
        &f.state,
        "GET",
        &format!("/api/v1/tasks?bisect={id}"),
        None,
        None,
    )
    .await;
    let tasks: serde_json::Value = serde_json::from_str(&tasks).unwrap();
    assert_eq!(tasks[0]["runs_stored"], 6);
    assert_eq!(tasks[0]["fresh_deploy"], true);
    assert_eq!(tasks[0]["runs_completed"], 6);
    assert!(tasks[0]["duration_secs"].as_f64().unwrap() >= 4.0);
    assert_eq!(get(&f, "/tasks/99999").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_submit_form_explains_its_options_and_offers_the_kernel_jobs() {
    let f = fixture().await;
    let page = get(&f, "/submit").await;
    let body = &page.body;
    for id in [
        "kernel-qemu",
        "kernel-fio",
        "kernel-aim7",
        "kernel-fxmark",
        "zstd-perf-stat",
    ] {
        assert!(
            body.contains(&format!("data-example=\"{id}\"")),
            "example {id}"
        );
        assert!(body.contains(&format!("<template id=\"example-{id}\"")));
    }
    assert!(body.contains("data-metric=\"fio.write_iops\""));
    assert!(body.contains("id=\"first_parent\" name=\"first_parent\" type=\"checkbox\""));
    for help in [
        "direction-help",
        "magnitude_pct-help",
        "confidence-help",
        "max_runs-help",
        "notify-help",
        "first_parent-help",
    ] {
        assert!(body.contains(&format!("id=\"{help}\"")), "{help}");
    }
}
