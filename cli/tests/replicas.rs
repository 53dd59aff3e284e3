//! Two server replicas on one PostgreSQL: both serve the API, scheduling is coordinated
//! through the database (wake-ups, per-bisect advisory locks), and a replica killed with
//! SIGKILL mid-bisect loses nothing and doubles nothing.

mod common;

use common::{API_TOKEN, ENROLL_TOKEN, EXE, Lab, assert_found};
use perfbisect_cli::api::Api;
use perfbisect_cli::demo::{start_server, start_worker, wait_healthy, watch};
use perfbisect_cli::processes::free_port;
use sqlx::Connection;
use std::path::Path;
use std::time::Duration;

#[tokio::test]
async fn a_replica_killed_mid_bisect_loses_and_doubles_nothing() {
    let lab = Lab::new().await;
    let _a = lab.server(5).await;
    let dir_b = lab.path().join("replica-b");
    std::fs::create_dir_all(&dir_b).unwrap();
    let port_b = free_port().unwrap();
    let api_b = Api::new(
        &format!("http://127.0.0.1:{port_b}"),
        Some(API_TOKEN.into()),
    );
    let mut b = start_server(
        Path::new(EXE),
        &dir_b,
        port_b,
        API_TOKEN,
        ENROLL_TOKEN,
        Some(&lab.db_url),
        5,
    )
    .unwrap();
    wait_healthy(&api_b, &mut b, Duration::from_secs(120))
        .await
        .unwrap();
    // One worker talks to each replica.
    let _w1 = lab.worker("w1");
    let _w2 = start_worker(Path::new(EXE), &dir_b, api_b.base(), ENROLL_TOKEN, "w2").unwrap();
    let ex = lab.example(24);
    let submitted = lab.submit(&ex, "sleep 0.1 && ").await;
    let mid = lab
        .until(submitted.id, Duration::from_secs(300), |b| {
            b.runs_done >= 12
        })
        .await;
    assert!(
        !perfbisect_wire::api::status_is_final(&mid.status),
        "ended before the crash: {mid:?}"
    );
    // Both replicas serve the same bisect.
    let seen_by_b = api_b.bisect(submitted.id).await.unwrap();
    assert_eq!(seen_by_b.id, submitted.id);
    assert!(seen_by_b.runs_done >= 12);
    b.kill_hard();
    let done = watch(&lab.api, submitted.id, Duration::from_secs(600))
        .await
        .unwrap();
    assert_found(&done, &ex, &lab);
    assert!(done.runs_done > mid.runs_done, "no work after the kill");

    let mut db = sqlx::PgConnection::connect(&lab.db_url).await.unwrap();
    // Nothing doubled: one outcome, one mail row, no task with more runs than it asked for.
    let finals: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM bisect_events WHERE bisect_id = $1 AND kind = 'found'",
    )
    .bind(submitted.id)
    .fetch_one(&mut db)
    .await
    .unwrap();
    assert_eq!(finals, 1);
    let mails: i64 =
        sqlx::query_scalar("SELECT count(*) FROM outbox WHERE bisect_id = $1 AND event = 'found'")
            .bind(submitted.id)
            .fetch_one(&mut db)
            .await
            .unwrap();
    assert_eq!(mails, 1, "mail rows for one outcome");
    let overfull: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM tasks t WHERE t.bisect_id = $1 AND
             (SELECT count(*) FROM runs r WHERE r.task_id = t.id)
             > t.runs * CASE WHEN t.pair_sha IS NULL THEN 1 ELSE 2 END",
    )
    .bind(submitted.id)
    .fetch_one(&mut db)
    .await
    .unwrap();
    assert_eq!(overfull, 0);
    // Nothing lost: every task ended (none left running on the dead replica's worker), and
    // no wake-up is left unanswered.
    let open: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM tasks WHERE bisect_id = $1 AND state IN ('queued', 'running')",
    )
    .bind(submitted.id)
    .fetch_one(&mut db)
    .await
    .unwrap();
    assert_eq!(open, 0);
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM runs WHERE bisect_id = $1")
        .bind(submitted.id)
        .fetch_one(&mut db)
        .await
        .unwrap();
    assert_eq!(runs as usize, done.runs_done);
}

