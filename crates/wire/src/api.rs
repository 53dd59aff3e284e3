//! Bodies of the user-facing REST API (`/api/v1/...`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Every 4xx/5xx answer: which field was wrong (when one was) and what is wrong with it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRepository {
    /// Short name used in bisect submissions (`linux`, `glibc`).
    pub name: String,
    /// Where to fetch from: a path, `file://` or `git://` URL.
    pub url: String,
    /// The public web view's commit URL, with `{sha}` where the commit goes (cgit:
    /// `https://git.kernel.org/.../linux.git/commit/?id={sha}`, GitHub:
    /// `https://github.com/o/r/commit/{sha}`); reports link commits there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web_url: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Repository {
    pub id: i64,
    pub name: String,
    pub url: String,
    pub created_at: DateTime<Utc>,
    pub fetched_at: Option<DateTime<Utc>>,
    /// The commit URL template of the public web view, if registered.
    #[serde(default)]
    pub web_url: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitBisect {
    /// Name of a registered repository.
    pub repository: String,
    /// Revision known to be good (sha, short sha, branch or tag).
    pub good: String,
    /// Revision known to be bad.
    pub bad: String,
    /// The job spec, as YAML text.
    pub job: String,
    /// The metric that changed, e.g. `fio.write_iops`.
    pub metric: String,
    /// `increase` or `decrease`, if known.
    #[serde(default)]
    pub direction: Option<String>,
    /// Expected relative size of the change in percent, if known.
    #[serde(default)]
    pub magnitude_pct: Option<f64>,
    /// Target probability that the culprit is right; default 0.99.
    #[serde(default)]
    pub confidence: Option<f64>,
    /// Cap on benchmark runs for the whole bisect; default 400.
    #[serde(default)]
    pub max_runs: Option<u32>,
    /// Addresses to notify when the bisect ends.
    #[serde(default)]
    pub notify: Vec<String>,
    /// When good is not an ancestor of bad, bisect from their merge base instead of refusing.
    #[serde(default)]
    pub use_merge_base: bool,
    /// Answer at merge level first: search the first-parent chain of bad.
    #[serde(default)]
    pub first_parent: bool,
}

/// Status of a bisect. `queued → reproducing → searching → verifying → found |
/// not_reproduced | inconclusive | failed | cancelled`.
pub const STATUSES: &[&str] = &[
    "queued",
    "reproducing",
    "searching",
    "verifying",
    "found",
    "not_reproduced",
    "inconclusive",
    "failed",
    "cancelled",
];

pub fn status_is_final(status: &str) -> bool {
    matches!(
        status,
        "found" | "not_reproduced" | "inconclusive" | "failed" | "cancelled"
    )
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Revision {
    /// As the user wrote it.
    pub rev: String,
    pub sha: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CommitInfo {
    pub sha: String,
    pub subject: String,
    pub author: String,
}

/// Per-commit statistics of the bisect's metric, derived from its complete runs.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CommitStats {
    pub sha: String,
    pub subject: String,
    /// `good_endpoint`, `bad_endpoint` or `candidate`.
    pub role: String,
    /// `good`, `bad`, `unknown` or `skipped`.
    pub verdict: String,
    pub n: usize,
    pub incomplete_runs: usize,
    pub mean: Option<f64>,
    pub stddev: Option<f64>,
    pub min: Option<f64>,
    pub median: Option<f64>,
    pub max: Option<f64>,
    /// The engine's probability that this commit is the culprit, where it has one.
    pub culprit_probability: Option<f64>,
    /// Why it was skipped (the build log's tail), if it was.
    pub skip_reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Culprit {
    pub commit: CommitInfo,
    pub confidence: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Bisect {
    pub id: i64,
    pub repository: String,
    pub good: Revision,
    pub bad: Revision,
    pub metric: String,
    pub direction: Option<String>,
    pub confidence: f64,
    pub max_runs: u32,
    pub status: String,
    /// Why the bisect is in its status (the engine's last explanation, or the failure).
    pub status_reason: Option<String>,
    pub testcase: String,
    pub tbox_group: String,
    pub job_hash: String,
    pub candidates_total: usize,
    pub candidates_remaining: usize,
    pub runs_done: usize,
    pub tasks_pending: usize,
    pub culprit: Option<Culprit>,
    /// Measured commits, oldest first (good endpoint first).
    pub commits: Vec<CommitStats>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The engine's findings: measured change, every change point, budget prediction.
    #[serde(default)]
    pub findings: Option<crate::findings::EngineFindings>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BisectSummary {
    pub id: i64,
    pub repository: String,
    pub good: String,
    pub bad: String,
    pub metric: String,
    pub testcase: String,
    pub status: String,
    pub culprit: Option<String>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BisectList {
    pub bisects: Vec<BisectSummary>,
    pub total: i64,
}
