//! What a report is made from: plain data, serde both ways, filled in by the server
//! from its database.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::kpi::Direction;

/// Everything a report says, for every outcome of a bisect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportInput {
    pub repository: Repository,
    /// The range that was bisected (good = old endpoint, bad = new endpoint).
    pub good: Commit,
    pub bad: Commit,
    pub job: Job,
    /// The test host the runs came from (the report prints its description).
    #[serde(default)]
    pub machine: Machine,
    /// The bisected metric, e.g. `fio.write_iops`.
    pub metric: String,
    /// Overrides the KPI table's direction for `metric` (the submitter may state it).
    #[serde(default)]
    pub direction: Option<Direction>,
    pub outcome: Outcome,
    /// Samples of every commit judged good or bad during the bisect, in the order to
    /// plot them (x = sample index). Empty: the plot uses the endpoint runs.
    #[serde(default)]
    pub samples: Vec<CommitSamples>,
    /// Bracketed tag of the subject; `None` takes the culprit subject's text before its
    /// first `:` (`ext4: avoid …` → `ext4`).
    #[serde(default)]
    pub subject_prefix: Option<String>,
    #[serde(default)]
    pub robot: Robot,
    /// The bisect on the dashboard; printed as the place to get everything, and as
    /// `Closes:` of a regression.
    #[serde(default)]
    pub dashboard_url: Option<String>,
    /// Set when nobody submitted the bisect: a watch noticed the change on a branch. The
    /// report then opens "FYI, we noticed …" and says which watch found it.
    #[serde(default)]
    pub found_by: Option<FoundBy>,
    /// What the engine found about the whole range (several change points, the change
    /// across it, a contradicted direction, the cost of more runs); `None` for reports
    /// made without the engine's findings.
    #[serde(default)]
    pub findings: Option<crate::findings::RangeFindings>,
}

/// The watch that noticed a change and opened the bisect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoundBy {
    /// The watch's name.
    pub watch: String,
    /// The watched branch where the change showed.
    pub branch: String,
    /// The last and first measured heads around the change.
    pub before: String,
    pub after: String,
}

/// The repository a bisect ran on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repository {
    /// Clone URL, printed under the commit.
    pub url: String,
    /// Short name for the subject's `[name:branch]` tag (LKP says `linus`); `None`
    /// takes the URL's last path component without `.git`.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub branch: Option<String>,
}

impl Repository {
    /// The name used in the subject tag.
    ///
    /// ```
    /// use perfbisect_report::input::Repository;
    /// let r = Repository { url: "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git".into(), name: None, branch: None };
    /// assert_eq!(r.short_name(), "linux");
    /// ```
    pub fn short_name(&self) -> &str {
        if let Some(n) = self.name.as_deref().filter(|n| !n.is_empty()) {
            return n;
        }
        let url = self.url.trim_end_matches('/');
        let last = url.rsplit(['/', ':']).next().unwrap_or(url);
        let last = last.strip_suffix(".git").unwrap_or(last);
        if last.is_empty() { url } else { last }
    }
}

/// One commit, as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    /// Full hex id (40 digits for SHA-1, 64 for SHA-256).
    pub sha: String,
    /// First line of the commit message.
    pub subject: String,
    /// `Name <email>`; used by whoever mails the author, not printed in the body.
    #[serde(default)]
    pub author: Option<String>,
}

impl Commit {
    /// The first `n` characters of the id.
    pub fn short(&self, n: usize) -> &str {
        let end = self
            .sha
            .char_indices()
            .nth(n)
            .map_or(self.sha.len(), |(i, _)| i);
        &self.sha[..end]
    }
}

/// The measurement: testcase, build and benchmark parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// e.g. `fio-basic`.
    pub testcase: String,
    /// Kernel config name (printed as `config:`); absent for non-kernel projects.
    #[serde(default)]
    pub kconfig: Option<String>,
    #[serde(default)]
    pub compiler: Option<String>,
    #[serde(default)]
    pub rootfs: Option<String>,
    /// Host group, e.g. `lkp-icl-2sp9`.
    #[serde(default)]
    pub tbox_group: Option<String>,
    /// Benchmark parameters in job order. Keys that are identity axes (compiler,
    /// kconfig, rootfs, tbox_group, testcase, commit) are left out of the printed
    /// parameter list but kept in the table's axes line.
    #[serde(default)]
    pub parameters: Vec<(String, String)>,
}

