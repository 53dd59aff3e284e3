//! The candidate set as a DAG: commits reachable from bad and not from good.

/// Candidate commits of one bisect. Index `i` names `ids[i]`.
///
/// Invariant: `parents[i]` lists only indices of other candidates (parents on the good
/// side are left out), every parent index is smaller than its child's index
/// (topological order, oldest first), and `bad` is the last index.
#[derive(Debug, Clone)]
pub struct CandidateGraph {
    ids: Vec<String>,
    parents: Vec<Vec<usize>>,
    /// [`CandidateGraph::weights`]' plan for the whole set, computed on first use.
    full_plan: std::sync::OnceLock<AncestryPlan>,
    /// Commits whose first parent is outside the set although another parent is inside.
    first_parent_outside: Vec<bool>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GraphError {
    #[error("the candidate set is empty")]
    Empty,
    #[error("commit {child} names parent {parent}, which is not an earlier candidate")]
    NotTopological { child: usize, parent: usize },
    #[error("ids and parents differ in length ({ids} ids, {parents} parent lists)")]
    LengthMismatch { ids: usize, parents: usize },
}

impl CandidateGraph {
    /// Builds the graph; `ids` in topological order (parents first), the bad commit last.
    pub fn new(ids: Vec<String>, parents: Vec<Vec<usize>>) -> Result<Self, GraphError> {
        if ids.is_empty() {
            return Err(GraphError::Empty);
        }
        if ids.len() != parents.len() {
            return Err(GraphError::LengthMismatch {
                ids: ids.len(),
                parents: parents.len(),
            });
        }
        for (child, ps) in parents.iter().enumerate() {
            if let Some(&parent) = ps.iter().find(|&&p| p >= child) {
                return Err(GraphError::NotTopological { child, parent });
            }
        }
        let first_parent_outside = vec![false; ids.len()];
        Ok(Self {
            ids,
            parents,
            full_plan: std::sync::OnceLock::new(),
            first_parent_outside,
        })
    }

    /// Records that commit `i`'s first parent is outside the candidate set (on the good
    /// side) while some other parent is inside, so `parents(i)[0]` is not its first parent.
    /// Only first-parent mode and verification care.
    pub fn mark_first_parent_outside(&mut self, i: usize) {
        self.first_parent_outside[i] = true;
    }

    /// Commit `i`'s first parent, when it is a candidate.
    pub fn first_parent(&self, i: usize) -> Option<usize> {
        if self.first_parent_outside[i] {
            None
        } else {
            self.parents[i].first().copied()
        }
    }

