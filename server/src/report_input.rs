//! Builds a report's input (`perfbisect_report::ReportInput`) from a stored bisect.
//!
//! Only stored rows are read: the runs, the tasks (which of them paired the culprit with
//! its parent), the engine's last assessments, the host's machine description, and other
//! found bisects that blamed the same commit. Nothing here renders text; the report crate
//! does that.

use perfbisect_report::{
    Addition, Candidate, Commit, CommitSamples, Job, Judgement, Machine, Outcome, ReportInput,
    Repository, Robot, Run, Runs,
};
use perfbisect_wire::JobSpec;
use perfbisect_wire::worker::MachineInfo;
use sqlx::PgConnection;
use std::collections::{BTreeMap, HashMap};

/// At most this many other testcases go in the "In addition to that" block.
const MAX_ADDITIONS: i64 = 10;
/// At most this many candidates are listed in an inconclusive report.
const MAX_CANDIDATES: usize = 5;

#[derive(Debug, thiserror::Error)]
pub enum ReportInputError {
    #[error("no bisect with id {0}")]
    NotFound(i64),
    #[error("bisect {id} has not ended (it is {status}); its report comes when it does")]
    NotFinished { id: i64, status: String },
    #[error("bisect {id}: stored data is inconsistent: {what}")]
    Inconsistent { id: i64, what: String },
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// What the report says about its author and where it lives; from the server's settings.
#[derive(Debug, Clone)]
pub struct ReportContext {
    pub robot: Robot,
    /// The server's public base URL; the report links to the bisect there.
    pub public_url: String,
}

/// A loaded report input with the facts the mailer needs besides it.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub input: ReportInput,
    pub status: String,
    pub repository: String,
    pub repository_id: i64,
    pub testcase: String,
    /// The submission's `notify` list.
    pub notify: Vec<String>,
}

use crate::store::reports::{self, ReportBisect as BisectRow, ReportRun as RunRow};

struct CommitRow {
    parents: Vec<i32>,
    subject: String,
    author: String,
}

/// Everything stored about one bisect that a report reads.
struct Stored {
    row: BisectRow,
    /// sha → commit; idx → sha.
    commits: HashMap<String, CommitRow>,
    by_idx: HashMap<i32, String>,
    runs: Vec<RunRow>,
}

async fn load_stored(conn: &mut PgConnection, id: i64) -> Result<Stored, ReportInputError> {
    let row = reports::bisect(&mut *conn, id)
        .await?
        .ok_or(ReportInputError::NotFound(id))?;
    let rows = reports::commits(&mut *conn, id).await?;
    let mut commits = HashMap::new();
    let mut by_idx = HashMap::new();
    for reports::ReportCommit {
        idx,
        sha,
        parents,
        subject,
        author,
    } in rows
    {
        by_idx.insert(idx, sha.clone());
        commits.insert(
            sha,
            CommitRow {
                parents,
                subject,
                author,
            },
        );
    }
    let runs = reports::runs(&mut *conn, id).await?;
    Ok(Stored {
        row,
        commits,
        by_idx,
        runs,
    })
}

impl Stored {
    fn commit(&self, sha: &str) -> Commit {
        let c = self.commits.get(sha);
        Commit {
            sha: sha.to_string(),
            subject: c.map(|c| c.subject.clone()).unwrap_or_default(),
            author: c.map(|c| c.author.clone()),
        }
    }

    fn runs_of(&self, sha: &str) -> Vec<&RunRow> {
        self.runs.iter().filter(|r| r.sha == sha).collect()
    }

    /// The culprit's verification: the parent it was paired with and both sides' runs from
    /// the paired tasks. Without paired runs, the first parent (or the good endpoint) and
    /// every run of the two commits.
    fn verification(&self, culprit: &str) -> (String, Vec<&RunRow>, Vec<&RunRow>) {
        let first_parent = self
            .commits
            .get(culprit)
            .and_then(|c| c.parents.first())
            .and_then(|i| self.by_idx.get(i))
            .cloned()
            .unwrap_or_else(|| self.row.good_sha.clone());
        // The same choice of runs as the change every page shows (`crate::change`).
        let paired_parent = crate::change::paired_parent(
            self.runs
                .iter()
                .map(|r| (r.task_sha.as_str(), r.pair_sha.as_deref())),
            culprit,
            &first_parent,
        );
        if let Some(parent) = paired_parent {
            let in_pair = |r: &&RunRow| {
                crate::change::in_pair(&r.task_sha, r.pair_sha.as_deref(), culprit, &parent)
            };
            let paired: Vec<&RunRow> = self.runs.iter().filter(in_pair).collect();
            let parent_runs = paired.iter().copied().filter(|r| r.sha == parent).collect();
            let culprit_runs = paired
                .iter()
                .copied()
                .filter(|r| r.sha == culprit)
                .collect();
            return (parent, parent_runs, culprit_runs);
        }
        let parent_runs = self.runs_of(&first_parent);
        (first_parent, parent_runs, self.runs_of(culprit))
    }

