//! The task queue in PostgreSQL: claim with `FOR UPDATE SKIP LOCKED`, leases renewed by
//! heartbeats, expired leases handed back, LISTEN/NOTIFY to wake long-polling workers.

use crate::coalesce::{Coalescer, Waiting, answer_all};
use crate::state::AppState;
use crate::store;
use perfbisect_wire::states::TaskState;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, Semaphore};

pub use crate::store::queue::{CHANNEL, ClaimedTask, Look};

/// How often a long-polling claim looks again without a notification (at most; see
/// `claim_wait`).
const FALLBACK_LOOK: Duration = Duration::from_secs(10);

/// This replica's long-polling claims, woken per host group: `n` tasks queued for a group
/// wake `n` of its waiters, not all of them (with a thousand hosts polling, waking all for
/// every task is a thundering herd of claims that find nothing).
#[derive(Debug)]
pub struct Waiters {
    groups: Mutex<HashMap<String, Arc<Notify>>>,
    /// The host group each worker token's last look found (keyed by the token's hash): which
    /// group's notifications should wake its next long poll. A hint, never an authorisation.
    group_of: Mutex<HashMap<String, String>>,
    /// Looks waiting for a claim statement, and the statements running (`claim`).
    looks: Coalescer<ClaimLook, Look>,
    /// True once the server is stopping: long polls answer at once (no task), so a stop
    /// does not wait out every worker's poll and workers turn to another replica sooner.
    stopping: tokio::sync::watch::Sender<bool>,
}

/// Claim statements running at once, per replica, each on a connection of its own
/// (`db::side_pool`). Looks that arrive while they run wait together for the next one, so
/// a thousand hosts polling at the same instant (a lab's start, a server's restart) cost a
/// few statements.
pub const BATCHES_AT_ONCE: usize = 4;

/// Looks one claim statement takes at most.
const BATCH_MAX: usize = 64;

/// One look of a claim: the worker token's hash, and whether to refresh the host's
/// `last_seen_at` (the first look of a request).
#[derive(Debug)]
struct ClaimLook {
    token_hash: String,
    seen: bool,
}

impl Default for Waiters {
    fn default() -> Self {
        Waiters {
            groups: Mutex::default(),
            group_of: Mutex::default(),
            looks: Coalescer::new(BATCHES_AT_ONCE, BATCH_MAX),
            stopping: tokio::sync::watch::Sender::new(false),
        }
    }
}

/// Tokens whose group `Waiters` remembers, at most (past that it forgets them all: a
/// forgotten token's next poll costs one look more).
const GROUP_HINTS: usize = 100_000;

impl Waiters {
    /// The server is stopping: every long poll, waiting now or later, ends with no task.
    pub fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// Resolves once `stop` was called.
    async fn stopped(&self) {
        let mut rx = self.stopping.subscribe();
        let _ = rx.wait_for(|&s| s).await;
    }

    /// The slots a claim statement takes before its connection (`BATCHES_AT_ONCE` of them).
    pub fn batch_slots(&self) -> &Semaphore {
        self.looks.slots()
    }

    /// Looks waiting for a claim statement now.
    pub fn waiting_looks(&self) -> usize {
        self.looks.waiting()
    }

    /// Resolves once the claims are not backlogged (fewer looks wait than one statement takes:
    /// the statements running keep up), or after `limit`. The scheduler waits for it before
    /// it starts an advance (`dispatch`).
    pub async fn claims_keep_up(&self, limit: Duration) {
        self.looks.fewer_waiting_than(BATCH_MAX, limit).await;
    }

    fn remember_look(&self, token_hash: &str, look: &Look) {
        match look {
            Look::UnknownToken => {}
            Look::Barred { host_group, .. }
            | Look::Empty { host_group, .. }
            | Look::Claimed { host_group, .. } => self.remember(token_hash, host_group),
        }
    }

    fn remember(&self, token_hash: &str, group: &str) {
        let mut hints = self.group_of.lock().expect("group hints");
        if hints.get(token_hash).map(String::as_str) == Some(group) {
            return;
        }
        if hints.len() >= GROUP_HINTS {
            hints.clear();
        }
        hints.insert(token_hash.to_string(), group.to_string());
    }

    /// The host group the last look of the worker token with `token_hash` found on this
    /// replica, if it looked.
    pub fn group_of(&self, token_hash: &str) -> Option<String> {
        self.group_of
            .lock()
            .expect("group hints")
            .get(token_hash)
            .cloned()
    }

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

/// Readies a claim connection as it opens (`db::side_pool`): a claim of no looks, which
/// takes nothing, prepares the claim statement (and plans it: these connections keep one
/// generic plan, `db::Plans::Generic`) and fills the backend's caches for its tables.
pub fn warm(conn: &mut sqlx::PgConnection) -> crate::db::Warming<'_> {
    Box::pin(async move {
        store::queue::claim_batch(&mut *conn, &[], &[], 0.0, 0.0)
            .await
            .map(drop)
    })
}

