//! From a change to its bisect: once per (repository, job, range), through the same code as
//! `POST /api/v1/bisects`.

use crate::state::AppState;
use crate::store::watch_bisects;
use crate::store::watch_changes::{self, Pending};
use perfbisect_wire::api::SubmitBisect;

/// Opens the bisect of every change that should have one and has none yet (a crash between
/// recording a change and opening its bisect leaves such a row; the next tick opens it).
///
/// The range is one measured commit wider on each side than the detected pair: from the
/// commit before the last one on the old level to the commit after the first one on the new
/// level. The detector places about one change in six a commit off (cp-bench, 5 runs per
/// commit, a 3% step), and a range that misses its change can only end "not reproduced";
/// the wider range costs one or two more bisection steps, and if it brings in a second
/// change the engine reports both.
pub async fn open_pending(state: &AppState) -> anyhow::Result<()> {
    let pending = watch_changes::pending(&state.db).await?;
    for p in pending {
        if let Err(e) = open(state, &p).await {
            tracing::warn!(change = p.id, error = ?e, "opening a bisect");
        }
    }
    Ok(())
}

/// Opens (or finds) the bisect of one change. The `watch_bisects` row of the range is held
/// `FOR UPDATE` while the bisect is submitted, so a change of another metric or another
/// watch with the same range waits, then links to the same bisect.
async fn open(state: &AppState, p: &Pending) -> anyhow::Result<()> {
    let mut tx = state.db.begin().await?;
    // Re-read under lock: another replica may have handled it.
    if !watch_changes::lock_pending(&mut tx, p.id).await? {
        return Ok(());
    }
    if let Some(bisect) = watch_bisects::lock(&mut tx, p.range()).await? {
        watch_changes::mark_duplicate(
            &mut tx,
            p.id,
            bisect,
            "the same range is already bisected by bisect",
        )
        .await?;
        tx.commit().await?;
        tracing::info!(change = p.id, bisect, "change already bisected");
        return Ok(());
    }
    if let Some(bisect) = overlapping(state, &mut tx, p).await? {
        // The same change seen one head apart by another metric or watch: its range shares
        // commits with a bisect already open for this job, which will name the culprit
        // (and any second change in its range). This range links to that bisect too.
        watch_bisects::link(&mut tx, p.range(), bisect).await?;
        watch_changes::mark_duplicate(
            &mut tx,
            p.id,
            bisect,
            "its range overlaps the range of bisect",
        )
        .await?;
        tx.commit().await?;
        tracing::info!(
            change = p.id,
            bisect,
            "change inside a range already bisected"
        );
        return Ok(());
    }
    let recipients: Vec<String> = serde_json::from_value(p.recipients.clone()).unwrap_or_default();
    let req = SubmitBisect {
        repository: p.repository.clone(),
        good: p.good_sha.clone(),
        bad: p.bad_sha.clone(),
        job: p.job_yaml.clone(),
        metric: p.metric.clone(),
        direction: Some(
            if p.relative >= 0.0 {
                "increase"
            } else {
                "decrease"
            }
            .into(),
        ),
        magnitude_pct: Some((p.relative.abs() * 100.0).max(0.01)),
        confidence: None,
        max_runs: None,
        notify: recipients,
        use_merge_base: true,
        first_parent: false,
    };
    match crate::submission::submit(state, p.created_by, &req).await {
        Ok(bisect) => {
            watch_bisects::link(&mut tx, p.range(), bisect).await?;
            watch_changes::opened(&mut tx, p.id, bisect).await?;
            tracing::info!(
                change = p.id,
                watch = p.watch_id,
                bisect,
                "change opened a bisect"
            );
        }
        Err(e) => {
            let why = format!("the bisect could not be opened: {e}");
            watch_changes::failed(&mut tx, p.id, &why).await?;
            tracing::warn!(change = p.id, error = %e, "change could not open a bisect");
        }
    }
    tx.commit().await?;
    Ok(())
}