    /// Samples of every commit the engine judged good or bad (the good endpoint is good by
    /// definition), in candidate order: the plot's x axis.
    fn judged_samples(&self) -> Vec<CommitSamples> {
        let mut judged: Vec<(i32, String, Judgement)> =
            vec![(-1, self.row.good_sha.clone(), Judgement::Good)];
        let idx_of: HashMap<&str, i32> =
            self.by_idx.iter().map(|(i, s)| (s.as_str(), *i)).collect();
        for a in self.row.assessments.as_array().into_iter().flatten() {
            let Some(sha) = a["sha"].as_str() else {
                continue;
            };
            let j = match a["verdict"].as_str() {
                Some("good") => Judgement::Good,
                Some("bad") => Judgement::Bad,
                _ => continue,
            };
            judged.push((idx_of.get(sha).copied().unwrap_or(i32::MAX), sha.into(), j));
        }
        judged.sort_by_key(|j| j.0);
        judged
            .into_iter()
            .filter_map(|(_, sha, judged)| {
                let values: Vec<f64> = self
                    .runs_of(&sha)
                    .into_iter()
                    .filter_map(|r| value(r, &self.row.metric))
                    .collect();
                (!values.is_empty()).then_some(CommitSamples {
                    sha,
                    judged,
                    values,
                })
            })
            .collect()
    }

    /// The host that ran most of these runs.
    fn main_host(runs: &[&RunRow]) -> Option<i64> {
        let mut count: BTreeMap<i64, usize> = BTreeMap::new();
        for r in runs {
            *count.entry(r.host_id).or_default() += 1;
        }
        count.into_iter().max_by_key(|(_, n)| *n).map(|(h, _)| h)
    }
}

/// The metric's value in a complete run.
fn value(r: &RunRow, metric: &str) -> Option<f64> {
    if !r.completed {
        return None;
    }
    r.metrics.get(metric)?.as_f64().filter(|v| v.is_finite())
}

fn to_run(r: &RunRow) -> Run {
    let metrics = r
        .metrics
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_f64().filter(|x| x.is_finite())?)))
        .collect();
    Run {
        completed: r.completed,
        metrics,
    }
}

/// The comparison's runs. Incomplete runs stay in: the report leaves them out of every
/// stat and counts them in its `fail:runs` block.
fn to_runs(parent: &[&RunRow], culprit: &[&RunRow]) -> Runs {
    Runs {
        parent: parent.iter().map(|r| to_run(r)).collect(),
        culprit: culprit.iter().map(|r| to_run(r)).collect(),
        failures: Vec::new(),
    }
}

/// The job as the report prints it: testcase, config, compiler and the parameters.
pub fn job_of(spec: &serde_json::Value, testcase: &str) -> Job {
    let parsed: Option<JobSpec> = serde_json::from_value(spec.clone()).ok();
    let Some(spec) = parsed else {
        return Job {
            testcase: testcase.into(),
            kconfig: None,
            compiler: None,
            rootfs: None,
            tbox_group: None,
            parameters: Vec::new(),
        };
    };
    let parameters = spec
        .params
        .iter()
        .map(|(k, v)| {
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), v)
        })
        .collect();
    Job {
        testcase: spec.testcase,
        kconfig: spec.kconfig,
        compiler: spec.compiler,
        rootfs: spec.rootfs,
        tbox_group: Some(spec.tbox_group),
        parameters,
    }
}

/// The host's description, as the worker registered it.
pub fn machine_of(info: &MachineInfo) -> Machine {
    Machine {
        nr_threads: info.threads,
        sockets: info.sockets,
        cpu_brand: info.cpu_model.clone(),
        cpu_model: None,
        memory: info.memory_bytes.map(memory_size),
    }
}

/// `256G`, as LKP spells memory sizes (GiB, rounded; MiB below one GiB).
fn memory_size(bytes: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    let gib = bytes as f64 / GIB;
    if gib >= 1.0 {
        format!("{}G", gib.round() as u64)
    } else {
        format!("{}M", (bytes >> 20).max(1))
    }
}

