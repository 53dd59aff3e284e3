//! Watches: branches measured at every new head, change points found in each (watch,
//! branch, metric) series, and the bisects those changes open. The robot's whole loop, with
//! nobody submitting.
//!
//! - `poll.rs` — notices new heads (the mirror's fetch, on the watch's cadence or at once
//!   from a push webhook), picks the commits to measure and queues one ordinary task each.
//! - `series.rs` — a series' points as the analysis and the pages see them (a head's value is
//!   derived from its stored runs, never stored).
//! - `analyze.rs` — feeds the heads not yet analysed to `perfbisect_changepoint::detect` and
//!   records each change point, deciding whether it opens a bisect.
//! - `open.rs` — opens the bisect of a change through the same code as `POST
//!   /api/v1/bisects`, once per (repository, job, range).
//! - `view.rs` — watches, series and change points as the API and the dashboard show them.
//!
//! Their SQL is in `store::{watches, series, watch_changes, watch_bisects}` (and the tasks a
//! poll queues, `store::tasks::queue_for_watch`).

pub mod analyze;
pub mod open;
pub mod poll;
pub mod series;
pub mod view;

use crate::state::AppState;
use crate::store::watches;
use std::time::Duration;

/// The watch loop: polls the watches that are due, analyses every enabled watch's series,
/// and opens the bisects of changes that have none yet. Errors are logged, never fatal.
pub async fn run(state: AppState) {
    loop {
        if let Err(e) = tick(&state).await {
            tracing::warn!(error = ?e, "watch loop");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn tick(state: &AppState) -> anyhow::Result<()> {
    for id in watches::due(&state.db).await? {
        if let Err(e) = poll::poll(state, id).await {
            tracing::warn!(watch = id, error = %e, "polling a watch");
        }
    }
    for id in watches::enabled(&state.db).await? {
        if let Err(e) = analyze::analyze(state, id).await {
            tracing::warn!(watch = id, error = ?e, "analysing a watch");
        }
    }
    open::open_pending(state).await
}

/// Called when a watch's task ends: analyse at once rather than on the next tick.
pub async fn task_finished(state: &AppState, watch_id: i64) {
    if let Err(e) = analyze::analyze(state, watch_id).await {
        tracing::warn!(watch = watch_id, error = ?e, "analysing after a task");
    }
    if let Err(e) = open::open_pending(state).await {
        tracing::warn!(watch = watch_id, error = ?e, "opening bisects after a task");
    }
}
