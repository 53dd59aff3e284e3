//! The reads scenario of `perfbisect loadtest`: list pages with many bisects stored.
//!
//! Real bisects first (a few small ranges worked to the end by fake hosts), then copies of
//! their rows made in SQL until `--stored` bisects exist: each copy is a bisect row with its
//! tasks, its runs, its graph and the details a list row reads (the culprit's, the good
//! endpoint's). Only the rows are copied, so the list reads exactly what it would after that
//! many real bisects of this size. The database is a cluster the scenario starts itself, so it can write to it.

use crate::loadtest::{Latencies, LoadtestArgs, ms, report_errors, small};
use anyhow::Context;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A PostgreSQL cluster of the scenario's own in `dir` (it writes to the database beside
/// the servers), and its URL.
pub(crate) async fn own_cluster(dir: &std::path::Path) -> anyhow::Result<(Stopped, String)> {
    std::fs::create_dir_all(dir)?;
    let dir = dir.to_path_buf();
    let cluster =
        tokio::task::spawn_blocking(move || perfbisect_server::pg::Cluster::start(&dir)).await??;
    let url = cluster.url("postgres");
    Ok((Stopped(Some(cluster)), url))
}

/// The scenario's cluster, stopped however the scenario ends.
pub(crate) struct Stopped(Option<perfbisect_server::pg::Cluster>);

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some(c) = self.0.take()
            && let Err(e) = c.stop()
        {
            eprintln!("stopping a loadtest scenario's PostgreSQL: {e}");
        }
    }
}

/// Real bisects run before the copies are made.
const REAL: usize = 4;

/// Copies the given finished bisects (round robin) until `count` more exist; returns how
/// many bisects are stored then.
async fn copy_bisects(db: &sqlx::PgPool, from: &[i64], count: usize) -> anyhow::Result<i64> {
    let mut tx = db.begin().await?;
    let steps = [
        // Which source each copy takes, and its new id.
        "CREATE TEMP TABLE copy_bisects ON COMMIT DROP AS
         SELECT ($2::bigint[])[1 + g % cardinality($2::bigint[])] AS src,
                nextval(pg_get_serial_sequence('bisects', 'id')) AS dst
         FROM generate_series(1, $1::int) g",
        "CREATE TEMP TABLE copy_tasks ON COMMIT DROP AS
         SELECT t.id AS src, c.dst AS bisect, nextval(pg_get_serial_sequence('tasks', 'id')) AS dst
         FROM copy_bisects c JOIN tasks t ON t.bisect_id = c.src",
        // Every column as in the source row, but the keys (jsonb_populate_record over the row).
        "INSERT INTO bisects
         SELECT (jsonb_populate_record(b, jsonb_build_object('id', c.dst))).*
         FROM copy_bisects c JOIN bisects b ON b.id = c.src",
        "INSERT INTO bisect_graph_chunks
         SELECT (jsonb_populate_record(k, jsonb_build_object('bisect_id', c.dst))).*
         FROM copy_bisects c JOIN bisect_graph_chunks k ON k.bisect_id = c.src",
        "INSERT INTO bisect_commit_details
         SELECT (jsonb_populate_record(d, jsonb_build_object('bisect_id', c.dst))).*
         FROM copy_bisects c JOIN bisects b ON b.id = c.src
         JOIN bisect_commit_details d
           ON d.bisect_id = c.src AND (d.idx < 0 OR d.sha = b.culprit_sha)",
        "INSERT INTO tasks
         SELECT (jsonb_populate_record(t, jsonb_build_object('id', c.dst, 'bisect_id', c.bisect))).*
         FROM copy_tasks c JOIN tasks t ON t.id = c.src",
        "INSERT INTO runs
         SELECT (jsonb_populate_record(r, jsonb_build_object(
                    'id', nextval(pg_get_serial_sequence('runs', 'id')),
                    'bisect_id', c.bisect, 'task_id', c.dst))).*
         FROM copy_tasks c JOIN runs r ON r.task_id = c.src",
    ];
    for (i, sql) in steps.iter().enumerate() {
        let q = sqlx::query(*sql);
        let q = if i == 0 {
            q.bind(count as i32).bind(from)
        } else {
            q
        };
        q.execute(&mut *tx)
            .await
            .with_context(|| format!("copying bisects, step {}", i + 1))?;
    }
    tx.commit().await?;
    sqlx::query("ANALYZE").execute(db).await?;
    Ok(sqlx::query_scalar("SELECT count(*) FROM bisects")
        .fetch_one(db)
        .await?)
}

/// `n` GETs of `url`, `concurrency` at a time; their latencies.
async fn get_many(url: &str, n: usize, concurrency: usize) -> anyhow::Result<Latencies> {
    let lat = Arc::new(Latencies::default());
    let http = reqwest::Client::new();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (lat, http, next, url) = (lat.clone(), http.clone(), next.clone(), url.to_string());
        workers.push(tokio::spawn(async move {
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < n {
                let t = Instant::now();
                http.get(&url)
                    .send()
                    .await?
                    .error_for_status()?
                    .bytes()
                    .await?;
                lat.add(t.elapsed());
            }
            anyhow::Ok(())
        }));
    }
    for w in workers {
        w.await??;
    }
    Ok(Arc::into_inner(lat).expect("every worker ended"))
}

