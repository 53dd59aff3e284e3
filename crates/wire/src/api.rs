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
    /// `mirroring` (registered, the first fetch is under way), `ready` or `failed` (the
    /// first fetch failed: `fetch_error` says why; register it again once fixed).
    #[serde(default = "ready")]
    pub state: String,
    /// The last fetch's error, without credentials; none after a fetch that worked.
    #[serde(default)]
    pub fetch_error: Option<String>,
}

fn ready() -> String {
    "ready".into()
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
    /// Cap on benchmark runs for the whole bisect. Without it the budget follows from the
    /// engine's prediction after the endpoints, under the server's ceiling; with it, also
    /// under this number.
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

/// Status of a bisect. `fetching` (waiting for its repository's fetch, the range not yet
/// resolved) `→ queued → reproducing → searching → verifying → found |
/// not_reproduced | inconclusive | failed | cancelled`.
pub const STATUSES: &[&str] = &[
    "fetching",
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

/// Whether a bisect in `status` met its target confidence (a culprit found, or the change
/// not reproduced): what more runs would cost is then no longer news.
pub fn status_met_target(status: &str) -> bool {
    matches!(status, "found" | "not_reproduced")
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
    /// Empty for the moment after a submit while the commits' subjects and authors are
    /// read from the mirror (a large range's take a second or so).
    pub subject: String,
    /// Empty while `subject` is.
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
    /// The change as measured from stored runs, and which runs it used; absent until both
    /// sides have a complete run.
    #[serde(default)]
    pub measured_change: Option<MeasuredChange>,
    /// How far the search has come: measures that move with every run.
    #[serde(default)]
    pub progress: Option<Progress>,
    /// What it takes to reproduce the bisect: the job spec and kernel config links, the
    /// `perfbisect submit` line, and web links to its commits.
    #[serde(default)]
    pub materials: Option<BisectMaterials>,
}

/// The materials to reproduce a bisect, as the report's "To reproduce" section gives them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BisectMaterials {
    /// The job spec as submitted (`/api/v1/bisects/{id}/job.yaml`, under the public URL).
    pub job_url: String,
    /// The kernel config the job names (`/api/v1/kconfigs/{name}`), if it names one.
    pub kconfig_url: Option<String>,
    /// The command line that runs the same bisect again.
    pub submit_line: String,
    /// The culprit's, the good and the bad commit's pages in the repository's web view
    /// (its `web_url` template); empty when the repository has none.
    pub commit_links: Vec<CommitLink>,
}

/// A commit's page in the repository's web view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CommitLink {
    /// `culprit`, `good` or `bad`.
    pub role: String,
    pub sha: String,
    pub url: String,
}

/// The change a bisect shows everywhere (API, dashboard, CLI, report): 100·(bad level −
/// good level)/good level, each level the mean of the complete runs named by `basis`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MeasuredChange {
    /// Relative change in percent; positive when the bad side is higher.
    pub pct: f64,
    pub good_sha: String,
    pub bad_sha: String,
    pub good_mean: f64,
    pub bad_mean: f64,
    pub good_runs: usize,
    pub bad_runs: usize,
    /// `verification` (the culprit against the parent it was paired with, paired runs only),
    /// `culprit_parent` (every run of the culprit and its parent) or `endpoints` (every run
    /// of the bad and the good endpoint).
    pub basis: String,
    /// The runs it used, in words: `culprit vs its parent, 10 + 10 paired verification runs`.
    pub runs_used: String,
    /// `regression`, `improvement`, or `change` when the metric's direction is unknown.
    pub kind: String,
}

/// Above this [`Progress::change_probability`], a change is not in doubt enough for the CLI
/// or the page to say that the progress's measures are given one.
pub const CHANGE_SURE: f64 = 0.99;

/// Measures of a running search that move as runs arrive (where the engine gives
/// probabilities), and an estimate of the time left.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Progress {
    /// The most likely culprit and its probability, given that the range holds a change.
    pub top_sha: Option<String>,
    pub top_probability: Option<f64>,
    /// Fewest candidates that together hold 90% of the probability, given a change.
    pub candidates_90: Option<usize>,
    /// Probability that the range holds a change at all (the measures above and the bits
    /// are given one).
    #[serde(default)]
    pub change_probability: Option<f64>,
    /// Uncertainty left about the culprit, in bits (log2 of the candidates at the start).
    pub entropy_bits: Option<f64>,
    pub entropy_bits_start: f64,
    /// Runs the budget still allows.
    pub budget_runs_left: usize,
    /// Estimated seconds to the end at the pace so far (bits resolved per run, seconds per
    /// run), capped by the budget; absent before the first runs.
    pub eta_secs: Option<i64>,
    /// Seconds the rest of the budget would take at the pace so far.
    pub budget_secs: Option<i64>,
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
    /// Relative change in percent, as `Bisect::measured_change` (absent until measured).
    #[serde(default)]
    pub change_pct: Option<f64>,
    /// `regression`, `improvement` or `change`, with `change_pct`.
    #[serde(default)]
    pub change_kind: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BisectList {
    pub bisects: Vec<BisectSummary>,
    pub total: i64,
}
