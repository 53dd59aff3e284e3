//! The DAG logic against real git: the same remaining set as `git rev-list bad ^good...` and
//! a split point as good as `git rev-list --bisect` (the same commit when git's is unique).

use perfbisect_engine::CandidateGraph;
use perfbisect_engine::synth::{self, Shape, SplitMix};
use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

struct Repo {
    dir: PathBuf,
    /// Candidate index → sha; the good commit is `good`.
    shas: Vec<String>,
    good: String,
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A bare repository holding a good root commit and the candidates of `parents`.
fn make_repo(name: &str, parents: &[Vec<usize>]) -> Repo {
    let dir = std::env::temp_dir().join(format!("perfbisect-engine-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "--bare", "."]);
    let mut stream = String::new();
    let commit = |s: &mut String, mark: usize, time: usize, ps: &[usize]| {
        let msg = format!("c{mark}");
        s.push_str(&format!(
            "commit refs/heads/work\nmark :{mark}\ncommitter T <t@example.com> {} +0000\ndata {}\n{msg}\n",
            1_000_000_000 + 60 * time,
            msg.len()
        ));
        if let Some((first, rest)) = ps.split_first() {
            s.push_str(&format!("from :{first}\n"));
            for m in rest {
                s.push_str(&format!("merge :{m}\n"));
            }
        }
        s.push('\n');
    };
    commit(&mut stream, 1, 0, &[]);
    for (i, ps) in parents.iter().enumerate() {
        // Candidate i is mark i + 2; a candidate without parents in the set sits on good.
        let marks: Vec<usize> = if ps.is_empty() {
            vec![1]
        } else {
            ps.iter().map(|p| p + 2).collect()
        };
        commit(&mut stream, i + 2, i + 1, &marks);
    }
    let marks_file = dir.join("marks");
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .arg(format!("--export-marks={}", marks_file.display()))
        .current_dir(&dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", &dir)
        .stdin(Stdio::piped())
        .spawn()
        .expect("git fast-import runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stream.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    let by_mark: HashMap<usize, String> = std::fs::read_to_string(&marks_file)
        .unwrap()
        .lines()
        .map(|l| {
            let (m, sha) = l.split_once(' ').unwrap();
            (m[1..].parse().unwrap(), sha.to_string())
        })
        .collect();
    let shas = (0..parents.len())
        .map(|i| by_mark[&(i + 2)].clone())
        .collect();
    Repo {
        dir,
        shas,
        good: by_mark[&1].clone(),
    }
}

/// `git rev-list --bisect-all` over `tips ^negs`: (sha, dist) lines.
fn bisect_all(repo: &Repo, bad: usize, goods: &[&str]) -> Vec<(String, usize)> {
    let mut args = vec![
        "rev-list".to_string(),
        "--bisect-all".into(),
        repo.shas[bad].clone(),
    ];
    args.extend(goods.iter().map(|g| format!("^{g}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    git(&repo.dir, &args)
        .lines()
        .map(|l| {
            let (sha, rest) = l.split_once(' ').unwrap();
            let d = rest
                .split("dist=")
                .nth(1)
                .unwrap()
                .trim_end_matches(')')
                .parse()
                .unwrap();
            (sha.to_string(), d)
        })
        .collect()
}

fn bisect_one(repo: &Repo, bad: usize, goods: &[&str]) -> String {
    let mut args = vec![
        "rev-list".to_string(),
        "--bisect".into(),
        repo.shas[bad].clone(),
    ];
    args.extend(goods.iter().map(|g| format!("^{g}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    git(&repo.dir, &args).trim().to_string()
}

fn check(name: &str, parents: Vec<Vec<usize>>, seed: u64) {
    let repo = make_repo(name, &parents);
    let graph = CandidateGraph::new(repo.shas.clone(), parents).unwrap();
    let n = graph.len();
    let index: HashMap<&str, usize> = repo
        .shas
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_str(), i))
        .collect();
    let mut rng = SplitMix::new(seed);
    let mut compared_unique = 0;
    let rounds = if n < 4 { 1 } else { 12 };
    for round in 0..rounds {
        // Round 0 is the whole range; later rounds mark random commits good and bad.
        let (goods, bad): (Vec<usize>, usize) = if round == 0 {
            (vec![], graph.bad())
        } else {
            let bad = n / 4 + rng.below(n - n / 4);
            let goods = (0..1 + rng.below(3)).map(|_| rng.below(bad)).collect();
            (goods, bad)
        };
        let set = graph.remaining(&goods, &[bad]);
        let ours: BTreeSet<usize> = (0..n).filter(|&i| set[i]).collect();
        let mut neg: Vec<&str> = vec![repo.good.as_str()];
        neg.extend(goods.iter().map(|&g| repo.shas[g].as_str()));
        let all = bisect_all(&repo, bad, &neg);
        let theirs: BTreeSet<usize> = all.iter().map(|(s, _)| index[s.as_str()]).collect();
        assert_eq!(ours, theirs, "{name} round {round}: remaining set differs");
        if ours.is_empty() {
            continue;
        }
        let best = all.iter().map(|&(_, d)| d).max().unwrap();
        let (choice, dist) = graph.best_split(&set, &vec![false; n]).unwrap();
        assert_eq!(
            dist, best,
            "{name} round {round}: our split is not as good as git's"
        );
        let git_choice = bisect_one(&repo, bad, &neg);
        if all.iter().filter(|&&(_, d)| d == best).count() == 1 {
            assert_eq!(repo.shas[choice], git_choice, "{name} round {round}");
            compared_unique += 1;
        } else {
            // git's own choice has the best distance too.
            assert!(all.iter().any(|(s, d)| *s == git_choice && *d == best));
        }
    }
    assert!(
        compared_unique > 0 || name.starts_with("linear"),
        "{name}: no unique best compared"
    );
}

#[test]
fn linear_history_matches_git() {
    for (k, n) in [1usize, 2, 3, 10, 301].into_iter().enumerate() {
        check(
            &format!("linear{n}"),
            synth::parents(Shape::linear(n), k as u64),
            k as u64,
        );
    }
}

#[test]
fn merge_history_matches_git() {
    for seed in 0..4 {
        check(
            &format!("merges{seed}"),
            synth::parents(Shape::merges(300 + 50 * seed as usize), seed),
            seed,
        );
    }
}