/// Moves the list version every `every`, as a status change or a submit on any replica
/// does (`server::list_cache`), until aborted.
async fn move_list(db: sqlx::PgPool, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        if let Err(e) = sqlx::query("SELECT nextval('bisect_list_version')")
            .execute(&db)
            .await
        {
            eprintln!("moving the list version: {e}");
        }
    }
}

/// The list version (`server::list_cache`): how often the list moved during a measurement
/// is the difference of two reads.
async fn list_version(db: &sqlx::PgPool) -> anyhow::Result<i64> {
    Ok(
        sqlx::query_scalar("SELECT last_value FROM bisect_list_version")
            .fetch_one(db)
            .await?,
    )
}

/// List pages a server has served so far: (from its cache, read from the database), as its
/// `/metrics` counts them (`perfbisect_list_pages_total`).
async fn list_pages(api: &crate::api::Api) -> anyhow::Result<(u64, u64)> {
    let text = reqwest::get(format!("{}/metrics", api.base()))
        .await?
        .error_for_status()?
        .text()
        .await?;
    let count = |cached: &str| {
        text.lines()
            .find(|l| {
                l.starts_with(&format!(
                    "perfbisect_list_pages_total{{cached=\"{cached}\"}}"
                ))
            })
            .and_then(|l| l.split_whitespace().last()?.parse::<f64>().ok())
            .map_or(0, |n| n as u64)
    };
    Ok((count("true"), count("false")))
}

pub async fn run(args: &LoadtestArgs) -> anyhow::Result<()> {
    println!(
        "== reads: list pages with {} bisects of {} candidates stored",
        args.stored, args.small_commits
    );
    let (cluster, url) = own_cluster(&args.dir.join("reads-pg")).await?;
    let with_db = LoadtestArgs {
        database_url: Some(url.clone()),
        ..args.clone()
    };
    let real = REAL.min(args.stored.max(1));
    let (done, fleet, mut s, _) = small(&with_db, "reads", real, real).await?;
    report_errors(&fleet);
    let db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await?;
    let ids: Vec<i64> = done.iter().map(|b| b.id).collect();
    let t = Instant::now();
    let stored = copy_bisects(&db, &ids, args.stored.saturating_sub(ids.len())).await?;
    println!(
        "  {stored} bisects stored ({} real, the rest copied in {:.1} s)",
        ids.len(),
        t.elapsed().as_secs_f64()
    );
    // The same pages from a second server on the same database that reads every page
    // (`--list-cache-ms 0`): what a page costs when the list moved since it was kept.
    let mut uncached = crate::loadtest::server_with_env(
        &with_db,
        "server-reads-uncached",
        &[("PERFBISECT_LIST_CACHE_MS", "0".to_string())],
    )
    .await?;
    // Just after the copies (analysed, not yet vacuumed), then as autovacuum leaves a table
    // whose rows have settled: the visibility map set, so counts can read an index alone.
    for when in ["just copied", "after VACUUM"] {
        if when == "after VACUUM" {
            let t = Instant::now();
            sqlx::query("VACUUM (ANALYZE)").execute(&db).await?;
            println!("  VACUUM (ANALYZE) in {:.1} s", t.elapsed().as_secs_f64());
        }
        // Served from the cache while the list stands still; while it moves ten times a
        // second (as status changes and submits in a busy lab move it: each move makes the
        // next request for a page read it again); and read every time.
        let runs = [
            (&s, "served", None),
            (
                &s,
                "served, list moving 10x/s",
                Some(Duration::from_millis(100)),
            ),
            (&uncached, "every page read", None),
        ];
        for (server, how, moving) in runs {
            for path in ["/bisects", "/api/v1/bisects"] {
                let url = format!("{}{path}", server.api.base());
                get_many(&url, 5, 1).await?; // warm-up: connections, caches
                let mover = moving.map(|every| tokio::spawn(move_list(db.clone(), every)));
                let before = list_pages(&server.api).await?;
                let version_before = list_version(&db).await?;
                let alone = get_many(&url, 100, 1).await?;
                let busy = get_many(&url, 500, 50).await?;
                let after = list_pages(&server.api).await?;
                let moves = list_version(&db).await? - version_before;
                if let Some(m) = mover {
                    m.abort();
                }
                println!(
                    "  GET {path} ({when}, {how}): p50 {}, p99 {} one at a time; p50 {}, p99 {} 50 at a time; {} of {} pages read from the database, the list moved {moves} times meanwhile   [target p50 <= 20 ms with 10,000 stored]",
                    ms(alone.quantile(0.5)),
                    ms(alone.quantile(0.99)),
                    ms(busy.quantile(0.5)),
                    ms(busy.quantile(0.99)),
                    after.1 - before.1,
                    (after.0 + after.1) - (before.0 + before.1),
                );
            }
        }
    }
    uncached.process.stop(Duration::from_secs(30));
    s.process.stop(Duration::from_secs(30));
    db.close().await;
    drop(cluster);
    Ok(())
}