/// The watch whose change opened bisect `id`, if a watch did (the first such change).
async fn found_by(
    conn: &mut PgConnection,
    id: i64,
) -> sqlx::Result<Option<perfbisect_report::FoundBy>> {
    let row = reports::found_by(&mut *conn, id).await?;
    Ok(row.map(
        |(watch, branch, before, after)| perfbisect_report::FoundBy {
            watch,
            branch,
            before,
            after,
        },
    ))
}

/// The machine that ran the bisect's benchmark on `host`: what its runs saw from inside
/// (a VM's CPUs and memory, a bare-metal host's), else what the worker registered with.
async fn machine(conn: &mut PgConnection, bisect: i64, host: Option<i64>) -> sqlx::Result<Machine> {
    let Some(host) = host else {
        return Ok(Machine::default());
    };
    let json = reports::machine(&mut *conn, bisect, host).await?;
    let info: MachineInfo = json
        .and_then(|j| serde_json::from_value(j).ok())
        .unwrap_or_default();
    Ok(machine_of(&info))
}

/// A branch-like name for the subject's `[repo:branch]` tag: the bad revision as the
/// submitter named it, unless that was a bare commit id.
fn branch_of(bad_rev: &str) -> Option<String> {
    let looks_like_sha = bad_rev.len() >= 7 && bad_rev.chars().all(|c| c.is_ascii_hexdigit());
    (!looks_like_sha && !bad_rev.is_empty()).then(|| bad_rev.to_string())
}

/// Other found bisects that blamed the same commit for another testcase, compared against
/// the same parent.
async fn additions(
    conn: &mut PgConnection,
    id: i64,
    culprit: &str,
    parent: &str,
    testcase: &str,
) -> Result<Vec<Addition>, ReportInputError> {
    let others = reports::same_culprit(&mut *conn, culprit, id, testcase, MAX_ADDITIONS).await?;
    let mut out = Vec::new();
    for other in others {
        let stored = load_stored(conn, other).await?;
        let (their_parent, p, c) = stored.verification(culprit);
        let metric = &stored.row.metric;
        // The block compares against our parent; a different base would mislabel it, and a
        // side without the metric cannot be summarised.
        let has = |rs: &[&RunRow]| rs.iter().any(|r| value(r, metric).is_some());
        if their_parent != parent || !has(&p) || !has(&c) {
            continue;
        }
        let host = Stored::main_host(&c);
        out.push(Addition {
            job: job_of(&stored.row.spec, &stored.row.testcase),
            machine: machine(conn, other, host).await?,
            metric: metric.clone(),
            direction: None,
            runs: to_runs(&p, &c),
        });
    }
    Ok(out)
}

/// Loads a finished bisect as a report input. Cancelled bisects get a `failed` report
/// saying so; unfinished ones have no report yet.
pub async fn load(
    conn: &mut PgConnection,
    id: i64,
    ctx: &ReportContext,
) -> Result<Loaded, ReportInputError> {
    load_with(conn, id, ctx, false).await
}

/// Loads a bisect that may still be running (for the progress mails, which read only the
/// range, the job, the links and the findings). A running bisect's outcome is its current
/// candidates.
pub async fn load_running(
    conn: &mut PgConnection,
    id: i64,
    ctx: &ReportContext,
) -> Result<Loaded, ReportInputError> {
    load_with(conn, id, ctx, true).await
}

/// An endpoint's commit; one never resolved (a bisect that failed while `fetching`) has no
/// id, and its revision as given stands in its subject.
fn endpoint(stored: &Stored, sha: &str, rev: &str) -> Commit {
    if sha.is_empty() {
        Commit {
            sha: String::new(),
            subject: rev.to_string(),
            author: None,
        }
    } else {
        stored.commit(sha)
    }
}