/// Axes that the mail prints elsewhere, or not at all, instead of under `parameters:`.
pub const EXCLUDED_PARAMETER_AXES: &[&str] = &[
    "commit",
    "compiler",
    "kconfig",
    "rootfs",
    "tbox_group",
    "testcase",
];

impl Job {
    /// The parameters printed under `parameters:`, in job order.
    pub fn printed_parameters(&self) -> impl Iterator<Item = &(String, String)> {
        self.parameters
            .iter()
            .filter(|(k, _)| !EXCLUDED_PARAMETER_AXES.contains(&k.as_str()))
    }

    /// Every axis of the result's identity except `commit`, sorted by key (the table's
    /// axes line). Parameters win over the fixed fields when both name a key.
    pub fn axes(&self) -> Vec<(String, String)> {
        let mut axes: BTreeMap<&str, &str> = BTreeMap::new();
        let fixed = [
            ("compiler", self.compiler.as_deref()),
            ("kconfig", self.kconfig.as_deref()),
            ("rootfs", self.rootfs.as_deref()),
            ("tbox_group", self.tbox_group.as_deref()),
            ("testcase", Some(self.testcase.as_str())),
        ];
        for (k, v) in fixed {
            if let Some(v) = v {
                axes.insert(k, v);
            }
        }
        for (k, v) in &self.parameters {
            if k != "commit" {
                axes.insert(k, v);
            }
        }
        axes.into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

/// A test host's description; every field may be missing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    #[serde(default)]
    pub nr_threads: Option<u32>,
    #[serde(default)]
    pub sockets: Option<u32>,
    /// e.g. `Intel(R) Xeon(R) Gold 6346 CPU @ 3.10GHz`.
    #[serde(default)]
    pub cpu_brand: Option<String>,
    /// Micro-architecture, e.g. `Ice Lake`.
    #[serde(default)]
    pub cpu_model: Option<String>,
    /// As the host's record spells it, e.g. `256G`.
    #[serde(default)]
    pub memory: Option<String>,
}

impl Machine {
    /// `64 threads 2 sockets Intel(R) Xeon(R) Gold 6346 CPU @ 3.10GHz (Ice Lake) with 256G memory`,
    /// leaving out what is unknown; `unknown` when nothing is known.
    pub fn describe(&self) -> String {
        fn plural(n: u32, one: &str, many: &str) -> String {
            format!("{n} {}", if n == 1 { one } else { many })
        }
        let mut parts: Vec<String> = Vec::new();
        if let Some(n) = self.nr_threads {
            parts.push(plural(n, "thread", "threads"));
        }
        if let Some(n) = self.sockets {
            parts.push(plural(n, "socket", "sockets"));
        }
        let nonempty = |s: &Option<String>| {
            s.as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        if let Some(b) = nonempty(&self.cpu_brand) {
            parts.push(b);
        }
        if let Some(m) = nonempty(&self.cpu_model) {
            parts.push(format!("({m})"));
        }
        if let Some(mem) = nonempty(&self.memory) {
            parts.push(format!("with {mem} memory"));
        }
        if parts.is_empty() {
            "unknown".to_owned()
        } else {
            parts.join(" ")
        }
    }
}

/// One run of the benchmark: every metric it produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// A run that did not finish is left out of every performance stat, and counts in
    /// `fail:runs`.
    #[serde(default = "yes")]
    pub completed: bool,
    pub metrics: BTreeMap<String, f64>,
}

fn yes() -> bool {
    true
}

/// How many runs of each side showed a failure (an error in dmesg, a warning, a boot
/// failure). Runs counted are all runs, complete or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureCount {
    pub stat: String,
    pub parent: u32,
    pub culprit: u32,
}

/// A comparison of one job's runs on the culprit's parent and on the culprit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Runs {
    pub parent: Vec<Run>,
    pub culprit: Vec<Run>,
    #[serde(default)]
    pub failures: Vec<FailureCount>,
}

/// Whether the bisect judged a commit good (like the old endpoint) or bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Judgement {
    Good,
    Bad,
}

/// The bisected metric's samples at one commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitSamples {
    pub sha: String,
    pub judged: Judgement,
    pub values: Vec<f64>,
}

/// Another testcase the same commit changed ("In addition to that, …").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Addition {
    pub job: Job,
    #[serde(default)]
    pub machine: Machine,
    /// Its headline metric.
    pub metric: String,
    #[serde(default)]
    pub direction: Option<Direction>,
    pub runs: Runs,
}

