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
