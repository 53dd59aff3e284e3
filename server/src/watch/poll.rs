//! Noticing new heads: fetch the mirror, compare each watched branch's head with the last
//! one measured, and queue the commits to measure.

use crate::git::GitError;
use crate::state::AppState;
use crate::store::{series, tasks, watches};
use git2::{Oid, Repository};

/// A commit to measure, in series order.
#[derive(Debug, Clone, PartialEq)]
pub struct ToMeasure {
    pub sha: String,
    pub subject: String,
    /// `head`, `sample` or `backfill`.
    pub kind: &'static str,
}

/// How far back a first-parent walk looks for the previous head before calling it a
/// rewritten branch.
const MAX_WALK: usize = 100_000;

/// Which commits of `branch` (now at `head`) to measure, given the last head measured.
///
/// New branch: up to `backfill` first-parent ancestors, oldest first, then the head. Known
/// branch: when the push brought several commits, up to `sample` of the first-parent
/// commits between the old and new head (evenly spread), then the head. A rewritten
/// branch (the old head is not on the new head's first-parent chain): the head alone.
pub fn plan(
    repo: &Repository,
    head: Oid,
    last: Option<Oid>,
    sample: usize,
    backfill: usize,
) -> Result<Vec<ToMeasure>, git2::Error> {
    let summary = |oid: Oid| -> Result<String, git2::Error> {
        let c = repo.find_commit(oid)?;
        Ok(String::from_utf8_lossy(c.summary_bytes().unwrap_or_default()).into_owned())
    };
    if last == Some(head) {
        return Ok(Vec::new());
    }
    // First-parent chain below the head, newest first.
    let mut chain = Vec::new();
    let mut cur = repo.find_commit(head)?;
    let mut found_last = false;
    let limit = if last.is_some() { MAX_WALK } else { backfill };
    while chain.len() < limit {
        let Ok(parent) = cur.parent(0) else { break };
        if Some(parent.id()) == last {
            found_last = true;
            break;
        }
        chain.push(parent.id());
        cur = parent;
    }
    let picked: Vec<(Oid, &'static str)> = match last {
        None => chain.iter().rev().map(|o| (*o, "backfill")).collect(),
        Some(_) if !found_last => Vec::new(),
        Some(_) => spread(&chain, sample)
            .into_iter()
            .rev()
            .map(|o| (o, "sample"))
            .collect(),
    };
    let mut out = Vec::with_capacity(picked.len() + 1);
    for (oid, kind) in picked {
        out.push(ToMeasure {
            sha: oid.to_string(),
            subject: summary(oid)?,
            kind,
        });
    }
    out.push(ToMeasure {
        sha: head.to_string(),
        subject: summary(head)?,
        kind: "head",
    });
    Ok(out)
}

/// Up to `n` items of `items`, evenly spread, in their order.
fn spread<T: Copy>(items: &[T], n: usize) -> Vec<T> {
    if n == 0 || items.is_empty() {
        return Vec::new();
    }
    if n >= items.len() {
        return items.to_vec();
    }
    (0..n)
        .map(|i| items[(i * items.len() + items.len() / 2) / n])
        .collect()
}

/// The branches of the mirror that `pattern` names (a branch name or a glob), with heads.
fn branches(repo: &Repository, pattern: &str) -> Result<Vec<(String, Oid)>, git2::Error> {
    let mut out = Vec::new();
    for b in repo.branches(Some(git2::BranchType::Local))? {
        let (branch, _) = b?;
        let Some(name) = branch.name()?.map(str::to_string) else {
            continue;
        };
        if perfbisect_report::glob::matches(pattern, &name)
            && let Some(oid) = branch.get().peel_to_commit().ok().map(|c| c.id())
        {
            out.push((name, oid));
        }
    }
    out.sort();
    Ok(out)
}

