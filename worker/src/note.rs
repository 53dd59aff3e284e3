//! The worker's note of the task it is working on, kept on disk so that a worker that died
//! (crash, OOM, the host rebooting under a kernel it was testing) can tell the server about
//! the task when it starts again, instead of leaving it to its lease.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurrentTask {
    pub task_id: i64,
    pub sha: String,
    /// `build <sha>`, `run 3 of 5`, ...
    pub stage: String,
    pub since: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct TaskNote {
    path: PathBuf,
}

impl TaskNote {
    pub fn new(work_dir: &Path) -> Self {
        Self {
            path: work_dir.join("current-task.json"),
        }
    }

    /// Records the task and its stage, durably: this is what survives a power loss.
    pub fn write(&self, current: &CurrentTask) -> std::io::Result<()> {
        let tmp = self.path.with_extension("json.tmp");
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&serde_json::to_vec(current).expect("note serializes"))?;
        f.sync_all()?;
        std::fs::rename(&tmp, &self.path)
    }

    pub fn read(&self) -> Option<CurrentTask> {
        serde_json::from_slice(&std::fs::read(&self.path).ok()?).ok()
    }

    pub fn clear(&self) -> std::io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}
