//! A generated example repository: a small C benchmark with a history of commits and
//! merges, and one planted commit that moves its score.
//!
//! The benchmark does real work and reports `score:` with noise drawn like real timings
//! (Gaussian with a given CV, plus rare slow outliers), seeded from /dev/urandom at every
//! run, so repeated runs of one commit differ as they do on a real host.

use git2::{Oid, Repository, Signature, Time};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct ExampleOptions {
    /// Commits in the range (merges included); at least 20.
    pub commits: usize,
    /// Relative change planted at one commit (0.06 = +6%).
    pub change: f64,
    /// Noise of the score, as a coefficient of variation.
    pub noise_cv: f64,
    /// Seed for the history's shape and where the change is planted.
    pub seed: u64,
    /// Make this many commits (other than the planted one and the endpoints) fail to build.
    pub broken_commits: usize,
}

impl Default for ExampleOptions {
    fn default() -> Self {
        Self {
            commits: 240,
            change: 0.06,
            noise_cv: 0.03,
            seed: 1,
            broken_commits: 0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ExampleRepo {
    pub path: PathBuf,
    /// Tag `good`: the first commit.
    pub good: String,
    /// Tag `bad`: the last commit.
    pub bad: String,
    pub planted: String,
    pub merges: usize,
    pub commits: usize,
    pub broken: Vec<String>,
}

/// The job spec that builds and runs the example benchmark.
pub const JOB_YAML: &str = "\
testcase: demo
tbox_group: local
params:
  work: 200000
build:
  command: cc -O2 -o bench bench.c -lm
run:
  command: ./bench
  format: key_value
runs_per_task: 5
timeouts:
  build_secs: 120
  run_secs: 60
";

/// The planted commit's trailers, as a kernel patch carries them: a report can copy the
/// addresses (`--mail-trailers`), as a reply to the patch would.
pub const PLANTED_TRAILERS: &str = "Signed-off-by: Example Developer <dev@example.invalid>\n\
                                    Cc: Example Maintainer <maintainer@example.invalid>\n";

/// The metric the example's change moves.
pub const METRIC: &str = "demo.score";

pub(crate) const BENCH_C: &str = r#"/* The example benchmark: real work, a score with run-to-run noise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "params.h"

static double uniform(unsigned long long *s) {
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return ((*s >> 11) + 0.5) / 9007199254740992.0;
}

int main(void) {
    unsigned long long seed = 0;
    FILE *r = fopen("/dev/urandom", "rb");
    if (!r || fread(&seed, sizeof seed, 1, r) != 1) return 2;
    fclose(r);
    seed |= 1;
    const char *w = getenv("PERFBISECT_PARAM_WORK");
    long work = w ? atol(w) : 100000;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    volatile double acc = 0;
    for (long i = 0; i < work; i++) acc += (double)(i % 7) * 0.5;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double u1 = uniform(&seed), u2 = uniform(&seed);
    double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    double score = SCORE_BASE * (1.0 + NOISE_CV * z);
    if (uniform(&seed) < 0.02) score *= 0.85; /* a slow run now and then */
    printf("score: %.3f\n", score);
    printf("elapsed_ms: %.3f\n", (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    printf("work: %ld\n", work);
    return 0;
}
"#;

pub(crate) fn params_h(score: f64, cv: f64) -> String {
    format!("#define SCORE_BASE {score:.3}\n#define NOISE_CV {cv}\n")
}

pub(crate) struct Builder<'r> {
    pub(crate) repo: &'r Repository,
    pub(crate) clock: i64,
}

impl Builder<'_> {
    pub(crate) fn commit(
        &mut self,
        files: &BTreeMap<String, String>,
        parents: &[Oid],
        message: &str,
    ) -> anyhow::Result<Oid> {
        let mut tb = self.repo.treebuilder(None)?;
        let mut dirs: BTreeMap<String, git2::TreeBuilder> = BTreeMap::new();
        for (path, content) in files {
            let blob = self.repo.blob(content.as_bytes())?;
            match path.split_once('/') {
                Some((dir, name)) => {
                    if !dirs.contains_key(dir) {
                        dirs.insert(dir.to_string(), self.repo.treebuilder(None)?);
                    }
                    dirs.get_mut(dir)
                        .expect("inserted")
                        .insert(name, blob, 0o100644)?;
                }
                None => {
                    tb.insert(path, blob, 0o100644)?;
                }
            }
        }
        for (dir, b) in dirs {
            let oid = b.write()?;
            tb.insert(&dir, oid, 0o040000)?;
        }
        let tree = self.repo.find_tree(tb.write()?)?;
        self.clock += 60;
        let who = Signature::new(
            "Example Developer",
            "dev@example.invalid",
            &Time::new(self.clock, 0),
        )?;
        let parents: Vec<git2::Commit> = parents
            .iter()
            .map(|p| self.repo.find_commit(*p))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&git2::Commit> = parents.iter().collect();
        Ok(self.repo.commit(None, &who, &who, message, &tree, &refs)?)
    }
}

/// Generates the example repository (bare) at `path`, replacing what is there.
pub fn generate(path: &Path, opts: &ExampleOptions) -> anyhow::Result<ExampleRepo> {
    anyhow::ensure!(opts.commits >= 20, "an example needs at least 20 commits");
    if path.exists() {
        std::fs::remove_dir_all(path)?;
    }
    let repo = Repository::init_bare(path)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(opts.seed);
    let mut b = Builder {
        repo: &repo,
        clock: 1_700_000_000,
    };
    let base_score = 1000.0;
    let mut main_files: BTreeMap<String, String> = BTreeMap::new();
    main_files.insert("bench.c".into(), BENCH_C.into());
    main_files.insert("params.h".into(), params_h(base_score, opts.noise_cv));
    main_files.insert("CHANGES".into(), "start\n".into());
    let good = b.commit(&main_files, &[], "demo: initial benchmark")?;
    let mut head = good;
    // Commits after the first, in creation order; the planted one is picked among them.
    let total = opts.commits; // candidates = commits reachable from bad and not from good
    let planted_at = rng.random_range(total / 5..total * 4 / 5);
    let mut made = 0usize;
    let mut merges = 0usize;
    let mut planted = None;
    let mut broken = Vec::new();
    let mut broken_left = opts.broken_commits;
    let mut topic_no = 0;
    // Each step either adds a mainline commit or grows a topic branch and merges it.
    while made < total {
        let left = total - made;
        if left >= 4 && rng.random_bool(0.15) {
            topic_no += 1;
            let fork = head;
            let fork_files = main_files.clone();
            let mut topic_files = main_files.clone();
            let mut topic_head = fork;
            let topic_len = rng.random_range(1..=(left - 2).min(6));
            let mut topic_changed: BTreeMap<String, String> = BTreeMap::new();
            for k in 0..topic_len {
                let path = format!("topics/topic{topic_no}.txt");
                let content = format!(
                    "{}step {k}\n",
                    topic_files.get(&path).cloned().unwrap_or_default()
                );
                topic_files.insert(path.clone(), content.clone());
                topic_changed.insert(path, content);
                let plant = planted.is_none() && made >= planted_at;
                let msg = if plant {
                    let p = params_h(base_score * (1.0 + opts.change), opts.noise_cv);
                    topic_files.insert("params.h".into(), p.clone());
                    topic_changed.insert("params.h".into(), p);
                    format!("topic{topic_no}: rework the hot loop ({k})\n\n{PLANTED_TRAILERS}")
                } else {
                    format!("topic{topic_no}: step {k}")
                };
                topic_head = b.commit(&topic_files, &[topic_head], &msg)?;
                if plant {
                    planted = Some(topic_head);
                }
                made += 1;
            }
            // Mainline moves on meanwhile (sometimes), then the topic is merged.
            if rng.random_bool(0.5) && made + 2 <= total {
                let c = format!("{}main while topic{topic_no}\n", main_files["CHANGES"]);
                main_files.insert("CHANGES".into(), c);
                head = b.commit(
                    &main_files,
                    &[head],
                    &format!("main: housekeeping during topic{topic_no}"),
                )?;
                made += 1;
            }
            let _ = fork_files;
            for (p, c) in topic_changed {
                main_files.insert(p, c);
            }
            head = b.commit(
                &main_files,
                &[head, topic_head],
                &format!("Merge branch 'topic{topic_no}'"),
            )?;
            merges += 1;
            made += 1;
        } else {
            let plant = planted.is_none() && made >= planted_at;
            let break_it =
                !plant && broken_left > 0 && made > 2 && left > 2 && rng.random_bool(0.3);
            let c = format!("{}change {made}\n", main_files["CHANGES"]);
            main_files.insert("CHANGES".into(), c);
            let msg = if plant {
                main_files.insert(
                    "params.h".into(),
                    params_h(base_score * (1.0 + opts.change), opts.noise_cv),
                );
                format!("demo: make the scoring loop do more work\n\n{PLANTED_TRAILERS}")
            } else if break_it {
                // A commit that does not compile; the next one fixes it.
                main_files.insert(
                    "bench.c".into(),
                    format!("{BENCH_C}\n#error broken on purpose\n"),
                );
                format!("demo: half-done refactor {made}")
            } else {
                format!("demo: change {made}")
            };
            head = b.commit(&main_files, &[head], &msg)?;
            if plant {
                planted = Some(head);
            }
            if break_it {
                broken.push(head.to_string());
                broken_left -= 1;
                main_files.insert("bench.c".into(), BENCH_C.into());
            }
            made += 1;
        }
    }
    let planted = planted.ok_or_else(|| anyhow::anyhow!("the change was not planted"))?;
    repo.reference("refs/heads/main", head, true, "example head")?;
    repo.reference("refs/tags/good", good, true, "good endpoint")?;
    repo.reference("refs/tags/bad", head, true, "bad endpoint")?;
    repo.set_head("refs/heads/main")?;
    Ok(ExampleRepo {
        path: path.to_path_buf(),
        good: good.to_string(),
        bad: head.to_string(),
        planted: planted.to_string(),
        merges,
        commits: made,
        broken,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_the_history_it_describes() {
        let dir = tempfile::tempdir().unwrap();
        let ex = generate(
            &dir.path().join("ex.git"),
            &ExampleOptions {
                commits: 200,
                ..Default::default()
            },
        )
        .unwrap();
        let repo = Repository::open_bare(&ex.path).unwrap();
        let mut walk = repo.revwalk().unwrap();
        walk.push(Oid::from_str(&ex.bad).unwrap()).unwrap();
        walk.hide(Oid::from_str(&ex.good).unwrap()).unwrap();
        let shas: Vec<Oid> = walk.map(|o| o.unwrap()).collect();
        assert_eq!(shas.len(), ex.commits);
        assert!(ex.commits >= 200);
        let merges = shas
            .iter()
            .filter(|o| repo.find_commit(**o).unwrap().parent_count() > 1)
            .count();
        assert_eq!(merges, ex.merges);
        assert!(merges >= 5, "only {merges} merges");
        // The planted commit changes params.h and its parent does not have the change.
        let planted = repo
            .find_commit(Oid::from_str(&ex.planted).unwrap())
            .unwrap();
        let read = |c: &git2::Commit| {
            let entry = c
                .tree()
                .unwrap()
                .get_name("params.h")
                .unwrap()
                .to_object(&repo)
                .unwrap();
            String::from_utf8(entry.as_blob().unwrap().content().to_vec()).unwrap()
        };
        assert_ne!(read(&planted), read(&planted.parent(0).unwrap()));
        assert_eq!(
            read(&repo.find_commit(Oid::from_str(&ex.bad).unwrap()).unwrap()),
            read(&planted)
        );
    }
}