/// Fetches the watch's repository and queues a task for every commit to measure. Returns
/// the shas queued. Safe to run on several replicas: the watch row is locked while heads are
/// recorded, and a head recorded by another replica meanwhile is not recorded again.
pub async fn poll(state: &AppState, watch_id: i64) -> anyhow::Result<Vec<String>> {
    let w = watches::for_poll(&state.db, watch_id).await?;
    let known = series::last_heads(&state.db, watch_id).await?;
    let mirrors = state.mirrors.clone();
    let (repo_id, url, pattern) = (w.repository_id, w.url.clone(), w.ref_pattern.clone());
    let (sample, backfill) = (w.sample_commits as usize, w.backfill as usize);
    let known_for_scan = known.clone();
    let plans =
        tokio::task::spawn_blocking(move || -> Result<Vec<(String, Vec<ToMeasure>)>, GitError> {
            mirrors.fetch(repo_id, &url)?;
            let repo = mirrors.open(repo_id)?;
            let mut plans = Vec::new();
            for (branch, head) in branches(&repo, &pattern)? {
                let last = known_for_scan
                    .get(&branch)
                    .and_then(|s| Oid::from_str(s).ok());
                let todo = plan(&repo, head, last, sample, backfill)?;
                if !todo.is_empty() {
                    plans.push((branch, todo));
                }
            }
            Ok(plans)
        })
        .await??;

    let mut tx = state.db.begin().await?;
    watches::lock(&mut tx, watch_id).await?;
    let now_known = series::last_heads(&mut *tx, watch_id).await?;
    let mut queued = Vec::new();
    for (branch, todo) in plans {
        if now_known.get(&branch) != known.get(&branch) {
            continue; // another replica recorded this branch's new head meanwhile
        }
        let mut seq = series::next_seq(&mut tx, watch_id, &branch).await?;
        for m in todo {
            let new = series::NewHead {
                watch: watch_id,
                branch: &branch,
                seq,
                sha: &m.sha,
                kind: m.kind,
                subject: &m.subject,
            };
            let Some(head) = series::insert_head(&mut tx, &new).await? else {
                continue;
            };
            seq += 1;
            let task = tasks::NewWatchTask {
                watch: watch_id,
                head,
                sha: &m.sha,
                job_spec_id: w.job_spec_id,
                host_group: &w.host_group,
                runs: w.runs_per_head,
            };
            tasks::queue_for_watch(&mut tx, &task).await?;
            tracing::info!(
                watch = watch_id,
                branch,
                sha = m.sha,
                kind = m.kind,
                "queued a commit to measure"
            );
            queued.push(m.sha);
        }
    }
    watches::polled(&mut tx, watch_id).await?;
    if !queued.is_empty() {
        crate::queue::notify_queued(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(queued)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_picks_evenly_in_order() {
        let items: Vec<u32> = (0..10).collect();
        assert_eq!(spread(&items, 0), Vec::<u32>::new());
        assert_eq!(spread(&items, 2), vec![2, 7]);
        assert_eq!(spread(&items, 5), vec![1, 3, 5, 7, 9]);
        assert_eq!(spread(&items, 20), items);
    }

    fn commit(repo: &Repository, parents: &[Oid], msg: &str) -> Oid {
        let sig = git2::Signature::now("Test", "test@example.org").unwrap();
        let tree = {
            let mut b = repo.treebuilder(None).unwrap();
            let blob = repo.blob(msg.as_bytes()).unwrap();
            b.insert("f", blob, 0o100644).unwrap();
            b.write().unwrap()
        };
        let tree = repo.find_tree(tree).unwrap();
        let parents: Vec<git2::Commit> = parents
            .iter()
            .map(|p| repo.find_commit(*p).unwrap())
            .collect();
        let refs: Vec<&git2::Commit> = parents.iter().collect();
        repo.commit(None, &sig, &sig, msg, &tree, &refs).unwrap()
    }

    #[test]
    fn plan_backfills_samples_and_skips_rewrites() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let mut chain = vec![commit(&repo, &[], "c0")];
        for i in 1..10 {
            let p = *chain.last().unwrap();
            chain.push(commit(&repo, &[p], &format!("c{i}")));
        }
        // A side branch merged at the end: its commit is not on the first-parent chain.
        let side = commit(&repo, &[chain[5]], "side");
        let merge = commit(&repo, &[chain[9], side], "merge");
        let shas = |v: &[ToMeasure]| {
            v.iter()
                .map(|m| (m.sha.clone(), m.kind))
                .collect::<Vec<_>>()
        };

        let first = plan(&repo, chain[4], None, 2, 3).unwrap();
        assert_eq!(
            shas(&first),
            vec![
                (chain[1].to_string(), "backfill"),
                (chain[2].to_string(), "backfill"),
                (chain[3].to_string(), "backfill"),
                (chain[4].to_string(), "head"),
            ]
        );
        assert_eq!(first[3].subject, "c4");
        // A push of chain[5..=9] and the merge: two samples of the five between, then the head.
        let next = plan(&repo, merge, Some(chain[4]), 2, 3).unwrap();
        assert_eq!(
            shas(&next),
            vec![
                (chain[6].to_string(), "sample"),
                (chain[8].to_string(), "sample"),
                (merge.to_string(), "head"),
            ]
        );
        assert!(plan(&repo, merge, Some(merge), 2, 3).unwrap().is_empty());
        // The old head is not on the first-parent chain (a rewritten branch): the head alone.
        let rewritten = plan(&repo, merge, Some(side), 2, 3).unwrap();
        assert_eq!(shas(&rewritten), vec![(merge.to_string(), "head")]);
    }
}
