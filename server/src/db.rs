//! Connecting to PostgreSQL and applying the migrations in `migrations/`.

use anyhow::Context;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgConnection, PgPool};

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

pub async fn connect(url: &str) -> anyhow::Result<PgPool> {
    PgPoolOptions::new()
        .max_connections(20)
        // A request waits this long for a connection when the database is away, then
        // answers 503, instead of holding the client for sqlx's default 30 s.
        .acquire_timeout(std::time::Duration::from_secs(5))
        .connect(url)
        .await
        .with_context(|| format!("connecting to PostgreSQL at {}", redact(url)))
}

/// Connections beside `db`'s for one kind of coalesced statement alone (`coalesce`), `n` of
/// them running at once: claims (`queue::BATCHES_AT_ONCE`), and uploads and completions
/// (`worker_writes::CONNECTIONS`) then never wait behind each other or the scheduler for one
/// of the main pool's connections (with a thousand hosts starting at once, that wait was the
/// claim p99; with sixty-four uploading at once, the upload p99).
///
/// Each connection runs `warm` once, when it opens, before anything else uses it: the pool's
/// statements are then prepared and the backend's catalog caches filled. A cold connection's
/// first claim took 40-80 ms for one look (the fleet loadtest's start, where a thousand hosts
/// claimed at once on connections opened for them). The connections are opened when first
/// needed (`open_all` opens them at a server's start) and then kept: no idle timeout, no
/// lifetime, so a burst after a quiet hour does not meet cold ones again.
///
/// A statement takes a connection without a round trip: sqlx pings a connection as it goes
/// back to the pool (and closes it if that fails), and it is idle again only after that
/// round trip, so the pool holds a spare for each statement (2 `n` in all) and does not ping
/// again before handing one out. With `n` connections and both pings, each coalesced
/// statement waited two round trips more; at a lab's start, with the cores saturated, the
/// next batch of looks waited up to 30 ms for a connection with every statement slot free.
pub fn side_pool(db: &PgPool, n: usize, plans: Plans, warm: Warm) -> PgPool {
    let mut options = (*db.connect_options()).clone();
    if plans == Plans::Generic {
        options = options.options([("plan_cache_mode", "force_generic_plan")]);
    }
    PgPoolOptions::new()
        .max_connections(2 * n as u32)
        .test_before_acquire(false)
        .idle_timeout(None)
        .max_lifetime(None)
        .acquire_timeout(std::time::Duration::from_secs(5))
        .after_connect(move |conn, _| warm(conn))
        .connect_lazy_with(options)
}

/// What a side pool's connections run once as they open (`side_pool`).
pub type Warm = for<'c> fn(&'c mut PgConnection) -> Warming<'c>;

/// The statements a `Warm` runs on a connection.
pub type Warming<'c> =
    std::pin::Pin<Box<dyn std::future::Future<Output = sqlx::Result<()>> + Send + 'c>>;

/// Opens every connection of `pool` now (each warmed as it opens) and keeps them idle in it.
pub async fn open_all(pool: &PgPool) -> sqlx::Result<()> {
    let n = pool.options().get_max_connections();
    let mut open = Vec::with_capacity(n as usize);
    for _ in 0..n {
        open.push(pool.acquire().await?);
    }
    Ok(())
}

/// How a side pool's connections plan their prepared statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plans {
    /// PostgreSQL's default: a plan for each execution's parameters (the first five on each
    /// connection, and on whenever the generic plan's estimate looks worse).
    Custom,
    /// One plan per connection and statement, made at its first execution and kept. For the
    /// claim statement, whose parameters are arrays of looks, the plan made for the actual
    /// arrays (hash joins over seq scans of `hosts`) costs 0.6-1.2 ms of planning and runs
    /// slower than the generic one (index lookups): measured on a fleet loadtest's database,
    /// planning + execution 1.5 -> 0.35 ms for one look, 6.7 -> 3.7 ms for 64, 25 -> 16 ms
    /// for 256. Custom plans are what every fresh connection makes first, so a lab's start,
    /// when a thousand hosts claim at once on new connections, paid the slow ones.
    Generic,
}

pub async fn migrate(db: &PgPool) -> anyhow::Result<()> {
    MIGRATOR.run(db).await.context("applying migrations")
}

/// Creates database `name` through the maintenance connection `admin_url` unless it exists.
pub async fn ensure_database(admin_url: &str, name: &str) -> anyhow::Result<()> {
    let mut conn = sqlx::PgConnection::connect(admin_url)
        .await
        .context("connecting to the maintenance database")?;
    let exists = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1) AS "exists!""#,
        name
    )
    .fetch_one(&mut conn)
    .await?;
    if !exists {
        // Checked at run time: an identifier cannot be bound, so the statement's text is made
        // here and no macro can check it. `name` is ours, never user input.
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut conn)
            .await?;
    }
    Ok(())
}

/// The URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://***@{}", &url[..s], &url[at + 1..]),
        _ => url.to_string(),
    }
}
