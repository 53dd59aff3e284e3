//! Connecting to PostgreSQL and applying the migrations in `migrations/`.

use anyhow::Context;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, PgPool};

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

/// `n` connections beside `db`'s, opened as needed, for one kind of coalesced statement
/// alone (`coalesce`): claims (`queue::BATCHES_AT_ONCE`), and uploads and completions
/// (`worker_writes::CONNECTIONS`) then never wait behind each other or the scheduler for one
/// of the main pool's connections (with a thousand hosts starting at once, that wait was the
/// claim p99; with sixty-four uploading at once, the upload p99).
pub fn side_pool(db: &PgPool, n: usize) -> PgPool {
    PgPoolOptions::new()
        .max_connections(n as u32)
        .acquire_timeout(std::time::Duration::from_secs(5))
        .connect_lazy_with((*db.connect_options()).clone())
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
