//! From a change to its bisect: once per (repository, job, range), through the same code as
//! `POST /api/v1/bisects`.

use crate::state::AppState;
use perfbisect_wire::api::SubmitBisect;

#[derive(Debug, sqlx::FromRow)]
struct Pending {
    id: i64,
    watch_id: i64,
    metric: String,
    relative: f64,
    repository_id: i64,
    repository: String,
    job_spec_id: i64,
    job_yaml: String,
    recipients: serde_json::Value,
    created_by: Option<i64>,
    good_sha: String,
    bad_sha: String,
}

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
    let pending: Vec<Pending> = sqlx::query_as(
        "SELECT c.id, c.watch_id, c.metric, c.relative, w.repository_id, r.name AS repository,
                w.job_spec_id, j.yaml AS job_yaml, w.recipients, w.created_by,
                COALESCE(hg.sha, hb.sha) AS good_sha, COALESCE(hr.sha, ha.sha) AS bad_sha
         FROM watch_changes c
         JOIN watches w ON w.id = c.watch_id
         JOIN repositories r ON r.id = w.repository_id
         JOIN job_specs j ON j.id = w.job_spec_id
         JOIN watch_heads hb ON hb.id = c.before_head_id
         JOIN watch_heads ha ON ha.id = c.after_head_id
         LEFT JOIN watch_heads hg ON hg.watch_id = hb.watch_id AND hg.ref_name = hb.ref_name
                                 AND hg.seq = hb.seq - 1
         LEFT JOIN watch_heads hr ON hr.watch_id = ha.watch_id AND hr.ref_name = ha.ref_name
                                 AND hr.seq = ha.seq + 1
         WHERE c.action = 'bisecting' AND c.bisect_id IS NULL
         ORDER BY c.id",
    )
    .fetch_all(&state.db)
    .await?;
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
    let still: Option<i64> = sqlx::query_scalar(
        "SELECT id FROM watch_changes WHERE id = $1 AND action = 'bisecting' AND bisect_id IS NULL
         FOR UPDATE SKIP LOCKED",
    )
    .bind(p.id)
    .fetch_optional(&mut *tx)
    .await?;
    if still.is_none() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO watch_bisects (repository_id, job_spec_id, good_sha, bad_sha)
         VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
    )
    .bind(p.repository_id)
    .bind(p.job_spec_id)
    .bind(&p.good_sha)
    .bind(&p.bad_sha)
    .execute(&mut *tx)
    .await?;
    let existing: Option<i64> = sqlx::query_scalar(
        "SELECT bisect_id FROM watch_bisects
         WHERE repository_id = $1 AND job_spec_id = $2 AND good_sha = $3 AND bad_sha = $4
         FOR UPDATE",
    )
    .bind(p.repository_id)
    .bind(p.job_spec_id)
    .bind(&p.good_sha)
    .bind(&p.bad_sha)
    .fetch_one(&mut *tx)
    .await?;
    if let Some(bisect) = existing {
        mark_duplicate(
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
        link_range(&mut tx, p, bisect).await?;
        mark_duplicate(
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
            link_range(&mut tx, p, bisect).await?;
            sqlx::query("UPDATE watch_changes SET bisect_id = $2 WHERE id = $1")
                .bind(p.id)
                .bind(bisect)
                .execute(&mut *tx)
                .await?;
            tracing::info!(
                change = p.id,
                watch = p.watch_id,
                bisect,
                "change opened a bisect"
            );
        }
        Err(e) => {
            sqlx::query("UPDATE watch_changes SET action = 'failed', message = $2 WHERE id = $1")
                .bind(p.id)
                .bind(format!("the bisect could not be opened: {e}"))
                .execute(&mut *tx)
                .await?;
            tracing::warn!(change = p.id, error = %e, "change could not open a bisect");
        }
    }
    tx.commit().await?;
    Ok(())
}

/// Links a change to the bisect that answers it: `why`, then the bisect's id.
async fn mark_duplicate(
    tx: &mut sqlx::PgConnection,
    change: i64,
    bisect: i64,
    why: &str,
) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE watch_changes SET action = 'duplicate', bisect_id = $2, message = $3 || ' ' || $2
         WHERE id = $1",
    )
    .bind(change)
    .bind(bisect)
    .bind(why)
    .execute(tx)
    .await?;
    Ok(())
}

/// Records `bisect` as the one of this change's range (`watch_bisects`), so a later change
/// of the same range links to it.
async fn link_range(tx: &mut sqlx::PgConnection, p: &Pending, bisect: i64) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE watch_bisects SET bisect_id = $5
         WHERE repository_id = $1 AND job_spec_id = $2 AND good_sha = $3 AND bad_sha = $4",
    )
    .bind(p.repository_id)
    .bind(p.job_spec_id)
    .bind(&p.good_sha)
    .bind(&p.bad_sha)
    .bind(bisect)
    .execute(tx)
    .await?;
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
    let open: Vec<(i64, String, String)> = sqlx::query_as(
        "SELECT b.id, b.good_sha, b.bad_sha FROM watch_bisects wb
         JOIN bisects b ON b.id = wb.bisect_id
         WHERE wb.repository_id = $1 AND wb.job_spec_id = $2
           AND b.status NOT IN ('failed', 'cancelled', 'not_reproduced') AND b.good_sha <> ''
         ORDER BY b.id",
    )
    .bind(p.repository_id)
    .bind(p.job_spec_id)
    .fetch_all(&mut *tx)
    .await?;
    if open.is_empty() {
        return Ok(None);
    }
    let (mirrors, repo_id) = (state.mirrors.clone(), p.repository_id);
    let range = (p.good_sha.clone(), p.bad_sha.clone());
    let found = tokio::task::spawn_blocking(move || -> anyhow::Result<Option<i64>> {
        let repo = mirrors.open(repo_id)?;
        for (id, good, bad) in open {
            if ranges_overlap(&repo, (&range.0, &range.1), (&good, &bad))? {
                return Ok(Some(id));
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