/// A replica in its own directory (its own mirrors and log), on the lab's database.
async fn replica(lab: &Lab, name: &str) -> (perfbisect_cli::processes::Process, Api) {
    let dir = lab.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port().unwrap();
    let api = Api::new(&format!("http://127.0.0.1:{port}"), Some(API_TOKEN.into()));
    let mut p = start_server(
        Path::new(EXE),
        &dir,
        port,
        API_TOKEN,
        ENROLL_TOKEN,
        Some(&lab.db_url),
        5,
    )
    .unwrap();
    wait_healthy(&api, &mut p, Duration::from_secs(120))
        .await
        .unwrap();
    (p, api)
}

/// How many fetches a replica's log records.
fn fetches_logged(lab: &Lab, name: &str) -> usize {
    std::fs::read_to_string(lab.path().join(name).join("server.log"))
        .unwrap_or_default()
        .matches("mirror fetched")
        .count()
}

#[tokio::test]
async fn a_fetch_runs_once_across_replicas_and_survives_a_restart() {
    let lab = Lab::new().await;
    let ex = lab.example(25);
    let url = ex.path.display().to_string();
    let (mut a, api_a) = replica(&lab, "a").await;
    // The test holds the repository's fetch lock (as a replica mid-fetch would), so what
    // replica A asks for is still outstanding when it dies.
    let mut holder = sqlx::PgConnection::connect(&lab.db_url).await.unwrap();
    let repo_id = 1;
    sqlx::query("SELECT pg_advisory_lock($1, $2::int4)")
        .bind(perfbisect_server::store::fetches::FETCH_LOCK_CLASS)
        .bind(repo_id)
        .execute(&mut holder)
        .await
        .unwrap();
    let repo = api_a
        .register_repository("example", &url, None)
        .await
        .unwrap();
    assert_eq!((repo.id, repo.state.as_str()), (1, "mirroring"));
    let mut req = common::example_request();
    let first = api_a.submit(&req).await.unwrap();
    assert_eq!(first.status, "fetching", "{first:?}");
    a.kill_hard();

    // Two replicas start on the same database: the outstanding fetch runs once, and the
    // waiting bisects (one submitted before the crash, one to the other replica) resolve.
    let (_a2, api_a2) = replica(&lab, "a2").await;
    let (_b, api_b) = replica(&lab, "b").await;
    req.bad = "bad~1".into();
    let second = api_b.submit(&req).await.unwrap();
    assert_eq!(second.status, "fetching", "{second:?}");
    holder.close().await.unwrap();
    let ready = api_a2
        .wait_repository("example", Duration::from_secs(120))
        .await
        .unwrap();
    assert_eq!(ready.state, "ready");
    for (id, api) in [(first.id, &api_b), (second.id, &api_a2)] {
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        let b = loop {
            let b = api.bisect(id).await.unwrap();
            if b.status != "fetching" {
                break b;
            }
            assert!(std::time::Instant::now() < deadline, "{b:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(
            !perfbisect_wire::api::status_is_final(&b.status) && b.candidates_total > 0,
            "{b:?}"
        );
    }
    assert_eq!(
        fetches_logged(&lab, "a"),
        0,
        "the killed replica never fetched"
    );
    let (by_a2, by_b) = (fetches_logged(&lab, "a2"), fetches_logged(&lab, "b"));
    let mut db = sqlx::PgConnection::connect(&lab.db_url).await.unwrap();
    let (requested, done): (i64, i64) =
        sqlx::query_as("SELECT fetch_requested, fetch_done FROM repositories WHERE id = 1")
            .fetch_one(&mut db)
            .await
            .unwrap();
    assert_eq!(requested, done);
    assert_eq!(requested, 1);
    assert_eq!(
        by_a2 + by_b,
        1,
        "one fetch across both replicas (a2 {by_a2}, b {by_b})"
    );
}
