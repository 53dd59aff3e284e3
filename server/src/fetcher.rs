//! Fetches off the request path.
//!
//! Registering a repository stores it as `mirroring` and answers; a submission whose
//! revisions need a fetch that does not end within `SUBMIT_WAIT` stores its bisect as
//! `fetching` and answers. Both ask for a fetch generation (`store::fetches::request`) and
//! start a job (`spawn`) on this replica. The job takes the repository's session advisory
//! lock on a connection of its own, so one replica fetches at a time (a replica that dies
//! closes its connection and frees the lock); it fetches while generations are outstanding,
//! records each outcome, then resolves the waiting bisects with its fresh mirror and queues
//! them (or fails them with the reason). `run` sweeps every few seconds for work nobody holds:
//! after a restart, or when the replica that started a job died.
//!
//! Fetches block (the git command, bounded by its stall timeout) and run in `spawn_blocking`;
//! fetches into one mirror directory of this process take turns (`local_turn`).

use crate::git::{self, GitError, Range, RangeError};
use crate::state::AppState;
use crate::store::fetches;
use sqlx::Connection;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

/// How long a submission waits for an incremental fetch of a mirrored repository before its
/// bisect is stored as `fetching` instead: short enough that a slow remote never holds the
/// request, long enough that a usual fetch answers with the resolved range (and a revision
/// that does not exist is refused with 422 rather than failing the bisect later).
pub const SUBMIT_WAIT: Duration = Duration::from_secs(5);
/// How often each replica looks for fetches nobody holds.
const SWEEP_EVERY: Duration = Duration::from_secs(3);
/// How often a job that found the lock held looks again.
const LOCK_RETRY: Duration = Duration::from_millis(500);

/// One async mutex per mirror directory of this process: fetches into one mirror take turns.
fn local_turn(mirror: PathBuf) -> Arc<tokio::sync::Mutex<()>> {
    static TURNS: LazyLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> =
        LazyLock::new(Default::default);
    TURNS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(mirror)
        .or_default()
        .clone()
}

/// Fetches `url` into this replica's mirror of `repo`, off the async threads, after any
/// fetch of the same mirror in this process.
pub async fn fetch_mirror(state: &AppState, repo: i64, url: &str) -> Result<(), GitError> {
    let turn = local_turn(state.mirrors.path(repo));
    let _turn = turn.lock().await;
    let mirrors = state.mirrors.clone();
    let url = url.to_string();
    let t = std::time::Instant::now();
    let result = tokio::task::spawn_blocking(move || mirrors.fetch(repo, &url))
        .await
        .unwrap_or_else(|e| {
            Err(GitError::Remote(perfbisect_gitfetch::FetchError::Spawn(
                std::io::Error::other(e.to_string()),
            )))
        });
    tracing::info!(
        repository = repo,
        fetch_ms = t.elapsed().as_millis() as u64,
        ok = result.is_ok(),
        "mirror fetched"
    );
    result
}

/// What a submission gets from the repository's mirror.
pub enum Resolution {
    /// The range without its candidates' subjects and authors, and where to read them.
    Range(Result<(Range, git::Details), RangeError>),
    /// The fetch did not end within `SUBMIT_WAIT`; it goes on in the background.
    Waiting,
}