/// A candidate of an inconclusive bisect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub commit: Commit,
    /// Probability of being the first commit that changed the metric, 0..=1.
    pub probability: f64,
}

/// How the bisect ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[expect(
    clippy::large_enum_variant,
    reason = "plain data built once per report; boxing would only complicate callers"
)]
pub enum Outcome {
    /// A culprit, verified against its parent.
    Found {
        culprit: Commit,
        parent: Commit,
        runs: Runs,
        /// Posterior probability of the culprit, 0..=1, if the engine states one.
        #[serde(default)]
        confidence: Option<f64>,
        #[serde(default)]
        also: Vec<Addition>,
    },
    /// The endpoints did not differ; no bisect was run.
    NotReproduced {
        good_runs: Vec<Run>,
        bad_runs: Vec<Run>,
    },
    /// The search stopped without reaching its confidence target.
    Inconclusive {
        /// Best first.
        candidates: Vec<Candidate>,
        /// The confidence that was asked for, 0..=1.
        target: f64,
    },
    /// The bisect could not run to an end.
    Failed { reason: String },
}

/// Who signs the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Robot {
    /// `<name> noticed a 54.8% improvement …`
    pub name: String,
    /// For the `Reported-by:` tag.
    #[serde(default)]
    pub email: Option<String>,
}

impl Default for Robot {
    fn default() -> Self {
        Robot {
            name: "perfbisect".to_owned(),
            email: None,
        }
    }
}

impl Robot {
    /// `name <email>` or `name`.
    pub fn address(&self) -> String {
        match &self.email {
            Some(e) if !e.is_empty() => format!("{} <{e}>", self.name),
            _ => self.name.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_line_tolerates_missing_fields() {
        let full = Machine {
            nr_threads: Some(64),
            sockets: Some(2),
            cpu_brand: Some("Intel(R) Xeon(R) Gold 6346 CPU @ 3.10GHz".into()),
            cpu_model: Some("Ice Lake".into()),
            memory: Some("256G".into()),
        };
        assert_eq!(
            full.describe(),
            "64 threads 2 sockets Intel(R) Xeon(R) Gold 6346 CPU @ 3.10GHz (Ice Lake) with 256G memory"
        );
        let aim7 = Machine {
            nr_threads: Some(40),
            cpu_brand: Some("Intel(R) Xeon(R) CPU E5-2690 v2 @ 3.00GHz".into()),
            memory: Some("384G".into()),
            ..Machine::default()
        };
        assert_eq!(
            aim7.describe(),
            "40 threads Intel(R) Xeon(R) CPU E5-2690 v2 @ 3.00GHz with 384G memory"
        );
        let model_only = Machine {
            nr_threads: Some(1),
            sockets: Some(1),
            cpu_model: Some("Skylake".into()),
            cpu_brand: Some("  ".into()),
            ..Machine::default()
        };
        assert_eq!(model_only.describe(), "1 thread 1 socket (Skylake)");
        assert_eq!(Machine::default().describe(), "unknown");
    }

    #[test]
    fn axes_are_sorted_and_parameters_exclude_identity_axes() {
        let job = Job {
            testcase: "fio-basic".into(),
            kconfig: Some("x86_64-rhel-9.4".into()),
            compiler: Some("gcc-14".into()),
            rootfs: None,
            tbox_group: Some("lkp".into()),
            parameters: vec![
                ("runtime".into(), "300s".into()),
                ("compiler".into(), "gcc-14".into()),
                ("bs".into(), "4k".into()),
                ("commit".into(), "abc".into()),
            ],
        };
        let keys: Vec<_> = job.axes().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            [
                "bs",
                "compiler",
                "kconfig",
                "runtime",
                "tbox_group",
                "testcase"
            ]
        );
        let printed: Vec<_> = job.printed_parameters().map(|(k, _)| k.as_str()).collect();
        assert_eq!(printed, ["runtime", "bs"]);
    }

    #[test]
    fn repository_short_name() {
        let r = |url: &str, name: Option<&str>| Repository {
            url: url.into(),
            name: name.map(Into::into),
            branch: None,
        };
        assert_eq!(r("https://x/y/linux.git/", None).short_name(), "linux");
        assert_eq!(r("git@github.com:me/proj.git", None).short_name(), "proj");
        assert_eq!(
            r("https://x/linux.git", Some("linus")).short_name(),
            "linus"
        );
    }
}
