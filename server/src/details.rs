//! The subjects and authors of a bisect's commits, stored after its submit has answered.
//!
//! Scheduling needs only the candidate graph, which the submit stores in the bisect's
//! transaction with `bisects.details_missing` set. Reading 100,000 commits' subjects and
//! authors from the mirror (`git cat-file --batch`, 0.35-0.42 s) and storing them
//! (`bisect_commit_details`, one COPY) follows: the submitting replica starts it once the
//! submit is done (`spawn`); every replica's sweep (`run`, at start and every few seconds)
//! fills what a replica that died left missing; a report fills it first if it must
//! (`ensure`). Each fill holds the bisect's fill lock and clears the flag in the
//! transaction that stores the rows, so the details are stored once, whole or not at all.
//! Until then pages and the API show the commits by sha, with empty subjects.

use crate::git::{self, GitError};
use crate::state::AppState;
use crate::store;
use git2::Oid;
use std::time::Duration;

/// How often each replica looks for bisects whose details are missing.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// Commits read from the mirror and sent on, at most, per batch.
const BATCH: usize = 4096;

/// Fills bisect `id`'s details in the background with the commits the submit walked (the
/// good endpoint first, then the candidates by index): the submit's own fill. Should it
/// fail, the flag stays set and a sweep fills them.
pub fn spawn(state: &AppState, id: i64, commits: Vec<Oid>) {
    let state = state.clone();
    tokio::spawn(async move {
        let t = std::time::Instant::now();
        match fill(&state, id, Some(commits), false).await {
            Ok(filled) => tracing::info!(
                bisect = id,
                filled,
                fill_ms = t.elapsed().as_millis() as u64,
                "details: filled after submit"
            ),
            Err(e) => tracing::warn!(bisect = id, error = format!("{e:#}"), "details fill"),
        }
    });
}

/// Makes sure bisect `id`'s details are stored: fills them now if they are missing, after
/// waiting for a fill under way elsewhere. What a report calls before it reads them.
pub async fn ensure(state: &AppState, id: i64) -> anyhow::Result<()> {
    if !store::details::is_missing(&state.db, id).await? {
        return Ok(());
    }
    fill(state, id, None, true).await?;
    Ok(())
}

/// Every replica's sweep: fills the details of every bisect that lacks them and whose fill
/// nobody holds; first at start (a replica that died may have left some), then every
/// `SWEEP_EVERY`.
pub async fn run(state: AppState) {
    loop {
        if let Err(e) = sweep(&state).await {
            tracing::warn!(error = format!("{e:#}"), "details sweep");
        }
        tokio::time::sleep(SWEEP_EVERY).await;
    }
}

/// One pass of the sweep; how many bisects it filled.
pub async fn sweep(state: &AppState) -> anyhow::Result<usize> {
    let mut filled = 0;
    for id in store::details::all_missing(&state.db).await? {
        match fill(state, id, None, false).await {
            Ok(true) => {
                tracing::info!(bisect = id, "details: filled by the sweep");
                filled += 1
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(bisect = id, error = format!("{e:#}"), "details fill"),
        }
    }
    Ok(filled)
}

/// Fills bisect `id`'s details if they are missing, under its fill lock (waited for when
/// `wait`, else a held lock means someone else fills them). `commits`: the good endpoint
/// and the candidates by index, if known; else read back from its graph. True when
/// this call stored them.
async fn fill(
    state: &AppState,
    id: i64,
    commits: Option<Vec<Oid>>,
    wait: bool,
) -> anyhow::Result<bool> {
    let mut tx = state.db.begin().await?;
    if wait {
        store::details::lock(&mut tx, id).await?;
    } else if !store::details::try_lock(&mut tx, id).await? {
        return Ok(false);
    }
    let Some(missing) = store::details::missing(&mut tx, id).await? else {
        return Ok(false);
    };
    let commits = match commits {
        Some(c) => c,
        None => store::details::commits(&mut tx, id)
            .await?
            .iter()
            .map(|s| Oid::from_str(s))
            .collect::<Result<Vec<_>, _>>()?,
    };
    anyhow::ensure!(!commits.is_empty(), "bisect {id} has no stored commits");
    // A mirror holds every ancestor of a commit it holds: the endpoints tell whether this
    // replica's mirror has the range (another replica may have fetched it first).
    if !holds(state, missing.repository_id, &commits).await {
        crate::fetcher::fetch_mirror(state, missing.repository_id, &missing.url).await?;
    }
    let expected = commits.len();
    let mirror = state.mirrors.path(missing.repository_id);
    let (batches, reader) = start_reading(mirror, commits);
    let stored = store::details::insert_streamed(&mut tx, id, batches).await;
    reader.await??;
    let stored = stored?;
    anyhow::ensure!(
        stored == expected,
        "bisect {id}: {stored} of {expected} commits read from the mirror"
    );
    store::details::filled(&mut tx, id).await?;
    tx.commit().await?;
    Ok(true)
}

/// Whether the repository's mirror on this replica holds the first and last of `commits`.
async fn holds(state: &AppState, repo: i64, commits: &[Oid]) -> bool {
    let mirrors = state.mirrors.clone();
    let ends = [commits[0], commits[commits.len() - 1]];
    tokio::task::spawn_blocking(move || {
        mirrors
            .open(repo)
            .is_ok_and(|r| ends.iter().all(|&c| r.find_commit(c).is_ok()))
    })
    .await
    .unwrap_or(false)
}

/// Batches of (sha, subject, author), in index order.
type Batches = tokio::sync::mpsc::Receiver<Vec<(String, String, String)>>;

/// Reads the sha, subject and author of each of `commits` from `mirror` on a blocking
/// thread, in order, batch by batch (at most 32 batches ahead of the COPY that takes them).
fn start_reading(
    mirror: std::path::PathBuf,
    commits: Vec<Oid>,
) -> (Batches, tokio::task::JoinHandle<Result<(), GitError>>) {
    let (send, batches) = tokio::sync::mpsc::channel(32);
    let reader = tokio::task::spawn_blocking(move || {
        let mut shas: Vec<String> = commits.iter().map(Oid::to_string).collect();
        let details = git::Details::Pending { mirror, commits };
        let mut batch = Vec::with_capacity(BATCH);
        // A send fails once the receiver has given up: the reading stops there.
        let read = details.read(|i, subject, author| {
            batch.push((std::mem::take(&mut shas[i]), subject, author));
            batch.len() < BATCH
                || send
                    .blocking_send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)))
                    .is_ok()
        });
        if !batch.is_empty() {
            let _ = send.blocking_send(batch);
        }
        read
    });
    (batches, reader)
}