/// One look of a claim by the worker token with `token_hash`: a statement checks the token
/// and the host's drain and quarantine, takes the oldest queued task of its group, and reads
/// what the assignment needs (`store::queue::claim_batch`). `seen`: refresh the host's
/// `last_seen_at` if it is stale (the first look of a request).
///
/// Looks are batched: each waits its turn for one of `BATCHES_AT_ONCE` statement slots, and
/// whoever gets a slot makes one statement of its own look and every look waiting then. A look
/// that comes alone goes alone at once; a thousand at once cost a few statements, not a
/// thousand waits for the pool (the fleet loadtest's start, where claim p99 was 4–6 s).
pub async fn claim(state: &AppState, token_hash: &str, seen: bool) -> sqlx::Result<Look> {
    let waiters = &state.task_queued;
    let look = ClaimLook {
        token_hash: token_hash.to_string(),
        seen,
    };
    let (db, lease) = (state.claims_db.clone(), state.lease.as_secs_f64());
    let look = waiters
        .looks
        .submit(look, move |batch| claim_batch(db, batch, lease))
        .await?;
    waiters.remember_look(token_hash, &look);
    Ok(look)
}

/// Makes one statement of `batch` and answers each look. Timed per look in two parts: from
/// its arrival to the statement's connection, and the statement.
async fn claim_batch(db: sqlx::PgPool, batch: Vec<Waiting<ClaimLook, Look>>, lease_secs: f64) {
    crate::metrics::observe_claim_batch(batch.len());
    let tokens: Vec<String> = batch.iter().map(|l| l.item.token_hash.clone()).collect();
    let seen: Vec<bool> = batch.iter().map(|l| l.item.seen).collect();
    let looks = async {
        let mut conn = db.acquire().await?;
        let connected = Instant::now();
        let looks = store::queue::claim_batch(
            &mut *conn,
            &tokens,
            &seen,
            lease_secs,
            crate::auth::SEEN_EVERY_SECS,
        )
        .await?;
        Ok::<_, sqlx::Error>((connected, looks))
    }
    .await;
    let ended = Instant::now();
    let looks = looks.map(|(connected, looks)| {
        for waiting in &batch {
            crate::metrics::observe_claim(connected - waiting.since, ended - connected);
        }
        looks
    });
    for unheard in answer_all(batch, looks) {
        if let Look::Claimed {
            host_id,
            host_group,
            task,
        } = unheard
        {
            give_back_unheard(&db, task.id, host_id, &host_group).await;
        }
    }
}

/// A task claimed for a request that went away while its statement ran (its client gone):
/// queued again at once, its attempt not spent, rather than held until its lease runs out.
async fn give_back_unheard(db: &sqlx::PgPool, task: i64, host: i64, group: &str) {
    let message = "claimed for a request that went away before the answer";
    let given = async {
        if store::queue::hand_back(db, task, host, message)
            .await?
            .is_some()
        {
            notify_queued_in(db, group, 1).await?;
        }
        Ok::<_, sqlx::Error>(())
    };
    if let Err(e) = given.await {
        tracing::warn!(task, host, error = %e, "a claimed task nobody heard of stays leased");
    }
}

/// Claims a task for the worker token with `token_hash`, waiting up to `wait` for one to be
/// queued. Every look checks the token again, so a token revoked (or replaced by a new
/// registration) during a long poll claims nothing after the revocation commits: the look
/// answers `UnknownToken`. A host drained or quarantined during the poll waits it out.
pub async fn claim_wait(state: &AppState, token_hash: &str, wait: Duration) -> sqlx::Result<Look> {
    // Hosts that began to poll together (a lab's start, a server's restart) would otherwise
    // look together for good: every fallback look and every new long poll of a thousand
    // hosts at the same instant, each waiting for one of the pool's connections (the claim
    // p99 of the fleet loadtest). A long poll ends somewhere in its last fifth, and each
    // fallback look comes after a random half to whole `FALLBACK_LOOK`.
    let wait = wait.mul_f64(rand::random_range(0.8..=1.0));
    let deadline = tokio::time::Instant::now() + wait;
    // The group whose notifications wake this poll: known from this token's last look on
    // this replica, else learnt by the first look (which is then followed by a second one
    // after registering interest, so a NOTIFY between the two is not lost).
    let mut group = state.task_queued.group_of(token_hash);
    let mut first = true;
    loop {
        // Register interest before looking, so a NOTIFY between the look and the wait is not lost.
        let notify = group.as_deref().map(|g| state.task_queued.group(g));
        let mut notified = notify.as_ref().map(|n| Box::pin(n.notified()));
        if let Some(n) = notified.as_mut() {
            n.as_mut().enable();
        }
        let look = claim(state, token_hash, first).await?;
        first = false;
        let host_group = match &look {
            Look::UnknownToken | Look::Claimed { .. } => return Ok(look),
            Look::Barred { .. } => {
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => {}
                    _ = state.task_queued.stopped() => {}
                }
                return Ok(look);
            }
            Look::Empty { host_group, .. } => host_group,
        };
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Ok(look);
        }
        let notified = match notified {
            Some(n) if group.as_deref() == Some(host_group.as_str()) => n,
            // Not registered for this group before the look: register and look again now.
            _ => {
                group = Some(host_group.clone());
                continue;
            }
        };
        // Notifications wake the waiters (and every waiter after the listener reconnects), so
        // this look again is only a fallback. It is not short: a thousand idle hosts looking
        // every 2 s cost 500 empty claims a second, which slowed the claims that find work.
        let nap = (deadline - now).min(FALLBACK_LOOK.mul_f64(rand::random_range(0.5..=1.0)));
        tokio::select! {
            _ = tokio::time::timeout(nap, notified) => {}
            _ = state.task_queued.stopped() => return Ok(look),
        }
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