/// Resolves a submission's range now if that needs no fetch (both revisions are commits
/// the mirror holds: a sha cannot move), or a fetch that ends within `SUBMIT_WAIT`.
pub async fn resolve_for_submit(
    state: &AppState,
    repo: i64,
    url: &str,
    good: &str,
    bad: &str,
    use_merge_base: bool,
) -> Resolution {
    let mirrors = state.mirrors.clone();
    let (g, b) = (good.to_string(), bad.to_string());
    let held = tokio::task::spawn_blocking(move || {
        let repo = mirrors.open(repo).ok()?;
        let holds = |rev: &str| {
            rev.len() >= 7
                && rev.chars().all(|c| c.is_ascii_hexdigit())
                && git::resolve(&repo, rev)
                    .is_ok_and(|oid| oid.to_string().starts_with(&rev.to_ascii_lowercase()))
        };
        (holds(&g) && holds(&b)).then(|| git::range_outline(&repo, &g, &b, use_merge_base))
    })
    .await
    .ok()
    .flatten();
    if let Some(range) = held {
        return Resolution::Range(range);
    }
    // Names need the fetch to say which commits they are. Meanwhile the range is walked as
    // the mirror names it now, on the other core; the walk is kept if the fetch leaves both
    // names on the same commits (the range of two commits never changes).
    let early = {
        let mirrors = state.mirrors.clone();
        let (g, b) = (good.to_string(), bad.to_string());
        tokio::task::spawn_blocking(move || {
            let r = mirrors.open(repo).ok()?;
            let (good, bad) = git::resolve_range(&r, &g, &b).ok()?;
            let outline = git::range_outline_of(&r, &g, &b, good, bad, use_merge_base).ok()?;
            Some(((good, bad), outline))
        })
    };
    let fetch = {
        let state = state.clone();
        let url = url.to_string();
        tokio::spawn(async move { fetch_mirror(&state, repo, &url).await })
    };
    match tokio::time::timeout(SUBMIT_WAIT, fetch).await {
        Err(_) => Resolution::Waiting,
        Ok(Err(e)) => Resolution::Range(Err(RangeError::Git(GitError::Remote(
            perfbisect_gitfetch::FetchError::Spawn(std::io::Error::other(e.to_string())),
        )))),
        Ok(Ok(Err(e))) => Resolution::Range(Err(e.into())),
        Ok(Ok(Ok(()))) => {
            let early = early.await.ok().flatten();
            let (good, bad) = (good.to_string(), bad.to_string());
            Resolution::Range(
                on_mirror(state, repo, move |r| {
                    let ends = git::resolve_range(r, &good, &bad)?;
                    match early {
                        Some((walked, outline)) if walked == ends => {
                            tracing::debug!("submit: the walk made during the fetch stands");
                            Ok(outline)
                        }
                        _ => git::range_outline_of(r, &good, &bad, ends.0, ends.1, use_merge_base),
                    }
                })
                .await,
            )
        }
    }
}

async fn range_now(
    state: &AppState,
    repo: i64,
    good: &str,
    bad: &str,
    use_merge_base: bool,
) -> Result<Range, RangeError> {
    let (good, bad) = (good.to_string(), bad.to_string());
    on_mirror(state, repo, move |r| {
        git::range(r, &good, &bad, use_merge_base)
    })
    .await
}

/// Runs `f` on the repository's mirror off the async threads.
async fn on_mirror<T: Send + 'static>(
    state: &AppState,
    repo: i64,
    f: impl FnOnce(&git2::Repository) -> Result<T, RangeError> + Send + 'static,
) -> Result<T, RangeError> {
    let mirrors = state.mirrors.clone();
    tokio::task::spawn_blocking(move || f(&mirrors.open(repo)?))
        .await
        .unwrap_or_else(|e| {
            Err(RangeError::Git(GitError::Remote(
                perfbisect_gitfetch::FetchError::Spawn(std::io::Error::other(e.to_string())),
            )))
        })
}

/// Starts a job on this replica that ends once generation `generation` of `repo` is fetched
/// (here or on another replica) and its waiting bisects are resolved.
pub fn spawn(state: &AppState, repo: i64, generation: i64) {
    let state = state.clone();
    tokio::spawn(async move {
        if let Err(e) = run_until(&state, repo, generation).await {
            tracing::warn!(repository = repo, error = format!("{e:#}"), "fetch job");
        }
    });
}

/// The job: waits for the repository's lock unless the work is done meanwhile; holding it,
/// fetches every outstanding generation and resolves the waiting bisects.
pub async fn run_until(state: &AppState, repo: i64, generation: i64) -> anyhow::Result<()> {
    // A connection of its own, never returned to the pool: should this task die, the
    // connection closes and the lock with it.
    let mut conn = sqlx::PgConnection::connect_with(&state.db.connect_options()).await?;
    let worked = loop {
        let Some(now) = fetches::get(&state.db, repo).await? else {
            break Ok(());
        };
        if now.fetch_done >= generation
            && fetches::waiting(&state.db, repo, now.fetch_done)
                .await?
                .is_empty()
        {
            break Ok(());
        }
        if fetches::try_lock(&mut conn, repo).await? {
            break holding_lock(state, repo).await;
        }
        tokio::time::sleep(LOCK_RETRY).await;
    };
    // Closing the session releases its advisory lock.
    conn.close().await.ok();
    worked
}