    /// The bad commit's first-parent chain inside the set, as a mask.
    pub fn first_parent_chain(&self) -> Vec<bool> {
        let mut on = vec![false; self.len()];
        let mut c = Some(self.bad());
        while let Some(x) = c {
            on[x] = true;
            c = self.first_parent(x);
        }
        on
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Index of the bad endpoint (the newest candidate).
    pub fn bad(&self) -> usize {
        self.ids.len() - 1
    }

    pub fn id(&self, i: usize) -> &str {
        &self.ids[i]
    }

    pub fn parents(&self, i: usize) -> &[usize] {
        &self.parents[i]
    }

    /// Ancestors-or-self of `roots` (a mask over candidates).
    pub fn ancestors(&self, roots: &[usize]) -> Vec<bool> {
        let mut mark = vec![false; self.len()];
        let Some(&top) = roots.iter().max() else {
            return mark;
        };
        for &r in roots {
            mark[r] = true;
        }
        // Parents come before children, so one sweep downwards closes the set.
        for i in (0..=top).rev() {
            if mark[i] {
                for &p in &self.parents[i] {
                    mark[p] = true;
                }
            }
        }
        mark
    }

    /// git's remaining candidate set: ancestors-or-self of every known-bad commit (of the
    /// lowest ones, which is the same) minus ancestors-or-self of any known-good commit.
    /// With no known-bad commit the bad endpoint is used.
    pub fn remaining(&self, good: &[usize], bad: &[usize]) -> Vec<bool> {
        let endpoint = [self.bad()];
        let bad = if bad.is_empty() { &endpoint[..] } else { bad };
        let mut set = self.ancestors(&bad[..1]);
        for &b in &bad[1..] {
            let other = self.ancestors(&[b]);
            for (s, o) in set.iter_mut().zip(other) {
                *s &= o;
            }
        }
        let below_good = self.ancestors(good);
        for (s, g) in set.iter_mut().zip(below_good) {
            *s &= !g;
        }
        set
    }

    /// For every candidate `c` in `set`, the total `mass` of `set ∩ ancestors-or-self(c)`
    /// (git's bisect "weight" when every mass is 1); 0 outside `set`.
    ///
    /// `set` must be closed the way [`CandidateGraph::remaining`] makes it: a parent outside
    /// `set` of a commit inside it has no ancestor inside it.
    ///
    /// Exact, and about linear on real histories. One parent inside the set per commit makes
    /// a spanning forest; a commit's ancestry is its forest path plus, for each merge on
    /// that path, the commits that merge brought in ("new" to it). Merges are handled oldest
    /// first, so when merge `c` walks down its other parents it can test in O(1)-ish whether
    /// a commit is already an ancestor of its first parent (on the forest path, or new to a
    /// merge on that path) and stop there. The cost is the number of (commit, merge that
    /// brought it in) pairs, about N when topic branches are merged once.
    pub fn weights(&self, set: &[bool], mass: &[f64]) -> Vec<f64> {
        if set.iter().all(|&s| s) {
            return self.full_plan.get_or_init(|| self.plan(set)).apply(mass);
        }
        self.plan(set).apply(mass)
    }

    /// [`CandidateGraph::weights`] over the whole candidate set: for every candidate, the
    /// total `mass` of its ancestors-or-self. Reuses a plan cached in the graph.
    pub fn ancestor_mass(&self, mass: &[f64]) -> Vec<f64> {
        self.full_plan
            .get_or_init(|| self.plan(&vec![true; self.len()]))
            .apply(mass)
    }

    /// The mass-independent part of [`CandidateGraph::weights`]: the spanning forest and,
    /// for every merge, the commits it brings in. Cached for the whole candidate set.
    fn plan(&self, set: &[bool]) -> AncestryPlan {
        let n = self.len();
        let nil = u32::MAX;
        // Spanning forest: the parent inside the set with the longest history below it (the
        // first such parent on ties), so a topic branch that merged mainline in, or a branch
        // forked before the good commit, does not make mainline look new at every merge.
        let mut generation = vec![0u32; n];
        let tree_parent: Vec<u32> = (0..n)
            .map(|c| {
                if !set[c] {
                    return nil;
                }
                let mut best: Option<usize> = None;
                for &p in &self.parents[c] {
                    if set[p] && best.is_none_or(|b| generation[p] > generation[b]) {
                        best = Some(p);
                    }
                }
                generation[c] = best.map_or(0, |b| generation[b] + 1);
                best.map_or(nil, |b| b as u32)
            })
            .collect();
        let (tin, tout) = euler_tour(&tree_parent, set);
        let on_path = |x: usize, y: usize| tin[x] <= tin[y] && tout[y] <= tout[x];
        // homes: for each commit, the merges it was new to (a linked list in an arena).
        let mut head = vec![nil; n];
        let mut arena: Vec<(u32, u32)> = Vec::new();
        let mut new_start = vec![0u32; n + 1];
        let mut new_nodes: Vec<u32> = Vec::new();
        let mut stamp = vec![0u32; n];
        let mut round = 0u32;
        let mut stack = Vec::new();
        for c in 0..n {
            new_start[c] = new_nodes.len() as u32;
            let tp = tree_parent[c];
            if !set[c] || tp == nil || self.parents[c].len() < 2 {
                continue;
            }
            let tp = tp as usize;
            // Commits below the other parents that are not ancestors of `tp` are new to `c`.
            let below_tp = |x: usize, head: &[u32], arena: &[(u32, u32)]| {
                if on_path(x, tp) {
                    return true;
                }
                let mut h = head[x];
                while h != nil {
                    let (merge, next) = arena[h as usize];
                    if on_path(merge as usize, tp) {
                        return true;
                    }
                    h = next;
                }
                false
            };
            round += 1;
            for &p in &self.parents[c] {
                if p != tp && set[p] && stamp[p] != round {
                    stamp[p] = round;
                    stack.push(p);
                }
            }
            while let Some(x) = stack.pop() {
                if below_tp(x, &head, &arena) {
                    continue;
                }
                new_nodes.push(x as u32);
                arena.push((c as u32, head[x]));
                head[x] = (arena.len() - 1) as u32;
                for &p in &self.parents[x] {
                    if set[p] && stamp[p] != round {
                        stamp[p] = round;
                        stack.push(p);
                    }
                }
            }
        }
        new_start[n] = new_nodes.len() as u32;
        let in_set = set.to_vec();
        AncestryPlan {
            tree_parent,
            new_start,
            new_nodes,
            in_set,
        }
    }

    /// git's bisection point of `set`: the commit maximising min(w, n − w), where w counts
    /// the commits of `set` that are its ancestors-or-self. Commits with `skip[c]` are never
    /// chosen. Returns the commit and its distance min(w, n − w); None when no commit of
    /// `set` may be chosen.
    pub fn best_split(&self, set: &[bool], skip: &[bool]) -> Option<(usize, usize)> {
        let ones: Vec<f64> = set.iter().map(|&s| if s { 1.0 } else { 0.0 }).collect();
        let total = set.iter().filter(|&&s| s).count();
        let w = self.weights(set, &ones);
        (0..self.len())
            .filter(|&c| set[c] && !skip[c])
            .map(|c| {
                let w = w[c] as usize;
                (c, w.min(total - w))
            })
            .max_by_key(|&(c, d)| (d, std::cmp::Reverse(c)))
    }
}

/// How to sum masses over ancestors: w(c) = w(tree parent) + m(c) + the masses of the
/// commits merge c brings in.
#[derive(Debug, Clone)]
struct AncestryPlan {
    tree_parent: Vec<u32>,
    new_start: Vec<u32>,
    new_nodes: Vec<u32>,
    in_set: Vec<bool>,
}

impl AncestryPlan {
    fn apply(&self, mass: &[f64]) -> Vec<f64> {
        let n = self.tree_parent.len();
        let mut w = vec![0.0; n];
        for c in 0..n {
            if !self.in_set[c] {
                continue;
            }
            let tp = self.tree_parent[c];
            let mut x = mass[c] + if tp == u32::MAX { 0.0 } else { w[tp as usize] };
            let (a, b) = (self.new_start[c] as usize, self.new_start[c + 1] as usize);
            for &k in &self.new_nodes[a..b] {
                x += mass[k as usize];
            }
            w[c] = x;
        }
        w
    }
}

/// Entry and exit times of a DFS over the forest given by `tree_parent` (restricted to `set`):
/// x is an ancestor-or-self of y in the forest iff tin[x] ≤ tin[y] and tout[y] ≤ tout[x].
fn euler_tour(tree_parent: &[u32], set: &[bool]) -> (Vec<u32>, Vec<u32>) {
    let n = tree_parent.len();
    // Children in a compressed adjacency (counting sort by tree parent).
    let mut start = vec![0u32; n + 1];
    for &tp in tree_parent {
        if tp != u32::MAX {
            start[tp as usize + 1] += 1;
        }
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut child = vec![0u32; start[n] as usize];
    for (c, &tp) in tree_parent.iter().enumerate() {
        if tp != u32::MAX {
            child[fill[tp as usize] as usize] = c as u32;
            fill[tp as usize] += 1;
        }
    }
    let mut tin = vec![0u32; n];
    let mut tout = vec![0u32; n];
    let mut clock = 0u32;
    let mut stack: Vec<(u32, u32)> = Vec::new();
    for root in 0..n {
        if !set[root] || tree_parent[root] != u32::MAX {
            continue;
        }
        tin[root] = clock;
        clock += 1;
        stack.push((root as u32, start[root]));
        while let Some(&mut (x, ref mut next)) = stack.last_mut() {
            if *next < start[x as usize + 1] {
                let y = child[*next as usize];
                *next += 1;
                tin[y as usize] = clock;
                clock += 1;
                stack.push((y, start[y as usize]));
            } else {
                tout[x as usize] = clock;
                clock += 1;
                stack.pop();
            }
        }
    }
    (tin, tout)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(parents: Vec<Vec<usize>>) -> CandidateGraph {
        let ids = (0..parents.len()).map(|i| format!("c{i}")).collect();
        CandidateGraph::new(ids, parents).unwrap()
    }

    fn linear(n: usize) -> CandidateGraph {
        graph(
            (0..n)
                .map(|i| if i == 0 { vec![] } else { vec![i - 1] })
                .collect(),
        )
    }

    #[test]
    fn rejects_bad_graphs() {
        assert_eq!(
            CandidateGraph::new(vec![], vec![]).unwrap_err(),
            GraphError::Empty
        );
        let e = CandidateGraph::new(vec!["a".into(), "b".into()], vec![vec![1], vec![]]);
        assert_eq!(
            e.unwrap_err(),
            GraphError::NotTopological {
                child: 0,
                parent: 1
            }
        );
    }

    #[test]
    fn linear_halves() {
        let g = linear(10);
        let all = vec![true; 10];
        let (c, d) = g.best_split(&all, &[false; 10]).unwrap();
        assert_eq!((c, d), (4, 5));
        let rest = g.remaining(&[4], &[]);
        assert_eq!(rest.iter().filter(|&&s| s).count(), 5);
        assert!(!rest[4] && rest[5] && rest[9]);
        let rest = g.remaining(&[4], &[7]);
        assert_eq!(
            rest,
            (0..10).map(|i| (5..=7).contains(&i)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn merge_weights_count_shared_ancestors_once() {
        //   0 - 1 - 2 ------ 5 - 6
        //        \          /
        //         3 ---- 4
        let g = graph(vec![
            vec![],
            vec![0],
            vec![1],
            vec![1],
            vec![3],
            vec![2, 4],
            vec![5],
        ]);
        let all = vec![true; 7];
        let w = g.weights(&all, &[1.0; 7]);
        assert_eq!(w, vec![1.0, 2.0, 3.0, 3.0, 4.0, 6.0, 7.0]);
        // Known bad 4: only 0, 1, 3, 4 remain; good 3 leaves 4 alone.
        let rest = g.remaining(&[], &[4]);
        assert_eq!(rest, vec![true, true, false, true, true, false, false]);
        let rest = g.remaining(&[3], &[4]);
        assert_eq!(rest.iter().filter(|&&s| s).count(), 1);
        // Two bad commits on different branches: the culprit is below both.
        let rest = g.remaining(&[], &[2, 4]);
        assert_eq!(rest, vec![true, true, false, false, false, false, false]);
    }

    /// Ancestor masses by brute force: one walk per commit.
    fn weights_naive(g: &CandidateGraph, set: &[bool], mass: &[f64]) -> Vec<f64> {
        (0..g.len())
            .map(|c| {
                if !set[c] {
                    return 0.0;
                }
                let a = g.ancestors(&[c]);
                (0..g.len())
                    .filter(|&x| a[x] && set[x])
                    .map(|x| mass[x])
                    .sum()
            })
            .collect()
    }

    #[test]
    fn weights_match_brute_force_on_random_histories() {
        use crate::synth::{self, Shape, SplitMix};
        for seed in 0..30 {
            let shape = Shape {
                commits: 200,
                merge_rate: 0.3 + 0.02 * seed as f64,
                branch_len: 1.0 + seed as f64 / 3.0,
            };
            let g = synth::graph(shape, seed);
            let mut rng = SplitMix::new(seed);
            let mass: Vec<f64> = (0..g.len()).map(|_| (rng.below(5)) as f64).collect();
            let goods: Vec<usize> = (0..rng.below(3)).map(|_| rng.below(150)).collect();
            let bads: Vec<usize> = (0..rng.below(3)).map(|_| 100 + rng.below(100)).collect();
            let set = g.remaining(&goods, &bads);
            assert_eq!(
                g.weights(&set, &mass),
                weights_naive(&g, &set, &mass),
                "seed {seed}"
            );
        }
        // Criss-cross merges and an octopus.
        let g = graph(vec![
            vec![],
            vec![0],
            vec![0],
            vec![1, 2],
            vec![2, 1],
            vec![3, 4],
            vec![5, 1, 2],
            vec![0, 6],
        ]);
        let set = vec![true; 8];
        let mass: Vec<f64> = (0..8).map(|i| (1 << i) as f64).collect();
        assert_eq!(g.weights(&set, &mass), weights_naive(&g, &set, &mass));
    }

    #[test]
    fn skip_moves_the_split() {
        let g = linear(10);
        let mut skip = vec![false; 10];
        skip[4] = true;
        let (c, d) = g.best_split(&[true; 10], &skip).unwrap();
        assert_eq!(d, 4);
        assert!(c == 3 || c == 5);
    }
}

#[cfg(test)]
mod timing {
    use crate::synth::{Shape, graph};

    /// `cargo test --release -p perfbisect-engine -- --ignored --nocapture split_timing`
    #[test]
    #[ignore = "timing printout, run by hand in release"]
    fn split_timing() {
        for shape in [Shape::linear(100_000), Shape::merges(100_000)] {
            let g = graph(shape, 7);
            let all = vec![true; g.len()];
            let skip = vec![false; g.len()];
            let t = std::time::Instant::now();
            let best = g.best_split(&all, &skip);
            println!("{shape:?}: best split {best:?} in {:?}", t.elapsed());
            let merges = (0..g.len()).filter(|&i| g.parents(i).len() > 1).count();
            println!("  ({merges} merges)");
        }
    }
}
