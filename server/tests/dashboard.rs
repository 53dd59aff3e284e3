//! The dashboard's pages in-process, against a real PostgreSQL database (fresh per test)
//! holding rows written as the server writes them. The browser tests (cli/tests/browser.rs)
//! drive the same pages in Chromium with real workers; these check what needs exact data:
//! filters and pages, stale hosts, starving host groups, error pages.

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
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let (state, dir) = common::state("http://test").await;
    Fixture {
        db: state.db.clone(),
        router: api::router(state),
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
    for i in 0..=candidates {
        sqlx::query(
            "INSERT INTO bisect_commits (bisect_id, idx, sha, parents, subject, author)
             VALUES ($1, $2, $3, $4, $5, 'Dev <dev@example.invalid>')",
        )
        .bind(id)
        .bind(i as i32 - 1)
        .bind(sha(i))
        .bind(if i < 2 { vec![] } else { vec![i as i32 - 2] })
        .bind(format!("change {i}"))
        .execute(db)
        .await
        .unwrap();
    }
    id
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
    sqlx::query(
        "UPDATE bisects SET culprit_sha = $2, culprit_confidence = 0.995, assessments = $3,
                status_reason = 'culprit found', finished_at = now() WHERE id = $1",
    )
    .bind(id)
    .bind(sha(2))
    .bind(assessments)
    .execute(&f.db)
    .await
    .unwrap();

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
