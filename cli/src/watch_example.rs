//! A generated repository for watches: a mainline pushed to over time (a head every few
//! commits) with two planted changes of the example benchmark's score, the second inside a
//! topic branch that a merge brings in. The whole history is written at once; `pushes` lists
//! where `main` points after each push, so a test can move the branch one push at a time.

use crate::example::{BENCH_C, Builder, params_h};
use git2::{Oid, Repository};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct WatchHistoryOptions {
    /// Mainline commits before the first head the watch sees.
    pub initial: usize,
    /// Pushes after that.
    pub pushes: usize,
    /// First-parent commits per push (at least 3).
    pub per_push: usize,
    /// The push whose middle commit plants the first change (1-based).
    pub first_change_push: usize,
    /// The push that merges the topic branch whose first commit plants the second change.
    pub second_change_push: usize,
    /// Relative changes planted (0.08 = +8%).
    pub first_change: f64,
    pub second_change: f64,
    pub noise_cv: f64,
}

impl Default for WatchHistoryOptions {
    fn default() -> Self {
        Self {
            initial: 8,
            pushes: 10,
            per_push: 3,
            first_change_push: 3,
            second_change_push: 7,
            first_change: 0.08,
            second_change: -0.07,
            noise_cv: 0.005,
        }
    }
}

#[derive(Debug, Clone)]
pub struct WatchHistory {
    /// The bare repository.
    pub path: PathBuf,
    /// Where `main` points: `pushes[0]` is the first head, `pushes[k]` the head after push k.
    pub pushes: Vec<String>,
    /// The commit of the first change (on the mainline).
    pub first_planted: String,
    /// The commit of the second change (on the topic branch, not on main's first-parent chain).
    pub second_planted: String,
    /// The merge that brings the second change into main.
    pub merge: String,
}

impl WatchHistory {
    /// Moves `main` to where it is after push `k`, as a push would.
    pub fn push(&self, k: usize) -> anyhow::Result<()> {
        let repo = Repository::open_bare(&self.path)?;
        repo.reference(
            "refs/heads/main",
            Oid::from_str(&self.pushes[k])?,
            true,
            &format!("push {k}"),
        )?;
        Ok(())
    }
}

/// Writes the history (bare) at `path`, with `main` at the first head.
pub fn generate(path: &Path, opts: &WatchHistoryOptions) -> anyhow::Result<WatchHistory> {
    anyhow::ensure!(opts.per_push >= 3, "a push needs at least 3 commits");
    anyhow::ensure!(
        1 <= opts.first_change_push
            && opts.first_change_push < opts.second_change_push
            && opts.second_change_push <= opts.pushes,
        "the changes must be planted in order, within the pushes"
    );
    if path.exists() {
        std::fs::remove_dir_all(path)?;
    }
    let repo = Repository::init_bare(path)?;
    let mut b = Builder {
        repo: &repo,
        clock: 1_700_000_000,
    };
    let mut score = 1000.0;
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    files.insert("bench.c".into(), BENCH_C.into());
    files.insert("params.h".into(), params_h(score, opts.noise_cv));
    files.insert("CHANGES".into(), "start\n".into());
    let mut head = b.commit(&files, &[], "demo: initial benchmark")?;
    let mut n = 0;
    let mut step =
        |b: &mut Builder, files: &mut BTreeMap<String, String>, head: Oid, what: &str| {
            n += 1;
            let c = format!("{}change {n}\n", files["CHANGES"]);
            files.insert("CHANGES".into(), c);
            b.commit(files, &[head], &format!("demo: {what} {n}"))
        };
    for _ in 1..opts.initial {
        head = step(&mut b, &mut files, head, "change")?;
    }
    let mut pushes = vec![head.to_string()];
    let (mut first, mut second, mut merge) = (None, None, None);
    for p in 1..=opts.pushes {
        for k in 0..opts.per_push {
            if p == opts.first_change_push && k == opts.per_push / 2 {
                score *= 1.0 + opts.first_change;
                files.insert("params.h".into(), params_h(score, opts.noise_cv));
                head = step(
                    &mut b,
                    &mut files,
                    head,
                    "make the scoring loop do more work",
                )?;
                first = Some(head);
            } else if p == opts.second_change_push && k == opts.per_push / 2 {
                // A topic forked here: its first commit plants the change, a second one
                // follows; mainline moves on meanwhile, then the topic is merged.
                let mut topic = files.clone();
                score *= 1.0 + opts.second_change;
                topic.insert("params.h".into(), params_h(score, opts.noise_cv));
                topic.insert("topic.txt".into(), "rework\n".into());
                let t1 = b.commit(&topic, &[head], "topic: rework the hot loop")?;
                topic.insert("topic.txt".into(), "rework\ntidy\n".into());
                let t2 = b.commit(&topic, &[t1], "topic: tidy up")?;
                head = step(&mut b, &mut files, head, "housekeeping during topic")?;
                files.insert("params.h".into(), topic["params.h"].clone());
                files.insert("topic.txt".into(), topic["topic.txt"].clone());
                head = b.commit(&files, &[head, t2], "Merge branch 'topic'")?;
                second = Some(t1);
                merge = Some(head);
            } else {
                head = step(&mut b, &mut files, head, "change")?;
            }
        }
        pushes.push(head.to_string());
    }
    let history = WatchHistory {
        path: path.to_path_buf(),
        pushes,
        first_planted: first.expect("planted").to_string(),
        second_planted: second.expect("planted").to_string(),
        merge: merge.expect("merged").to_string(),
    };
    history.push(0)?;
    repo.set_head("refs/heads/main")?;
    Ok(history)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plants_two_changes_one_behind_a_merge() {
        let dir = tempfile::tempdir().unwrap();
        let h = generate(&dir.path().join("w.git"), &WatchHistoryOptions::default()).unwrap();
        assert_eq!(h.pushes.len(), 11);
        let repo = Repository::open_bare(&h.path).unwrap();
        let params = |sha: &str| {
            let c = repo.find_commit(Oid::from_str(sha).unwrap()).unwrap();
            let e = c
                .tree()
                .unwrap()
                .get_name("params.h")
                .unwrap()
                .to_object(&repo)
                .unwrap();
            String::from_utf8(e.as_blob().unwrap().content().to_vec()).unwrap()
        };
        let parent = |sha: &str| {
            let c = repo.find_commit(Oid::from_str(sha).unwrap()).unwrap();
            c.parent_id(0).unwrap().to_string()
        };
        assert!(params(&h.first_planted).contains("1080.000"));
        assert!(params(&parent(&h.first_planted)).contains("1000.000"));
        assert!(params(&h.second_planted).contains("1004.400"));
        assert!(params(&h.merge).contains("1004.400"));
        let merge = repo.find_commit(Oid::from_str(&h.merge).unwrap()).unwrap();
        assert_eq!(merge.parent_count(), 2);
        // The second change is not on main's first-parent chain.
        let mut c = repo
            .find_commit(Oid::from_str(h.pushes.last().unwrap()).unwrap())
            .unwrap();
        loop {
            assert_ne!(c.id().to_string(), h.second_planted);
            match c.parent(0) {
                Ok(p) => c = p,
                Err(_) => break,
            }
        }
        let main = repo.find_reference("refs/heads/main").unwrap();
        assert_eq!(main.target().unwrap().to_string(), h.pushes[0]);
    }
}
