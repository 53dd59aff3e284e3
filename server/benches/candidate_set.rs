//! Speed where the server pays (issue 3): on a generated repository of 100,000 commits with
//! merges, the time to build a bisect's candidate set (`git::range`: `git rev-list` and
//! `git cat-file`) beside `git rev-list --bisect-all` on the same range, and the time for the
//! engine to choose the next 8 points after each result.
//!
//! `cargo bench -p perfbisect-server --bench candidate_set [-- COMMITS]`

use perfbisect_engine::{CandidateGraph, Decision, Evidence, Point, Settings, decide};
use perfbisect_server::git;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Writes a history of `n` commits with merges through `git fast-import` (seconds, not minutes).
/// Every 10th step forks a 3-commit topic branch off the mainline and merges it back.
fn generate(dir: &Path, n: usize) {
    let run = |args: &[&str]| {
        let ok = Command::new("git")
            .args(args)
            .current_dir(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    run(&["init", "-q", "--bare"]);
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut w = std::io::BufWriter::new(child.stdin.take().unwrap());
    let mut mark = 0usize;
    let mut made = 0usize;
    let mut t = 1_600_000_000u64;
    let mut commit = |w: &mut dyn Write, branch: &str, parents: &[usize], msg: &str| -> usize {
        mark += 1;
        t += 1;
        writeln!(w, "commit refs/heads/{branch}\nmark :{mark}").unwrap();
        writeln!(
            w,
            "committer B <b@example.invalid> {t} +0000\ndata {}\n{msg}",
            msg.len()
        )
        .unwrap();
        for (i, p) in parents.iter().enumerate() {
            writeln!(w, "{} :{p}", if i == 0 { "from" } else { "merge" }).unwrap();
        }
        writeln!(w, "M 644 inline f\ndata {}\n{msg}\n", msg.len()).unwrap();
        mark
    };
    let mut main_head = commit(&mut w, "main", &[], "root");
    while made < n {
        if made % 10 == 9 && made + 4 <= n {
            let mut topic = main_head;
            for k in 0..3 {
                topic = commit(&mut w, "topic", &[topic], &format!("topic {made} {k}"));
            }
            main_head = commit(
                &mut w,
                "main",
                &[main_head, topic],
                &format!("merge {made}"),
            );
            made += 4;
        } else {
            main_head = commit(&mut w, "main", &[main_head], &format!("c {made}"));
            made += 1;
        }
    }
    writeln!(w, "reset refs/tags/good\nfrom :1\n").unwrap();
    writeln!(w, "reset refs/tags/bad\nfrom :{main_head}\n").unwrap();
    drop(w);
    assert!(child.wait().unwrap().success());
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let tmp = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    generate(tmp.path(), n);
    println!(
        "generated {n} commits (with merges) in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let repo = git2::Repository::open_bare(tmp.path()).unwrap();

    if std::env::var_os("PROFILE_WALK").is_some() {
        let good = repo
            .revparse_single("good")
            .unwrap()
            .peel_to_commit()
            .unwrap()
            .id();
        let bad = repo
            .revparse_single("bad")
            .unwrap()
            .peel_to_commit()
            .unwrap()
            .id();
        for sort in [
            git2::Sort::NONE,
            git2::Sort::TOPOLOGICAL,
            git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE,
        ] {
            let t = Instant::now();
            let mut w = repo.revwalk().unwrap();
            w.set_sorting(sort).unwrap();
            w.push(bad).unwrap();
            w.hide(good).unwrap();
            let v: Vec<_> = w.collect();
            println!(
                "walk {sort:?}: {} in {:.1} ms",
                v.len(),
                t.elapsed().as_secs_f64() * 1e3
            );
        }
        let t = Instant::now();
        let mut w = repo.revwalk().unwrap();
        w.push(bad).unwrap();
        w.hide(good).unwrap();
        let mut k = 0;
        for o in w {
            let c = repo.find_commit(o.unwrap()).unwrap();
            k += c.parent_count();
        }
        println!(
            "walk + find_commit: {k} in {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
        let t = Instant::now();
        Command::new("git")
            .args(["rev-list", "--topo-order", "bad", "^good"])
            .current_dir(tmp.path())
            .output()
            .unwrap();
        println!(
            "git rev-list --topo-order: {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
        let t = Instant::now();
        Command::new("git")
            .args(["rev-list", "--bisect", "bad", "^good"])
            .current_dir(tmp.path())
            .output()
            .unwrap();
        println!(
            "git rev-list --bisect: {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
        return;
    }
    let reps = 5;
    let mut ours = Vec::new();
    let mut range = None;
    for _ in 0..reps {
        let t = Instant::now();
        range = Some(git::range(&repo, "good", "bad", false).unwrap());
        ours.push(t.elapsed());
    }
    let range = range.unwrap();
    let mut theirs = Vec::new();
    let mut git_count = 0;
    for _ in 0..reps {
        let t = Instant::now();
        let out = Command::new("git")
            .args(["rev-list", "--bisect-all", "bad", "^good"])
            .current_dir(tmp.path())
            .output()
            .unwrap();
        theirs.push(t.elapsed());
        git_count = out
            .stdout
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
    }
    assert_eq!(
        git_count,
        range.candidates.len(),
        "git::range and git rev-list disagree on the candidate set"
    );
    let (o, g) = (median(ours), median(theirs));
    println!(
        "candidate set ({} commits): git::range {:.1} ms, git rev-list --bisect-all {:.1} ms, ratio {:.2}",
        range.candidates.len(),
        o.as_secs_f64() * 1e3,
        g.as_secs_f64() * 1e3,
        o.as_secs_f64() / g.as_secs_f64()
    );

    let ids = range.candidates.iter().map(|c| c.sha.clone()).collect();
    let parents = range.candidates.iter().map(|c| c.parents.clone()).collect();
    let graph = CandidateGraph::new(ids, parents).unwrap();
    let settings = Settings {
        idle_hosts: 8,
        ..Settings::default()
    };
    // A step change at 60% of the range, 3% up, with 1% noise; results arrive one request at a time.
    let step = graph.len() * 6 / 10;
    let mut evidence = Evidence::default();
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut noise = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        ((seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 0.02
    };
    let mut times = Vec::new();
    // has_change[i]: the step commit is an ancestor-or-self of i (parents come first).
    let mut has_change = vec![false; graph.len()];
    for i in 0..graph.len() {
        has_change[i] = i == step || graph.parents(i).iter().any(|&p| has_change[p]);
    }
    let level = |p: Point| match p {
        Point::Good => 100.0,
        Point::Candidate(i) if has_change[i] => 103.0,
        Point::Candidate(_) => 100.0,
    };
    for _ in 0..40 {
        let t = Instant::now();
        let (decision, _) = decide(&graph, &evidence, &settings);
        times.push(t.elapsed());
        let Decision::Measure { requests, .. } = decision else {
            break;
        };
        for r in requests {
            for p in std::iter::once(r.point).chain(r.pair_with) {
                for _ in 0..r.runs {
                    let v = level(p) * (1.0 + noise());
                    evidence.samples.entry(p).or_default().push(v);
                }
            }
        }
    }
    let worst = times.iter().max().copied().unwrap_or_default();
    println!(
        "next points (W = 8) over {} decisions: median {:.1} ms, worst {:.1} ms",
        times.len(),
        median(times.clone()).as_secs_f64() * 1e3,
        worst.as_secs_f64() * 1e3
    );
}