/// A bisect of the same repository and job, opened for a watched change, whose range shares
/// a commit with this change's range. One that failed, was cancelled or did not reproduce
/// its change does not count: it answered nothing about this one.
async fn overlapping(
    state: &AppState,
    tx: &mut sqlx::PgConnection,
    p: &Pending,
) -> anyhow::Result<Option<i64>> {
    let open = watch_bisects::answering(tx, p.repository_id, p.job_spec_id).await?;
    if open.is_empty() {
        return Ok(None);
    }
    let (mirrors, repo_id) = (state.mirrors.clone(), p.repository_id);
    let range = (p.good_sha.clone(), p.bad_sha.clone());
    let found = tokio::task::spawn_blocking(move || -> anyhow::Result<Option<i64>> {
        let repo = mirrors.open(repo_id)?;
        for b in open {
            if ranges_overlap(&repo, (&range.0, &range.1), (&b.good_sha, &b.bad_sha))? {
                return Ok(Some(b.id));
            }
        }
        Ok(None)
    })
    .await??;
    Ok(found)
}

/// Whether the ranges `good..bad` (commits reachable from bad and not from good) of two
/// pairs share a commit: the merge base of the two bad ends is reachable from both, and it
/// is in both ranges when neither good end reaches it. (On a linear history that is exact;
/// across merges it answers for the nearest common commit, which is what a change seen on
/// one branch by two watches shares.)
fn ranges_overlap(
    repo: &git2::Repository,
    a: (&str, &str),
    b: (&str, &str),
) -> anyhow::Result<bool> {
    let oid = |s: &str| git2::Oid::from_str(s);
    let (good_a, bad_a, good_b, bad_b) = (oid(a.0)?, oid(a.1)?, oid(b.0)?, oid(b.1)?);
    let base = match repo.merge_base(bad_a, bad_b) {
        Ok(base) => base,
        Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    let outside = |good: git2::Oid| -> Result<bool, git2::Error> {
        Ok(base == good || repo.graph_descendant_of(good, base)?)
    };
    Ok(!outside(good_a)? && !outside(good_b)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// c0 - c1 - ... - c5 on one branch.
    fn linear() -> (tempfile::TempDir, git2::Repository, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init_bare(dir.path()).unwrap();
        let who = git2::Signature::now("t", "t@example.invalid").unwrap();
        let tree = repo
            .find_tree(repo.treebuilder(None).unwrap().write().unwrap())
            .unwrap();
        let mut shas: Vec<git2::Oid> = Vec::new();
        for i in 0..6 {
            let parents: Vec<git2::Commit> = shas
                .last()
                .map(|p| repo.find_commit(*p).unwrap())
                .into_iter()
                .collect();
            let refs: Vec<&git2::Commit> = parents.iter().collect();
            shas.push(
                repo.commit(None, &who, &who, &format!("c{i}"), &tree, &refs)
                    .unwrap(),
            );
        }
        drop(tree);
        let shas = shas.iter().map(|o| o.to_string()).collect();
        (dir, repo, shas)
    }

    #[test]
    fn ranges_overlap_when_they_share_a_commit() {
        let (_dir, repo, c) = linear();
        let r = |g: usize, b: usize| (c[g].as_str(), c[b].as_str());
        // (c1, c3] and (c3, c5] touch at c3, which only the first holds.
        assert!(!ranges_overlap(&repo, r(1, 3), r(3, 5)).unwrap());
        assert!(!ranges_overlap(&repo, r(3, 5), r(1, 3)).unwrap());
        // Shifted by one: c4 is in both.
        assert!(ranges_overlap(&repo, r(1, 4), r(3, 5)).unwrap());
        assert!(ranges_overlap(&repo, r(3, 5), r(1, 4)).unwrap());
        // Nested, and equal.
        assert!(ranges_overlap(&repo, r(2, 3), r(0, 5)).unwrap());
        assert!(ranges_overlap(&repo, r(0, 5), r(2, 3)).unwrap());
        assert!(ranges_overlap(&repo, r(1, 2), r(1, 2)).unwrap());
    }
}
