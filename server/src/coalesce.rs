//! Requests that arrive together share one statement. A thousand hosts claiming at a lab's
//! start, or sixty-four uploading the runs of one round at the same instant, would otherwise
//! each wait for one of the pool's connections and each pay a statement and a commit; one
//! statement for every request waiting costs about what one request costs.
//!
//! Each request waits its turn for one of `at_once` slots. Whoever gets a slot takes its own
//! request and the oldest others waiting then (at most `max` in all) and runs one statement
//! for them, on a task of its own: a request that goes away (its client gone) must not cancel
//! the statement that answers the others. A request that comes alone goes alone, at once.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, Semaphore, oneshot};

/// Requests of type `I` waiting for a statement that answers each with an `O`.
#[derive(Debug)]
pub struct Coalescer<I, O> {
    slots: Arc<Semaphore>,
    pending: Mutex<Pending<I, O>>,
    max: usize,
    /// Told whenever a statement ends (`fewer_waiting_than`).
    ended: Arc<Notify>,
}

#[derive(Debug)]
struct Pending<I, O> {
    next: u64,
    waiting: VecDeque<Waiting<I, O>>,
}

/// A request waiting for (or taken into) a statement, and where its answer goes.
#[derive(Debug)]
pub struct Waiting<I, O> {
    id: u64,
    pub item: I,
    /// When it began to wait: the statement's slot and connection are part of its latency.
    pub since: Instant,
    answer: oneshot::Sender<Result<O, BatchFailed>>,
}

/// Why a statement answered none of its requests: the database away (the request may be
/// retried: 503), or anything else.
#[derive(Debug, Clone)]
pub enum BatchFailed {
    Unavailable(String),
    Other(String),
}

impl BatchFailed {
    pub fn of(e: &sqlx::Error) -> Self {
        match e {
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
                BatchFailed::Unavailable(e.to_string())
            }
            _ => BatchFailed::Other(e.to_string()),
        }
    }
}

impl From<BatchFailed> for sqlx::Error {
    /// Back to an error that `ApiError` maps as it mapped the statement's own.
    fn from(e: BatchFailed) -> Self {
        match e {
            BatchFailed::Unavailable(what) => sqlx::Error::Io(std::io::Error::other(what)),
            BatchFailed::Other(what) => sqlx::Error::Protocol(what),
        }
    }
}

/// Answers every request of `batch`: with `answers` in order, or each with the statement's
/// error. Returns the answers nobody heard (their requests went away meanwhile), for a caller
/// whose statement took something that must be given back.
pub fn answer_all<I, O>(batch: Vec<Waiting<I, O>>, answers: sqlx::Result<Vec<O>>) -> Vec<O> {
    let mut unheard = Vec::new();
    match answers {
        Ok(answers) => {
            let mut answers = answers.into_iter();
            for waiting in batch {
                match answers.next() {
                    Some(answer) => {
                        if let Err(Ok(answer)) = waiting.answer.send(Ok(answer)) {
                            unheard.push(answer);
                        }
                    }
                    None => {
                        let _ = waiting.answer.send(Err(BatchFailed::Other(
                            "the statement answered fewer requests than it was given".into(),
                        )));
                    }
                }
            }
        }
        Err(e) => {
            let failed = BatchFailed::of(&e);
            for waiting in batch {
                let _ = waiting.answer.send(Err(failed.clone()));
            }
        }
    }
    unheard
}

/// How often a statement that PostgreSQL chose as a deadlock's victim is tried again
/// (`retry_deadlocks`).
const DEADLOCK_TRIES: u32 = 3;

/// Runs `statement` again when PostgreSQL ended it as a deadlock's victim. A coalesced
/// statement locks the rows of many requests; another statement that locks some of them in
/// another order (a bisect's end cancelling its open tasks) can close a circle with it, and
/// one failure would fail every request of the batch. Tried again, it goes after the other.
pub async fn retry_deadlocks<T, F, Fut>(what: &str, mut statement: F) -> sqlx::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = sqlx::Result<T>>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        match statement().await {
            Err(sqlx::Error::Database(e))
                if tries < DEADLOCK_TRIES && e.code().as_deref() == Some("40P01") =>
            {
                tracing::info!(statement = what, "a deadlock's victim; trying again");
            }
            done => return done,
        }
    }
}

/// Takes a request out of the waiting ones when it goes away before a statement took it, so
/// no statement answers a request nobody waits for.
struct Withdraw<'a, I, O> {
    coalescer: &'a Coalescer<I, O>,
    id: u64,
}

impl<I, O> Drop for Withdraw<'_, I, O> {
    fn drop(&mut self) {
        let mut pending = self.coalescer.pending.lock().expect("pending requests");
        if let Some(at) = pending.waiting.iter().position(|w| w.id == self.id) {
            pending.waiting.remove(at);
        }
    }
}

impl<I: Send + 'static, O: Send + 'static> Coalescer<I, O> {
    /// At most `at_once` statements run at once, each for at most `max` requests.
    pub fn new(at_once: usize, max: usize) -> Self {
        Coalescer {
            slots: Arc::new(Semaphore::new(at_once)),
            pending: Mutex::new(Pending {
                next: 0,
                waiting: VecDeque::new(),
            }),
            max: max.max(1),
            ended: Arc::default(),
        }
    }

