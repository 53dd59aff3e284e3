//! SQL, one module per table family, with typed rows.
//!
//! New and rewritten queries live here; older handlers still hold their own SQL and move here
//! over time (issue 14 leaves that move for later, to keep parallel work mergeable).

pub mod allocation;
pub mod assessments;
pub mod builds;
pub mod candidates;
pub mod events;
pub mod fetches;
pub mod hosts;
pub mod inventory;
pub mod jobs;
pub mod kconfigs;
pub mod queue;
pub mod repositories;
pub mod runs;
pub mod subscriptions;
pub mod summaries;
pub mod tasks;
pub mod tokens;
pub mod wakeups;

/// Asks the database for the simplest answer: it is reachable and serving.
pub async fn ping(db: &sqlx::PgPool) -> sqlx::Result<()> {
    sqlx::query_scalar!("SELECT 1").fetch_one(db).await?;
    Ok(())
}

/// The `status IN (...)` list of bisects still being worked on.
pub const ACTIVE_STATUSES: &str = "('queued', 'reproducing', 'searching', 'verifying')";
