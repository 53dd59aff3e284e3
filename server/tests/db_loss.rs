//! PostgreSQL killed under a running server: `/healthz` says so, requests answer 503 (not a
//! 500 after 30 s), the watchdog starts the embedded cluster again, and nothing is lost.
//! The test runs its own small cluster (killing the suite's shared one would fail others),
//! and first checks that it is private: no TCP, no way in without its password, fsync on.

mod common;

use perfbisect_server::{AppState, auth, db, health, pg};
use std::time::{Duration, Instant};

async fn poll_until(what: &str, limit: Duration, mut probe: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !probe().await {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn with_postgres_killed_healthz_reports_it_and_the_service_recovers_with_nothing_lost() {
    let dir = tempfile::tempdir().unwrap();
    let pgdir = dir.path().join("postgres");
    let options = pg::ClusterOptions {
        fsync: true,
        tcp: None,
    };
    let (d, o) = (pgdir.clone(), options.clone());
    let cluster = tokio::task::spawn_blocking(move || pg::Cluster::start_with(&d, &o))
        .await
        .unwrap()
        .unwrap();
    db::ensure_database(&cluster.url("postgres"), "perfbisect")
        .await
        .unwrap();
    let pool = db::connect(&cluster.url("perfbisect")).await.unwrap();
    // The embedded cluster is private: no TCP port, and no way in without the password.
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", cluster.port())).is_err(),
        "the embedded cluster listens on TCP"
    );
    let url = cluster.url("perfbisect");
    let (userinfo, rest) = url.split_once('@').unwrap();
    let (user, _password) = userinfo.rsplit_once(':').unwrap();
    for (what, attempt) in [
        ("no password", format!("{user}@{rest}")),
        ("a wrong password", format!("{user}:wrong@{rest}")),
    ] {
        assert!(
            db::connect(&attempt).await.is_err(),
            "connected to the embedded cluster with {what}"
        );
    }
    db::migrate(&pool).await.unwrap();
    let fsync: String = sqlx::query_scalar("SHOW fsync")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(fsync, "on");
    auth::ensure_token(
        &pool,
        perfbisect_wire::states::TokenKind::Api,
        "t",
        common::TOKEN,
    )
    .await
    .unwrap();
    auth::ensure_token(
        &pool,
        perfbisect_wire::states::TokenKind::Enroll,
        "e",
        common::ENROLL,
    )
    .await
    .unwrap();
    let state = AppState::new(
        pool,
        dir.path(),
        Duration::from_secs(30),
        "http://test".into(),
    );
    let repo = dir.path().join("src");
    std::fs::create_dir_all(&repo).unwrap();
    common::make_repo(&repo);
    let (s, v) = common::request(
        &state,
        "POST",
        "/api/v1/repositories",
        Some(common::TOKEN),
        Some(serde_json::json!({"name": "kept", "url": repo.display().to_string()})),
    )
    .await;
    assert_eq!(s.as_u16(), 202, "{v}");
    common::wait_repository(&state, "kept", "ready").await;
    let (s, reg) = common::request(
        &state,
        "POST",
        "/api/v1/worker/register",
        Some(common::ENROLL),
        Some(serde_json::json!({"name": "h1", "host_group": "g"})),
    )
    .await;
    assert_eq!(s.as_u16(), 200, "{reg}");
    let worker: serde_json::Value = serde_json::from_str(&reg).unwrap();
    let worker = worker["token"].as_str().unwrap().to_string();
    let claim = async || {
        common::request(
            &state,
            "POST",
            "/api/v1/worker/claim",
            Some(&worker),
            Some(serde_json::json!({"wait_secs": 0})),
        )
        .await
    };
    assert_eq!(claim().await.0.as_u16(), 204, "nothing queued");
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || c.stop_immediately())
        .await
        .unwrap()
        .unwrap();
    // No watchdog yet: the loss itself must be reported, within 5 s.
    poll_until(
        "healthz reports the database",
        Duration::from_secs(5),
        async || {
            let (s, body) = common::request(&state, "GET", "/healthz", None, None).await;
            s.as_u16() == 503 && body.contains("database")
        },
    )
    .await;
    // A request that needs the database answers 503 too, not a 500 after 30 s.
    let asked = Instant::now();
    let (s, body) = common::request(&state, "GET", "/api/v1/repositories", None, None).await;
    assert_eq!(s.as_u16(), 503, "{body}");
    assert!(
        asked.elapsed() < Duration::from_secs(15),
        "{:?}",
        asked.elapsed()
    );
    // So does a claim (its statement runs for many looks, on connections of its own).
    let (s, body) = claim().await;
    assert_eq!(s.as_u16(), 503, "{body}");
    let watchdog = tokio::spawn(health::watchdog(
        state.clone(),
        Some(health::Embedded {
            dir: pgdir.clone(),
            options,
        }),
        Duration::from_secs(1),
    ));
    poll_until(
        "the service recovers",
        Duration::from_secs(60),
        async || {
            common::request(&state, "GET", "/healthz", None, None)
                .await
                .0
                .is_success()
        },
    )
    .await;
    let (s, list) = common::request(&state, "GET", "/api/v1/repositories", None, None).await;
    assert!(s.is_success(), "{list}");
    assert!(list.contains("\"kept\""), "the repository was lost: {list}");
    assert_eq!(claim().await.0.as_u16(), 204, "claims work again");
    // The token stored before the loss still authenticates.
    let (s, v) = common::request(
        &state,
        "POST",
        "/api/v1/repositories",
        Some(common::TOKEN),
        Some(serde_json::json!({"name": "after", "url": repo.display().to_string()})),
    )
    .await;
    assert_eq!(s.as_u16(), 202, "{v}");
    watchdog.abort();
    tokio::task::spawn_blocking(move || cluster.stop())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_saturated_pool_is_told_from_a_database_that_is_down() {
    // The watchdog pings through the pool; when every connection is in use (a fleet of hosts
    // starting at once) that ping times out although the database is up, and the watchdog
    // asks again on a connection of its own before it treats the database as down.
    let url = pg::testing::fresh_database().await.unwrap();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_millis(300))
        .connect(&url)
        .await
        .unwrap();
    let held = pool.acquire().await.unwrap();
    assert!(
        perfbisect_server::store::ping(&pool).await.is_err(),
        "the pool's only connection is held, yet its ping got one"
    );
    perfbisect_server::store::ping_alone(&pool).await.unwrap();
    drop(held);
    perfbisect_server::store::ping(&pool).await.unwrap();
}