    /// The statement slots (`at_once` of them), for gauges.
    pub fn slots(&self) -> &Semaphore {
        &self.slots
    }

    /// Requests waiting for a statement now.
    pub fn waiting(&self) -> usize {
        self.pending.lock().expect("pending requests").waiting.len()
    }

    /// Resolves once fewer than `n` requests wait for a statement (at once if that holds
    /// now), or after `limit`, whichever comes first.
    pub async fn fewer_waiting_than(&self, n: usize, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            // Made before the look at the count, so a statement that ends between the two
            // still wakes it.
            let ended = self.ended.notified();
            if self.waiting() < n {
                return;
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                return;
            }
        }
    }

    /// Asks `item`, answered by the statement of whichever request takes it: this one's own
    /// `run` (given the batch, which it must answer, e.g. with `answer_all`) or another's.
    pub async fn submit<F, Fut>(&self, item: I, run: F) -> sqlx::Result<O>
    where
        F: FnOnce(Vec<Waiting<I, O>>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (answer, receiver) = oneshot::channel();
        let id = {
            let mut pending = self.pending.lock().expect("pending requests");
            let id = pending.next;
            pending.next += 1;
            pending.waiting.push_back(Waiting {
                id,
                item,
                since: Instant::now(),
                answer,
            });
            id
        };
        let withdraw = Withdraw {
            coalescer: self,
            id,
        };
        let slot = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| sqlx::Error::PoolClosed)?;
        let batch = self.take(id);
        drop(withdraw);
        if batch.is_empty() {
            // Another request's statement took this one: its answer is on the way.
            drop(slot);
        } else {
            let ended = self.ended.clone();
            let ran = tokio::spawn(async move {
                run(batch).await;
                drop(slot);
                ended.notify_waiters();
            });
            ran.await
                .map_err(|e| sqlx::Error::Protocol(format!("a batched statement failed: {e}")))?;
        }
        receiver
            .await
            .map_err(|_| {
                sqlx::Error::Protocol("a batched statement ended without an answer".into())
            })?
            .map_err(Into::into)
    }

    /// The request `id` if it still waits, with the oldest others: at most `max`. Empty when
    /// a statement already took it.
    fn take(&self, id: u64) -> Vec<Waiting<I, O>> {
        let mut pending = self.pending.lock().expect("pending requests");
        let Some(at) = pending.waiting.iter().position(|w| w.id == id) else {
            return Vec::new();
        };
        let mine = pending.waiting.remove(at).expect("found above");
        let others = pending.waiting.len().min(self.max - 1);
        std::iter::once(mine)
            .chain(pending.waiting.drain(..others))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three requests waiting while the one slot is held.
    async fn three_waiting() -> (
        Arc<Coalescer<u32, u32>>,
        tokio::sync::OwnedSemaphorePermit,
        Vec<tokio::task::JoinHandle<sqlx::Result<u32>>>,
    ) {
        let c = Arc::new(Coalescer::new(1, 2));
        let slot = c.slots.clone().acquire_owned().await.unwrap();
        let asks = (0..3)
            .map(|i| {
                let c = c.clone();
                tokio::spawn(async move {
                    c.submit(i, |batch| async move {
                        let answers = batch.iter().map(|w| w.item * 10).collect();
                        answer_all(batch, Ok(answers));
                    })
                    .await
                })
            })
            .collect();
        while c.waiting() < 3 {
            tokio::task::yield_now().await;
        }
        (c, slot, asks)
    }

    /// The scheduler's gate (`queue::Waiters::claims_keep_up`) holds while a pile waits and
    /// opens when a statement that takes part of it ends.
    #[tokio::test]
    async fn the_gate_holds_while_requests_pile_up_and_opens_when_a_statement_ends() {
        let (c, slot, asks) = three_waiting().await;
        let gate = c.fewer_waiting_than(2, Duration::from_secs(3600));
        tokio::pin!(gate);
        for _ in 0..20 {
            tokio::select! {
                biased;
                () = &mut gate => panic!("the gate opened with three requests waiting"),
                () = tokio::task::yield_now() => {}
            }
        }
        drop(slot);
        // Its limit is an hour: only a statement's end can open it in time.
        tokio::time::timeout(Duration::from_secs(30), gate)
            .await
            .expect("the gate stayed shut after a statement took two of the three");
        assert!(c.waiting() < 2);
        let mut answers = Vec::new();
        for a in asks {
            answers.push(a.await.unwrap().unwrap());
        }
        answers.sort();
        assert_eq!(answers, [0, 10, 20]);
    }

    /// A pile that never shrinks holds the gate only for its limit.
    #[tokio::test]
    async fn a_pile_that_stays_holds_the_gate_only_for_its_limit() {
        let (c, slot, asks) = three_waiting().await;
        c.fewer_waiting_than(2, Duration::from_millis(10)).await;
        assert_eq!(
            c.waiting(),
            3,
            "the gate opened because the pile went, not its limit"
        );
        drop(slot);
        for a in asks {
            a.await.unwrap().unwrap();
        }
    }
}
