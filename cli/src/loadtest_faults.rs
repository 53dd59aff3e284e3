//! The faults scenario: two server replicas on one PostgreSQL under the fleet's load (the
//! same bisects and fake hosts), one of them killed with SIGKILL mid-run. Half the hosts
//! talk to each replica and turn to the other when theirs cannot be reached, as workers
//! given several servers do; bisects are submitted to both. Afterwards every bisect must
//! have named its planted commit, every run upload a replica acknowledged must be stored
//! (nothing lost), and no run stored twice (nothing doubled).

use crate::loadtest::{
    Fleet, LoadtestArgs, generate, print_ended, register_hosts, report_errors, server, spawn_hosts,
    stop_hosts, submit, wait_all,
};
use crate::loadtest_reads::own_cluster;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// When replica A is killed, after the hosts began to poll: past the start's burst, well
/// before the fleet's bisects end (about 2 minutes on 2 cores).
const KILL_AFTER: Duration = Duration::from_secs(30);

pub async fn run(args: &LoadtestArgs) -> anyhow::Result<()> {
    println!(
        "== faults: {} bisects of {} candidates, {} fake hosts, two replicas on one PostgreSQL; \
         one killed with SIGKILL {} s in",
        args.bisects,
        args.small_commits,
        args.hosts,
        KILL_AFTER.as_secs()
    );
    let (cluster, url) = own_cluster(&args.dir.join("faults-pg")).await?;
    let with_db = LoadtestArgs {
        database_url: Some(url.clone()),
        ..args.clone()
    };
    let repo = Arc::new(generate(&args.dir.join("faults.git"), args.small_commits)?);
    let mut a = server(&with_db, "server-faults-a").await?;
    let mut b = server(&with_db, "server-faults-b").await?;
    a.api
        .add_repository("faults", &repo.path.display().to_string())
        .await?;
    let fleet = Fleet::with_bases(
        vec![a.api.base().to_string(), b.api.base().to_string()],
        Duration::from_millis(args.run_ms),
        vec![repo.clone()],
    );
    let registered = register_hosts(&fleet, args.hosts, "faults").await?;
    let mut ids = Vec::new();
    for i in 0..args.bisects {
        let api = if i % 2 == 0 { &a.api } else { &b.api };
        ids.push(submit(api, "faults", "faults").await?.0);
    }
    let db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await?;
    let started = Instant::now();
    let handles = spawn_hosts(&fleet, registered, args.start_spread());
    let killer = {
        let db = db.clone();
        tokio::spawn(async move {
            tokio::time::sleep(KILL_AFTER).await;
            a.process.kill_hard();
            let runs: Option<i64> = sqlx::query_scalar("SELECT count(*) FROM runs")
                .fetch_one(&db)
                .await
                .ok();
            let ended: Option<i64> = sqlx::query_scalar(
                "SELECT count(*) FROM bisects WHERE status NOT IN \
                 ('fetching', 'queued', 'reproducing', 'searching', 'verifying')",
            )
            .fetch_one(&db)
            .await
            .ok();
            (a, runs, ended)
        })
    };
    let done = wait_all(&b.api, &ids, Duration::from_secs(args.limit_secs), || {}).await;
    let took = started.elapsed();
    stop_hosts(&fleet, handles).await;
    let (_a, runs_at_kill, ended_at_kill) = killer.await?;
    let done = done?;
    println!(
        "  replica A killed at {} s, with {} runs stored and {} of {} bisects ended; \
         hosts turned to the other replica {} times",
        KILL_AFTER.as_secs(),
        runs_at_kill.map_or("?".into(), |n| n.to_string()),
        ended_at_kill.map_or("?".into(), |n| n.to_string()),
        ids.len(),
        fleet.failovers.load(Ordering::Relaxed)
    );
    print_ended(&done, &repo, took);
    let stored: Vec<(i64, i32)> = sqlx::query_as("SELECT task_id, iteration FROM runs")
        .fetch_all(&db)
        .await?;
    let stored_set: HashSet<(i64, u32)> = stored
        .iter()
        .map(|&(t, i)| (t, u32::try_from(i).unwrap_or(u32::MAX)))
        .collect();
    let acked = fleet.acked.lock().expect("acked").clone();
    let lost = acked.difference(&stored_set).count();
    println!(
        "  run uploads a replica acknowledged: {}; missing from the database: {lost}   [target 0]",
        acked.len()
    );
    // (task, iteration) is unique by constraint, so a run stored twice would show as a
    // task with more runs than it asked for.
    let over: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT t.id FROM tasks t JOIN runs r ON r.task_id = t.id \
         GROUP BY t.id, t.runs, t.pair_sha \
         HAVING count(*) > t.runs * CASE WHEN t.pair_sha IS NULL THEN 1 ELSE 2 END) x",
    )
    .fetch_one(&db)
    .await?;
    println!(
        "  runs stored: {}; tasks with more runs than they asked for: {over}   [target 0]",
        stored.len()
    );
    let expired: i64 =
        sqlx::query_scalar("SELECT count(*) FROM bisect_events WHERE kind = 'lease_expired'")
            .fetch_one(&db)
            .await
            .unwrap_or(-1);
    println!(
        "  lease expiries: {expired} (tasks whose claim's answer died with replica A wait out \
         their lease)"
    );
    report_errors(&fleet);
    db.close().await;
    b.process.stop(Duration::from_secs(30));
    drop(cluster);
    Ok(())
}
