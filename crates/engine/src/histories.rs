//! Real projects' histories, for the simulator and the tests: the candidate sets of release
//! ranges as `git rev-list` gives them, stored in `histories/` by
//! `scripts/export-history.sh`.
//!
//! Synthetic histories ([`crate::synth`]) are shaped after one idea of a kernel-like tree.
//! Real trees differ from it in ways a search feels: in git.git a twelfth of a release's
//! commits start topic branches forked from before the previous release (their parents are
//! all on the good side), and u-boot's maintainers' pull requests merge branches of dozens
//! of commits into a first-parent chain of about a tenth of the range.

use crate::CandidateGraph;

/// The stored histories: a name for `bisect-sim`'s `history=` and the file's text.
pub const STORED: &[(&str, &str)] = &[
    ("git-v2.47", include_str!("../histories/git-v2.47.dag")),
    (
        "u-boot-v2024.10",
        include_str!("../histories/u-boot-v2024.10.dag"),
    ),
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HistoryError {
    #[error("line {line}: {problem}")]
    Line { line: usize, problem: String },
    #[error("no history is stored as {0:?} (stored: {1})")]
    Unknown(String, String),
    #[error(transparent)]
    Graph(#[from] crate::GraphError),
}

/// The stored history called `name`.
pub fn stored(name: &str) -> Result<CandidateGraph, HistoryError> {
    let text = STORED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
        .ok_or_else(|| {
            let names: Vec<&str> = STORED.iter().map(|(n, _)| *n).collect();
            HistoryError::Unknown(name.to_string(), names.join(", "))
        })?;
    parse(text)
}

/// Reads a history in the export script's format: per commit, parents first and the bad
/// commit last, its sha and then each parent as an index among the earlier commits, or `-`
/// for a parent on the good side. `#` starts a comment line.
pub fn parse(text: &str) -> Result<CandidateGraph, HistoryError> {
    let mut ids = Vec::new();
    let mut parents = Vec::new();
    let mut first_outside = Vec::new();
    for (at, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let problem = |problem: String| HistoryError::Line {
            line: at + 1,
            problem,
        };
        let mut words = line.split_whitespace();
        let sha = words.next().expect("a non-empty line has a word");
        let mut ps = Vec::new();
        let mut outside_first = false;
        for (i, word) in words.enumerate() {
            if word == "-" {
                outside_first |= i == 0;
                continue;
            }
            let p: usize = word
                .parse()
                .map_err(|_| problem(format!("parent {word:?} is neither an index nor -")))?;
            if p >= ids.len() {
                return Err(problem(format!(
                    "parent {p} is not an earlier commit (this is commit {})",
                    ids.len()
                )));
            }
            ps.push(p);
        }
        if outside_first && !ps.is_empty() {
            first_outside.push(ids.len());
        }
        ids.push(sha.to_string());
        parents.push(ps);
    }
    let mut graph = CandidateGraph::new(ids, parents)?;
    for i in first_outside {
        graph.mark_first_parent_outside(i);
    }
    Ok(graph)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_histories_load_with_every_commit_under_the_bad_one() {
        for (name, _) in STORED {
            let g = stored(name).unwrap();
            assert!(g.len() > 900, "{name}: {} commits", g.len());
            // A release range: every candidate is an ancestor of the tip.
            assert!(g.ancestors(&[g.bad()]).iter().all(|&a| a), "{name}");
            let merges = (0..g.len()).filter(|&i| g.parents(i).len() > 1).count();
            assert!(merges > 100, "{name}: {merges} merges");
        }
    }

    #[test]
    fn a_parent_on_the_good_side_is_left_out_and_marks_a_first_parent_outside() {
        let g = parse("# a comment\naaa -\nbbb 0\nccc - 1\nddd 2 0\n").unwrap();
        assert_eq!(g.len(), 4);
        assert_eq!(g.parents(0), [] as [usize; 0]);
        assert_eq!(g.parents(2), [1]);
        assert_eq!(g.first_parent(2), None);
        assert_eq!(g.first_parent(3), Some(2));
        assert_eq!(g.id(3), "ddd");
    }

    #[test]
    fn bad_lines_name_their_line_and_problem() {
        let e = parse("aaa -\nbbb 1\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2: parent 1 is not an earlier commit (this is commit 1)"
        );
        let e = parse("aaa x\n").unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        assert!(matches!(stored("nope"), Err(HistoryError::Unknown(..))));
    }
}