async fn holding_lock(state: &AppState, repo: i64) -> anyhow::Result<()> {
    loop {
        let Some(now) = fetches::get(&state.db, repo).await? else {
            return Ok(());
        };
        let error = if now.fetch_requested > now.fetch_done {
            let result = fetch_mirror(state, repo, &now.url).await;
            let error = result.err().map(|e| e.to_string());
            fetches::finished(&state.db, repo, now.fetch_requested, error.as_deref()).await?;
            if let Some(e) = &error {
                tracing::warn!(repository = repo, error = %e, "fetch failed");
            }
            error
        } else {
            now.fetch_error.clone()
        };
        let done = now.fetch_requested.max(now.fetch_done);
        for waiting in fetches::waiting(&state.db, repo, done).await? {
            resolve_waiting(state, repo, &waiting, error.as_deref()).await?;
        }
        let after = fetches::get(&state.db, repo).await?;
        if after.is_none_or(|a| a.fetch_requested <= a.fetch_done) {
            return Ok(());
        }
    }
}

/// Resolves a bisect that waited for the fetch: stores its range and queues it, or fails it
/// with the reason (the fetch failed, a revision does not exist, the range is empty).
async fn resolve_waiting(
    state: &AppState,
    repo: i64,
    w: &fetches::Waiting,
    fetch_error: Option<&str>,
) -> anyhow::Result<()> {
    let range = match fetch_error {
        Some(e) => Err(format!(
            "The repository could not be fetched, so the range was not resolved.\n{e}"
        )),
        None => range_now(state, repo, &w.good_rev, &w.bad_rev, w.use_merge_base)
            .await
            .map_err(|e| format!("The range could not be resolved.\n{e}")),
    };
    let mut tx = state.db.begin().await?;
    if !fetches::lock_waiting(&mut tx, w.id).await? {
        return Ok(());
    }
    match &range {
        Ok(range) => {
            fetches::resolved(
                &mut tx,
                w.id,
                &range.good,
                &range.bad,
                range.candidates.len(),
            )
            .await?;
            crate::store::candidates::insert(&mut tx, w.id, range).await?;
            crate::store::details::insert(&mut tx, w.id, range).await?;
            let story = submitted_story(range, &w.good_rev, &w.bad_rev);
            crate::store::events::record(&mut *tx, w.id, "submitted", &story).await?;
            crate::store::wakeups::wake(&mut *tx, w.id, crate::store::wakeups::Reason::Submitted)
                .await?;
        }
        Err(reason) => {
            crate::scheduler::finish(
                &mut tx,
                w.id,
                perfbisect_wire::states::BisectStatus::Failed,
                reason,
                None,
            )
            .await?;
        }
    }
    tx.commit().await?;
    tracing::info!(
        bisect = w.id,
        resolved = range.is_ok(),
        "waiting bisect resolved"
    );
    if range.is_ok()
        && let Err(e) = crate::scheduler::advance(state, w.id).await
    {
        tracing::error!(bisect = w.id, error = ?e, "first advance");
    }
    Ok(())
}

/// The `submitted` event of a bisect whose range is resolved.
pub fn submitted_story(range: &Range, good: &str, bad: &str) -> String {
    let mut story = format!(
        "Submitted: {} candidate commits in {good}..{bad}.",
        range.candidates.len()
    );
    if let Some(note) = &range.merge_base_note {
        story.push_str("; ");
        story.push_str(note);
    }
    story
}

/// The sweep of every replica: starts a job for each repository with outstanding work that
/// no job of this replica holds (the lock keeps other replicas' jobs apart).
pub async fn run(state: AppState) {
    let running: Arc<Mutex<std::collections::HashSet<i64>>> = Default::default();
    loop {
        match fetches::pending(&state.db).await {
            Ok(pending) => {
                for (repo, generation) in pending {
                    if !running
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(repo)
                    {
                        continue;
                    }
                    let (state, running) = (state.clone(), running.clone());
                    tokio::spawn(async move {
                        if let Err(e) = run_until(&state, repo, generation).await {
                            tracing::warn!(
                                repository = repo,
                                error = format!("{e:#}"),
                                "fetch sweep"
                            );
                        }
                        running
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&repo);
                    });
                }
            }
            Err(e) => tracing::warn!(error = %e, "fetch sweep"),
        }
        tokio::time::sleep(SWEEP_EVERY).await;
    }
}
