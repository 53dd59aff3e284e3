//! Synthetic commit histories for tests, the simulator and the benchmark.
//!
//! Deterministic from a seed (a small splitmix64 generator, so the library needs no
//! random-number crate). The shape is kernel-like: a mainline whose merges bring in topic
//! branches forked from recent mainline commits; a few topic branches fork from before the
//! good commit (their root's parent is outside the candidate set) and a few merge mainline
//! back in before they are merged.

use crate::CandidateGraph;

/// splitmix64: tiny, fast, good enough for shaping histories.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.uniform() * n as f64) as usize % n
    }
}

/// The shape of a synthetic history.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Number of candidate commits, bad included.
    pub commits: usize,
    /// Probability that the next mainline step is a merge of a topic branch (0 = linear).
    pub merge_rate: f64,
    /// Mean length of a topic branch.
    pub branch_len: f64,
}

impl Shape {
    pub fn linear(commits: usize) -> Self {
        Self {
            commits,
            merge_rate: 0.0,
            branch_len: 0.0,
        }
    }

    /// About a tenth of the commits are merges, topic branches about 6 commits long.
    pub fn merges(commits: usize) -> Self {
        Self {
            commits,
            merge_rate: 0.5,
            branch_len: 6.0,
        }
    }
}

/// Parent lists in topological order (parents first), the last commit being the tip.
pub fn parents(shape: Shape, seed: u64) -> Vec<Vec<usize>> {
    let mut rng = SplitMix::new(seed);
    let n = shape.commits.max(1);
    let mut parents: Vec<Vec<usize>> = Vec::with_capacity(n);
    let mut mainline: Vec<usize> = Vec::new();
    while parents.len() < n {
        let left = n - parents.len();
        let tip = mainline.last().copied();
        if left >= 3 && tip.is_some() && rng.uniform() < shape.merge_rate {
            // A topic branch of `len` commits, then its merge into mainline.
            let len = (1 + (rng.uniform() * 2.0 * shape.branch_len) as usize).min(left - 1);
            let fork = if rng.uniform() < 0.05 {
                None // forked from before the good commit
            } else {
                let back = rng.below(mainline.len().min(40));
                Some(mainline[mainline.len() - 1 - back])
            };
            let mut head = fork;
            for k in 0..len {
                let mut ps: Vec<usize> = head.into_iter().collect();
                // Now and then the topic branch merges mainline back in.
                if k > 0 && rng.uniform() < 0.05 {
                    let m = mainline[mainline.len() - 1 - rng.below(mainline.len().min(10))];
                    if Some(m) != head {
                        ps.push(m);
                    }
                }
                parents.push(ps);
                head = Some(parents.len() - 1);
            }
            let tip = mainline.last().copied().expect("mainline has a tip");
            parents.push(vec![tip, head.expect("branch has commits")]);
        } else {
            parents.push(tip.into_iter().collect());
        }
        mainline.push(parents.len() - 1);
    }
    parents
}

/// A [`CandidateGraph`] of the given shape, commits named `c0`, `c1`, ...
pub fn graph(shape: Shape, seed: u64) -> CandidateGraph {
    let ps = parents(shape, seed);
    let ids = (0..ps.len()).map(|i| format!("c{i}")).collect();
    CandidateGraph::new(ids, ps).expect("synthetic histories are topological")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_valid_and_deterministic() {
        for seed in 0..20 {
            let g = graph(Shape::merges(500), seed);
            assert_eq!(g.len(), 500);
            let merges = (0..g.len()).filter(|&i| g.parents(i).len() > 1).count();
            assert!(merges > 10, "seed {seed}: {merges} merges");
            // Every commit is an ancestor of the tip.
            assert!(g.ancestors(&[g.bad()]).iter().all(|&a| a));
            assert_eq!(
                parents(Shape::merges(500), seed),
                parents(Shape::merges(500), seed)
            );
        }
        let l = graph(Shape::linear(50), 1);
        assert!((1..50).all(|i| l.parents(i) == [i - 1]));
    }
}
