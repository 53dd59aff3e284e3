//! A (watch, branch, metric) series as the analysis and the pages see it. Its points are read
//! from the stored runs (`store::series::points`); the value of a commit is derived here from
//! its runs every time: no table holds it.

use crate::store::series::Point;
use perfbisect_wire::states::TaskState;
use perfbisect_wire::watch::SeriesPoint;

impl Point {
    /// Whether its measurement is over (whatever came of it).
    pub fn finished(&self) -> bool {
        !matches!(self.state, TaskState::Queued | TaskState::Running)
    }

    pub fn mean(&self) -> Option<f64> {
        perfbisect_changepoint::head_value(&self.runs)
    }

    pub fn to_wire(&self) -> SeriesPoint {
        SeriesPoint {
            seq: self.seq,
            sha: self.sha.clone(),
            subject: self.subject.clone(),
            kind: self.kind.clone(),
            seen_at: self.seen_at,
            runs: self.runs.clone(),
            mean: self.mean(),
            state: self.state.as_str().to_string(),
        }
    }
}
