//! SQL, one module per table family, with typed rows.
//!
//! Every query the server makes is here, checked at compile time (`sqlx::query!`,
//! `query_as!`, `query_scalar!`) against the offline data in `.sqlx/`. Handlers, pages, the
//! scheduler and the watches call these functions and hold no SQL. The statements here
//! that no macro can check, the COPYs of the candidate set (`candidates::insert`) and of its
//! details (`details`), say so; outside the store only `db::ensure_database`'s CREATE
//! DATABASE is made at run time (an identifier cannot be bound).

pub mod allocation;
pub mod assessments;
pub mod bisects;
pub mod builds;
pub mod candidates;
pub mod details;
pub mod events;
pub mod fetches;
pub mod gauges;
pub mod hosts;
pub mod inventory;
pub mod jobs;
pub mod kconfigs;
pub mod mail_options;
pub mod outbox;
pub mod queue;
pub mod reports;
pub mod repositories;
pub mod runs;
pub mod series;
pub mod subscriptions;
pub mod summaries;
pub mod tasks;
pub mod tokens;
pub mod wakeups;
pub mod watch_bisects;
pub mod watch_changes;
pub mod watches;

/// Asks the database for the simplest answer: it is reachable and serving.
pub async fn ping(db: &sqlx::PgPool) -> sqlx::Result<()> {
    sqlx::query_scalar!("SELECT 1").fetch_one(db).await?;
    Ok(())
}

/// [`ping`] on a connection of its own, not one of the pool's: tells a pool that is only
/// busy (every connection in use under a burst of requests) from a database that is down.
pub async fn ping_alone(db: &sqlx::PgPool) -> sqlx::Result<()> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect_with(&db.connect_options()).await?;
    sqlx::query_scalar!("SELECT 1").fetch_one(&mut conn).await?;
    conn.close().await
}

/// The statuses of bisects the scheduler works on (`BisectStatus::ACTIVE` without
/// `fetching`: a bisect waiting for its fetch has no range yet, so it takes no hosts), for
/// queries that bind them as `status = ANY($n)`.
pub const SCHEDULED: &[perfbisect_wire::states::BisectStatus] = {
    use perfbisect_wire::states::BisectStatus::*;
    &[Queued, Reproducing, Searching, Verifying]
};
