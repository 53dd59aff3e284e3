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
            return Err(GraphError::LengthMismatch { ids: ids.len(), parents: parents.len() });
        }
        for (child, ps) in parents.iter().enumerate() {
            if let Some(&parent) = ps.iter().find(|&&p| p >= child) {
                return Err(GraphError::NotTopological { child, parent });
            }
        }
        Ok(Self { ids, parents })
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
}
