//! The event-driven scheduler loop: advances bisects that have wake-ups pending.
//!
//! Wake-ups (`store::wakeups`) are recorded by whatever changed a bisect's evidence, in the
//! database, and announced with NOTIFY. Every replica LISTENs and looks at the pending
//! wake-ups; for each bisect it tries the advisory lock, so one advance per bisect runs at a
//! time across all replicas and the others skip it. Bursts coalesce: one advance answers every
//! wake-up committed before it started. A replica that dies mid-advance rolls back, leaving the
//! wake-ups for the others. The fallback loop only adds wake-ups a lost notification missed,
//! and notices hosts that went silent.

use crate::state::AppState;
use crate::store::{allocation, wakeups};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, Semaphore};
use tracing::Instrument;

/// Advances this replica runs at once (each holds a database connection): one a core, at
/// most 4. An advance is mostly CPU (the engine's decision and the statements of a
/// PostgreSQL on the same machine); more at once than cores only made each slower and left
/// claims and uploads waiting behind them.
fn concurrency() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get().clamp(1, 4))
}

/// How often the loop looks at the table without a notification.
const POLL: Duration = Duration::from_secs(1);
/// The longest a new advance waits for backlogged claims (`Waiters::claims_keep_up`): a
/// pile of a thousand looks is answered in about a tenth of a second, and the scheduler must
/// not stop for longer than that if the pile never shrinks.
const CLAIMS_FIRST: Duration = Duration::from_millis(50);
/// The slow fallback: every active bisect gets a wake-up if it has none.
const FALLBACK: Duration = Duration::from_secs(15);

/// Starts the loop, its listener and the fallback on this replica.
pub fn spawn(state: &AppState) {
    let wake = Arc::new(Notify::new());
    tokio::spawn(listen(state.clone(), wake.clone()));
    tokio::spawn(run(state.clone(), wake));
    tokio::spawn(fallback(state.clone()));
}

async fn listen(state: AppState, wake: Arc<Notify>) {
    loop {
        match sqlx::postgres::PgListener::connect_with(&state.db).await {
            Ok(mut listener) => {
                if let Err(e) = listener.listen(wakeups::CHANNEL).await {
                    tracing::warn!(error = %e, "LISTEN {} failed", wakeups::CHANNEL);
                } else {
                    while listener.recv().await.is_ok() {
                        wake.notify_one();
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "scheduler listener cannot connect"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn run(state: AppState, wake: Arc<Notify>) {
    let permits = Arc::new(Semaphore::new(concurrency()));
    let in_flight: Arc<Mutex<HashSet<i64>>> = Arc::default();
    loop {
        let notified = wake.notified();
        let ids = match wakeups::pending(&state.db, 512).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e, "reading scheduler wake-ups");
                tokio::time::sleep(POLL).await;
                continue;
            }
        };
        let mut started = 0;
        for id in ids {
            if !in_flight.lock().expect("in flight").insert(id) {
                continue;
            }
            started += 1;
            // Claims first. When looks pile up for the claim statements (a thousand hosts
            // polling at once: a lab's start, a server's restart), the hosts stand idle until
            // they are answered, and an advance started now takes the cores the statements
            // need (the engine, and its statements in a PostgreSQL on the same machine). It
            // waits for the pile to shrink, at most `CLAIMS_FIRST`; the advances already
            // running go on, and without a pile nothing waits.
            state.task_queued.claims_keep_up(CLAIMS_FIRST).await;
            let permit = permits
                .clone()
                .acquire_owned()
                .await
                .expect("semaphore never closed");
            let (state, in_flight, wake) = (state.clone(), in_flight.clone(), wake.clone());
            tokio::spawn(async move {
                let busy = !advance_one(&state, id).await;
                if busy {
                    // Another replica is advancing it: look again shortly, not in a spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                in_flight.lock().expect("in flight").remove(&id);
                drop(permit);
                // Wake-ups that arrived during the advance are still in the table.
                wake.notify_one();
            });
        }
        if started == 0 {
            let _ = tokio::time::timeout(POLL, notified).await;
        }
    }
}

/// One advance with its span and timing; false when another advance held the bisect.
async fn advance_one(state: &AppState, bisect: i64) -> bool {
    let span = tracing::info_span!("advance", bisect);
    let started = Instant::now();
    let result = crate::scheduler::try_advance(state, bisect)
        .instrument(span.clone())
        .await;
    match result {
        Ok(true) => {
            let took = started.elapsed();
            crate::metrics::observe_advance(took);
            span.in_scope(|| tracing::debug!(ms = took.as_millis() as u64, "advanced"));
            true
        }
        Ok(false) => false,
        Err(e) => {
            span.in_scope(|| tracing::error!(error = ?e, "advancing bisect"));
            // The wake-ups were rolled back with it: retried, but not in a spin.
            tokio::time::sleep(Duration::from_secs(1)).await;
            true
        }
    }
}

async fn fallback(state: AppState) {
    let mut live: HashMap<String, i64> = HashMap::new();
    loop {
        tokio::time::sleep(FALLBACK).await;
        if let Err(e) = wakeups::wake_all_active(&state.db).await {
            tracing::warn!(error = %e, "scheduler fallback");
        }
        // Hosts that went silent leave their group's shares to the others.
        match allocation::live_hosts_by_group(&state.db, allocation::LIVE_HOST_WINDOW_SECS).await {
            Ok(now) => {
                for (group, n) in &now {
                    if live.get(group).is_some_and(|before| before != n)
                        && let Err(e) =
                            wakeups::wake_group(&state.db, group, wakeups::Reason::HostsChanged)
                                .await
                    {
                        tracing::warn!(error = %e, group, "waking a host group");
                    }
                }
                live = now.into_iter().collect();
            }
            Err(e) => tracing::warn!(error = %e, "counting live hosts"),
        }
    }
}
