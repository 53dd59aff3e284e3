//! Bodies of the watch API (`/api/v1/watches/...`): watched branches, their series and the
//! changes found in them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One metric a watch follows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchMetric {
    /// Metric name, e.g. `fio.write_iops`.
    pub name: String,
    /// Which moves open a bisect: `increase`, `decrease` or `either` (the default).
    #[serde(default = "either")]
    pub direction: String,
    /// Smallest relative change, in percent, that opens a bisect; smaller ones are recorded
    /// and left alone. Default 2.
    #[serde(default = "default_threshold")]
    pub threshold_pct: f64,
}

fn either() -> String {
    "either".into()
}

fn default_threshold() -> f64 {
    2.0
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWatch {
    /// Unique name of the watch.
    pub name: String,
    /// Name of a registered repository.
    pub repository: String,
    /// A branch name, or a glob over branch names (`release-*`).
    pub branch: String,
    /// The job spec, as YAML text.
    pub job: String,
    pub metrics: Vec<WatchMetric>,
    /// Host group that measures the heads; default the job's `tbox_group`.
    #[serde(default)]
    pub host_group: Option<String>,
    /// Seconds between polls of the repository; default 300. A push webhook polls at once.
    #[serde(default)]
    pub cadence_secs: Option<u32>,
    /// Benchmark runs per measured commit; default 5.
    #[serde(default)]
    pub runs_per_head: Option<u32>,
    /// When a push brings many commits, also measure up to this many of them; default 0.
    #[serde(default)]
    pub sample_commits: Option<u32>,
    /// On first sight of a branch, also measure this many first-parent ancestors of its
    /// head, so the series starts with a baseline; default 0.
    #[serde(default)]
    pub backfill: Option<u32>,
    /// Who is mailed the reports of the bisects this watch opens.
    #[serde(default)]
    pub recipients: Vec<String>,
}

/// A change to a watch: every field left out stays as it is.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateWatch {
    #[serde(default)]
    pub branch: Option<String>,
    #[serde(default)]
    pub metrics: Option<Vec<WatchMetric>>,
    #[serde(default)]
    pub host_group: Option<String>,
    #[serde(default)]
    pub cadence_secs: Option<u32>,
    #[serde(default)]
    pub runs_per_head: Option<u32>,
    #[serde(default)]
    pub sample_commits: Option<u32>,
    #[serde(default)]
    pub recipients: Option<Vec<String>>,
    #[serde(default)]
    pub enabled: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Watch {
    pub id: i64,
    pub name: String,
    pub repository: String,
    pub branch: String,
    pub testcase: String,
    pub job_hash: String,
    pub metrics: Vec<WatchMetric>,
    pub host_group: String,
    pub cadence_secs: u32,
    pub runs_per_head: u32,
    pub sample_commits: u32,
    pub backfill: u32,
    pub recipients: Vec<String>,
    pub enabled: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub polled_at: Option<DateTime<Utc>>,
    /// Commits measured (or queued to be) so far.
    pub heads: u64,
}

/// One measured commit of a series, with its runs.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SeriesPoint {
    pub seq: i32,
    pub sha: String,
    pub subject: String,
    /// `head` (a branch head the watch saw), `sample` (a commit of a push that brought many)
    /// or `backfill`.
    pub kind: String,
    pub seen_at: DateTime<Utc>,
    /// The metric's value in every complete run, in run order.
    pub runs: Vec<f64>,
    /// Mean of `runs`; none until a run is stored.
    pub mean: Option<f64>,
    /// `queued`, `running`, `done`, `failed`, `build_failed`.
    pub state: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Series {
    pub watch_id: i64,
    pub branch: String,
    pub metric: String,
    pub points: Vec<SeriesPoint>,
    pub changes: Vec<ChangePoint>,
}

/// A change point found in a series, and what it led to.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ChangePoint {
    pub id: i64,
    pub watch_id: i64,
    pub watch: String,
    pub branch: String,
    pub metric: String,
    /// The last commit measured before the change (the bisect's good end).
    pub before_sha: String,
    pub before_seq: i32,
    /// The first commit measured after it (the bisect's bad end).
    pub after_sha: String,
    pub after_seq: i32,
    /// The head whose measurement made the change significant.
    pub detected_seq: i32,
    /// Mean level before and after, as the detector saw them.
    pub before: f64,
    pub after: f64,
    /// Relative size, in percent (positive: the metric went up).
    pub change_pct: f64,
    /// 1 − the detector's (Bonferroni-adjusted) p-value.
    pub confidence: f64,
    /// `bisecting`, `duplicate`, `ignored` or `failed`.
    pub action: String,
    pub bisect_id: Option<i64>,
    /// Status of the bisect, when there is one.
    pub bisect_status: Option<String>,
    pub culprit_sha: Option<String>,
    pub message: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// What a push webhook may say; the server fetches and looks for itself either way.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct PushEvent {
    /// The pushed ref, e.g. `refs/heads/main` (informational).
    #[serde(default, rename = "ref")]
    pub ref_name: Option<String>,
    /// The new head (informational).
    #[serde(default)]
    pub after: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PollResult {
    /// Commits queued for measurement by this poll.
    pub queued: Vec<String>,
}