async fn load_with(
    conn: &mut PgConnection,
    id: i64,
    ctx: &ReportContext,
    allow_running: bool,
) -> Result<Loaded, ReportInputError> {
    let stored = load_stored(conn, id).await?;
    let row = &stored.row;
    let running = !perfbisect_wire::api::status_is_final(&row.status);
    if running && !allow_running {
        return Err(ReportInputError::NotFinished {
            id,
            status: row.status.clone(),
        });
    }
    let reason = || row.status_reason.clone().unwrap_or_default();
    let (outcome, host) = match row.status.as_str() {
        "found" => {
            let culprit =
                row.culprit_sha
                    .clone()
                    .ok_or_else(|| ReportInputError::Inconsistent {
                        id,
                        what: "found without a culprit".into(),
                    })?;
            let (parent, p, c) = stored.verification(&culprit);
            let also = additions(conn, id, &culprit, &parent, &row.testcase).await?;
            (
                Outcome::Found {
                    culprit: stored.commit(&culprit),
                    parent: stored.commit(&parent),
                    runs: to_runs(&p, &c),
                    confidence: row.culprit_confidence,
                    also,
                },
                Stored::main_host(&c),
            )
        }
        "not_reproduced" => {
            let good = stored.runs_of(&row.good_sha);
            let bad = stored.runs_of(&row.bad_sha);
            let host = Stored::main_host(&bad);
            (
                Outcome::NotReproduced {
                    good_runs: good.into_iter().map(to_run).collect(),
                    bad_runs: bad.into_iter().map(to_run).collect(),
                },
                host,
            )
        }
        _ if running || row.status == "inconclusive" => {
            let mut candidates: Vec<Candidate> = row
                .assessments
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| {
                    Some(Candidate {
                        commit: stored.commit(a["sha"].as_str()?),
                        probability: a["p"].as_f64().filter(|p| *p > 0.0)?,
                    })
                })
                .collect();
            candidates.sort_by(|a, b| b.probability.total_cmp(&a.probability));
            candidates.truncate(MAX_CANDIDATES);
            let all: Vec<&RunRow> = stored.runs.iter().collect();
            (
                Outcome::Inconclusive {
                    candidates,
                    target: row.confidence,
                },
                Stored::main_host(&all),
            )
        }
        "cancelled" => (
            Outcome::Failed {
                reason: format!("the bisect was cancelled ({})", reason()),
            },
            None,
        ),
        _ => (Outcome::Failed { reason: reason() }, None),
    };
    let found_by = found_by(conn, id).await?;
    let input = ReportInput {
        repository: Repository {
            url: row.url.clone(),
            name: Some(row.repository.clone()),
            // A watch's bisect runs between shas: its branch is the watched one.
            branch: found_by
                .as_ref()
                .map(|f| f.branch.clone())
                .or_else(|| branch_of(&row.bad_rev)),
        },
        good: endpoint(&stored, &row.good_sha, &row.good_rev),
        bad: endpoint(&stored, &row.bad_sha, &row.bad_rev),
        job: job_of(&row.spec, &row.testcase),
        machine: machine(conn, id, host).await?,
        metric: row.metric.clone(),
        direction: None,
        outcome,
        samples: stored.judged_samples(),
        subject_prefix: None,
        robot: ctx.robot.clone(),
        dashboard_url: Some(format!(
            "{}/bisects/{id}",
            ctx.public_url.trim_end_matches('/')
        )),
        found_by,
        findings: crate::report_findings::range_findings(
            row.findings.as_ref(),
            row.direction.as_deref(),
            (row.max_runs, row.runs_done),
            |sha| stored.commit(sha),
        ),
    };
    let notify = row
        .notify
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    Ok(Loaded {
        input,
        status: row.status.clone(),
        repository: row.repository.clone(),
        repository_id: row.repository_id,
        testcase: row.testcase.clone(),
        notify,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_printed_like_lkp() {
        assert_eq!(memory_size(256 << 30), "256G");
        assert_eq!(memory_size((15.6 * (1u64 << 30) as f64) as u64), "16G");
        assert_eq!(memory_size(512 << 20), "512M");
    }

    #[test]
    fn branch_is_the_bad_revision_unless_it_is_a_sha() {
        assert_eq!(branch_of("master").as_deref(), Some("master"));
        assert_eq!(branch_of("v6.8-rc1").as_deref(), Some("v6.8-rc1"));
        assert_eq!(branch_of("bfd53afc"), None);
    }

    #[test]
    fn job_parameters_come_from_the_spec() {
        let spec = serde_json::json!({
            "testcase": "fio-basic", "tbox_group": "lkp", "compiler": "gcc-14",
            "params": {"bs": "4k", "nr_task": 8},
            "build": {"command": "make"}, "run": {"command": "fio"}
        });
        let job = job_of(&spec, "fio-basic");
        assert_eq!(job.compiler.as_deref(), Some("gcc-14"));
        assert_eq!(job.tbox_group.as_deref(), Some("lkp"));
        assert_eq!(
            job.parameters,
            [("bs".into(), "4k".into()), ("nr_task".into(), "8".into())]
        );
    }
}
