//! The task queue in PostgreSQL: claim with `FOR UPDATE SKIP LOCKED`, leases renewed by
//! heartbeats, expired leases handed back, LISTEN/NOTIFY to wake long-polling workers.

use crate::state::AppState;
use crate::store;
use perfbisect_wire::states::TaskState;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

pub use crate::store::queue::{CHANNEL, ClaimedTask};

/// How often a long-polling claim looks again without a notification (at most; see
/// `claim_wait`).
const FALLBACK_LOOK: Duration = Duration::from_secs(10);

/// This replica's long-polling claims, woken per host group: `n` tasks queued for a group
/// wake `n` of its waiters, not all of them (with a thousand hosts polling, waking all for
/// every task is a thundering herd of claims that find nothing).
#[derive(Debug, Default)]
pub struct Waiters {
    groups: Mutex<HashMap<String, Arc<Notify>>>,
}

impl Waiters {
    fn group(&self, group: &str) -> Arc<Notify> {
        self.groups
            .lock()
            .expect("waiters")
            .entry(group.to_string())
            .or_default()
            .clone()
    }

    /// `n` tasks were queued for `group`.
    pub fn queued(&self, group: &str, n: usize) {
        let notify = self.group(group);
        for _ in 0..n {
            notify.notify_one();
        }
    }

    /// Something may have been queued anywhere: every waiter looks.
    pub fn all(&self) {
        for notify in self.groups.lock().expect("waiters").values() {
            notify.notify_waiters();
        }
    }

    /// A NOTIFY payload: `group\tcount` from `notify_queued_in`, empty from `notify_queued`.
    fn received(&self, payload: &str) {
        match payload.rsplit_once('\t') {
            Some((group, n)) => self.queued(group, n.parse().unwrap_or(1)),
            None => self.all(),
        }
    }
}

/// Takes the oldest queued task of `host_group` for `host_id`, unless the host is drained or
/// quarantined (checked in the statement itself: a long poll that began before a drain
/// takes nothing queued after it).
pub async fn claim(
    state: &AppState,
    host_id: i64,
    host_group: &str,
) -> sqlx::Result<Option<ClaimedTask>> {
    // Timed in two parts: waiting for one of the pool's connections, and the statement on it.
    let started = std::time::Instant::now();
    let mut conn = state.db.acquire().await?;
    let acquired = started.elapsed();
    let claimed =
        store::queue::claim(&mut *conn, host_id, host_group, state.lease.as_secs_f64()).await;
    drop(conn);
    let took = started.elapsed();
    crate::metrics::observe_claim(acquired, took - acquired);
    claimed
}

/// Claims a task, waiting up to `wait` for one to be queued.
pub async fn claim_wait(
    state: &AppState,
    host_id: i64,
    host_group: &str,
    wait: Duration,
) -> sqlx::Result<Option<ClaimedTask>> {
    // Hosts that began to poll together (a lab's start, a server's restart) would otherwise
    // look together for good: every fallback look and every new long poll of a thousand
    // hosts at the same instant, each waiting for one of the pool's connections (the claim
    // p99 of the fleet loadtest). A long poll ends somewhere in its last fifth, and each
    // fallback look comes after a random half to whole `FALLBACK_LOOK`.
    let wait = wait.mul_f64(rand::random_range(0.8..=1.0));
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        // Register interest before looking, so a NOTIFY between the look and the wait is not lost.
        let group = state.task_queued.group(host_group);
        let notified = group.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(task) = claim(state, host_id, host_group).await? {
            return Ok(Some(task));
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        // Notifications wake the waiters (and every waiter after the listener reconnects), so
        // this look again is only a fallback. It is not short: a thousand idle hosts looking
        // every 2 s cost 500 empty claims a second, which slowed the claims that find work.
        let nap = (deadline - now).min(FALLBACK_LOOK.mul_f64(rand::random_range(0.5..=1.0)));
        let _ = tokio::time::timeout(nap, notified).await;
    }
}

/// LISTENs on the task channel and wakes this replica's long-polls. Reconnects on error.
pub async fn listen_for_tasks(state: AppState, url: String) {
    loop {
        match sqlx::postgres::PgListener::connect(&url).await {
            Ok(mut listener) => {
                if let Err(e) = listener.listen(CHANNEL).await {
                    tracing::warn!(error = %e, "LISTEN failed");
                } else {
                    // Whatever was queued while no one listened: every waiter looks once.
                    state.task_queued.all();
                    loop {
                        match listener.try_recv().await {
                            Ok(Some(n)) => state.task_queued.received(n.payload()),
                            // The connection was lost (sqlx reconnects on the next call):
                            // what was sent meanwhile is lost, so every waiter looks.
                            Ok(None) => state.task_queued.all(),
                            Err(e) => {
                                tracing::warn!(error = %e, "queue listener failed");
                                break;
                            }
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "queue listener cannot connect"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Hands expired leases back to the queue (or fails the task after its last attempt).
pub async fn reap_once(state: &AppState) -> sqlx::Result<Vec<i64>> {
    let expired = store::queue::reap_expired(&state.db).await?;
    let mut bisects = Vec::new();
    for store::queue::Expired {
        id: task,
        bisect_id: bisect,
        state: new_state,
    } in expired
    {
        tracing::warn!(task, bisect, %new_state, "task lease expired");
        if new_state == TaskState::Queued {
            notify_queued(&state.db).await?;
        }
        // A watch's measurement has no bisect to tell or advance.
        let Some(bisect) = bisect else { continue };
        crate::store::events::record(
            &state.db,
            bisect,
            "lease_expired",
            &format!("A host stopped answering; task {task} is {new_state} again.\nlease expired"),
        )
        .await?;
        crate::store::wakeups::wake(
            &state.db,
            bisect,
            crate::store::wakeups::Reason::LeaseExpired,
        )
        .await?;
        bisects.push(bisect);
    }
    Ok(bisects)
}

/// Every replica reaps: the UPDATE's row locks let one of them hand each task back.
/// The scheduler is woken for each bisect concerned (`reap_once`).
pub async fn reap_expired_leases(state: AppState) {
    loop {
        if let Err(e) = reap_once(&state).await {
            tracing::warn!(error = %e, "lease reaper");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Announces `n` tasks queued for `host_group`: every replica wakes that many of the group's
/// long-polls.
pub async fn notify_queued_in<'e>(
    db: impl sqlx::PgExecutor<'e>,
    host_group: &str,
    n: usize,
) -> sqlx::Result<()> {
    store::queue::notify(db, &format!("{host_group}\t{n}")).await
}

/// Announces that tasks may have been queued in any group (rare paths): every long-poll looks.
pub async fn notify_queued<'e>(db: impl sqlx::PgExecutor<'e>) -> sqlx::Result<()> {
    store::queue::notify(db, "").await
}
