//! Drives bisects: rebuilds the engine's evidence from stored runs, asks the engine what to
//! do, and turns its decision into queued tasks or a final status.
//!
//! Invariant: a bisect is only advanced inside a transaction holding its advisory lock
//! (`pg_try_advisory_xact_lock(bisect_id)`), so replicas and loops never queue the same work
//! twice. The bisect's row is not locked for the advance: run and task inserts (whose foreign
//! keys take `FOR KEY SHARE` on it) never wait for a decision. Advances are caused by
//! wake-ups (`store::wakeups`) and run by `dispatch`, never on the path of an upload.

use crate::state::AppState;
use crate::store::allocation::LIVE_HOST_WINDOW_SECS;
use crate::store::{self, allocation, events, wakeups};
use perfbisect_engine::{
    Decision, Direction, Evidence, Explained, Outcome, Phase, Point, Settings, decide_explained,
};
use perfbisect_wire::states::{BisectStatus, TaskState};
use std::collections::HashMap;
use std::sync::Arc;

/// Folds every stored run and task of the bisect into the engine's evidence; with it, how
/// many runs were read.
async fn load_evidence(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
    metric: &str,
    points: &HashMap<String, Point>,
) -> anyhow::Result<(Evidence, usize)> {
    // (task, sha, completed, value, start, host) in upload order within each task.
    let runs = store::runs::samples(&mut *tx, bisect, metric).await?;
    let read = runs.len();
    let tasks = store::tasks::for_evidence(&mut *tx, bisect).await?;
    Ok((fold_evidence(runs, tasks, points), read))
}

/// The engine's evidence from the bisect's runs (in upload order within each task) and its
/// tasks (oldest first). Pure, so what each stored field means to the engine is tested
/// without a database.
fn fold_evidence(
    runs: Vec<store::runs::Sample>,
    tasks: Vec<store::tasks::ForEvidence>,
    points: &HashMap<String, Point>,
) -> Evidence {
    let mut evidence = Evidence::default();
    let mut per_task: HashMap<i64, Vec<(Point, Option<f64>)>> = HashMap::new();
    for store::runs::Sample {
        task_id: task,
        sha,
        completed,
        value,
        at,
        host_id: host,
        since_deploy,
    } in runs
    {
        let Some(point) = points.get(&sha).copied() else {
            continue;
        };
        let sample = value.filter(|v| completed && v.is_finite());
        let in_task = per_task.entry(task).or_default();
        // How soon after its deployment the run came: the first runs after a kernel boots
        // or a binary is installed are often off. The runner says so where it deploys (a
        // VM a run, a boot per commit of a couple); otherwise it is the run's place among
        // the task's runs of this commit (`PERFBISECT_RUN`), failed runs included (they
        // warmed the host all the same).
        let in_task_seq = in_task.iter().filter(|(p, _)| *p == point).count() as u32;
        let seq = since_deploy.map_or(in_task_seq, |s| s.clamp(0, u32::MAX as i64) as u32);
        in_task.push((point, sample));
        match sample {
            Some(v) => {
                evidence.samples.entry(point).or_default().push(v);
                // When, where and how soon after its deployment, so the engine can tell host
                // drift, a host's own level and a cold start from a change.
                let taken = perfbisect_engine::Taken { at, host, seq };
                evidence.taken.entry(point).or_default().push(taken);
            }
            None => *evidence.failed.entry(point).or_default() += 1,
        }
    }
    for store::tasks::ForEvidence {
        id: task,
        sha,
        pair_sha,
        state,
        runs,
        failed_sha,
    } in tasks
    {
        let Some(&point) = points.get(&sha) else {
            continue;
        };
        let pair = pair_sha.as_ref().and_then(|p| points.get(p)).copied();
        let done = per_task.get(&task).map(Vec::as_slice).unwrap_or_default();
        if let Some(pair) = pair {
            // Interleaved couples: the i-th complete run of each side, in run order.
            let a: Vec<Option<f64>> = done
                .iter()
                .filter(|(p, _)| *p == point)
                .map(|(_, v)| *v)
                .collect();
            let b: Vec<Option<f64>> = done
                .iter()
                .filter(|(p, _)| *p == pair)
                .map(|(_, v)| *v)
                .collect();
            let couples: Vec<(f64, f64)> = a
                .iter()
                .zip(&b)
                .filter_map(|(x, y)| Some(((*x)?, (*y)?)))
                .collect();
            if !couples.is_empty() {
                evidence
                    .pairs
                    .entry((point, pair))
                    .or_default()
                    .extend(couples);
            }
        }
        match state {
            TaskState::Queued | TaskState::Running => {
                for p in std::iter::once(point).chain(pair) {
                    let uploaded = done.iter().filter(|(q, _)| *q == p).count() as i64;
                    let left = (runs as i64 - uploaded).max(0) as u32;
                    if left > 0 {
                        *evidence.pending.entry(p).or_default() += left;
                    }
                }
            }
            TaskState::BuildFailed => {
                let failed = failed_sha
                    .as_ref()
                    .and_then(|f| points.get(f))
                    .copied()
                    .unwrap_or(point);
                if let Point::Candidate(i) = failed {
                    evidence.untestable.insert(i);
                }
            }
            _ => {}
        }
    }
    evidence
}

/// Moves one bisect forward as far as the stored evidence allows, waiting for an advance of
/// it in progress elsewhere to end first.
pub async fn advance(state: &AppState, bisect: i64) -> anyhow::Result<()> {
    run_advance(state, bisect, true).await.map(|_| ())
}

/// Like `advance`, but returns `Ok(false)` at once when another advance of the bisect holds
/// its lock (that one, or the next, answers the wake-ups).
pub async fn try_advance(state: &AppState, bisect: i64) -> anyhow::Result<bool> {
    run_advance(state, bisect, false).await
}

/// How many times an advance decides again when runs were stored while it was ending the
/// bisect. Each try cancels the open tasks before it counts, so a second try only sees a run
/// that raced the first one's cancellation; three is generous.
const ENDING_TRIES: u32 = 3;

async fn run_advance(state: &AppState, bisect: i64, wait: bool) -> anyhow::Result<bool> {
    for last in (1..=ENDING_TRIES).rev() {
        match advance_once(state, bisect, wait, last == 1).await? {
            Some(ran) => return Ok(ran),
            None => tracing::info!(
                bisect,
                "runs were stored while the bisect ended; deciding again"
            ),
        }
    }
    unreachable!("the last try always answers")
}

/// The engine's decision, on a blocking thread: for a large range it is tens of milliseconds
/// of CPU, which on one of the runtime's threads would hold up the requests queued behind it.
/// The evidence comes back with the answer. The engine is pure and synchronous; a panic in
/// it must fail this bisect, not the server.
async fn decide_apart(
    loaded: &Arc<crate::graphs::LoadedGraph>,
    evidence: Evidence,
    settings: Settings,
) -> anyhow::Result<(Evidence, std::thread::Result<Explained>)> {
    let loaded = loaded.clone();
    Ok(tokio::task::spawn_blocking(move || {
        let decided =
            std::panic::catch_unwind(|| decide_explained(&loaded.graph, &evidence, &settings));
        (evidence, decided)
    })
    .await?)
}

/// One advance in one transaction. `None`: the engine ended the bisect on evidence that runs
/// stored meanwhile made stale, so nothing was committed (unless `last`).
async fn advance_once(
    state: &AppState,
    bisect: i64,
    wait: bool,
    last: bool,
) -> anyhow::Result<Option<bool>> {
    let mut stages = Stages::new();
    let mut tx = state.db.begin().await?;
    if wait {
        wakeups::lock_bisect(&mut tx, bisect).await?;
    } else if !wakeups::try_lock_bisect(&mut tx, bisect).await? {
        return Ok(Some(false));
    }
    // Before any evidence is read: what these wake-ups announced is visible from here on.
    wakeups::consume(&mut tx, bisect).await?;
    let row = store::bisects::for_advance(&mut tx, bisect).await?;
    let Some(row) = row else {
        tx.commit().await?;
        return Ok(Some(true));
    };
    if row.status.is_final() {
        state.graphs.forget(bisect);
        // `finish` woke it once more for this: the change over every run, with the culprit.
        crate::change::refresh(&mut tx, bisect, &state.mail.report.kpi_table()).await?;
        tx.commit().await?;
        return Ok(Some(true));
    }
    // Waiting for its repository's fetch: no range yet (`fetcher` resolves and wakes it).
    if row.status == BisectStatus::Fetching {
        tx.commit().await?;
        return Ok(Some(true));
    }

    // A task that failed on every attempt (not the commit's fault) stops the bisect: its
    // evidence is missing and guessing around it would be dishonest.
    let lost = store::tasks::first_lost(&mut tx, bisect).await?;
    if let Some(store::tasks::Lost {
        id: task,
        sha,
        message,
    }) = lost
    {
        let reason = format!(
            "A task could not be completed, so the bisect stopped (task {task} for commit {} \
             failed on every attempt; this says nothing about the commit).\n{}",
            &sha[..12.min(sha.len())],
            message.unwrap_or_default()
        );
        finish(&mut tx, bisect, BisectStatus::Failed, &reason, None).await?;
        tx.commit().await?;
        state.graphs.forget(bisect);
        return Ok(Some(true));
    }

    stages.mark("begin");
    // This bisect's share of its group's live hosts (`allocator`), less what it has out.
    // Work queued when its share was larger (before other bisects joined the group) and not
    // started yet is handed back first, so no bisect keeps more than its share queued; the
    // evidence below no longer counts it as pending.
    let load = allocation::group_load(&mut tx, &row.tbox_group, LIVE_HOST_WINDOW_SECS).await?;
    let share = crate::allocator::share(
        load.live_hosts,
        &load.bisects,
        bisect,
        state.max_hosts_per_bisect,
    );
    let mut outstanding = allocation::outstanding(&mut *tx, bisect).await?;
    if outstanding > share as i64 {
        let handed = allocation::trim_queued(&mut *tx, bisect, outstanding - share as i64).await?;
        outstanding -= handed as i64;
    }
    let idle = share as i64 - outstanding;
    stages.mark("share");
    let loaded = state.graphs.get(&mut *tx, bisect).await?;
    let (graph, points) = (&loaded.graph, &loaded.points);
    stages.mark("graph");
    let (mut evidence, evidence_runs) = load_evidence(&mut tx, bisect, &row.metric, points).await?;
    evidence.costs = crate::findings::measured_costs(&mut tx, row.job_spec_id).await?;
    evidence.built = crate::findings::built_points(&mut tx, bisect, points).await?;
    // Nothing can be decided about a range whose endpoints cannot be built.
    let bad_sha = graph.id(graph.bad()).to_string();
    let broken_end =
        store::tasks::broken_endpoint(&mut tx, bisect, &row.good_sha, &bad_sha).await?;
    if let Some((sha, log)) = broken_end {
        let which = if sha == row.good_sha { "good" } else { "bad" };
        let reason = format!(
            "The {which} endpoint {} does not build with this job, so there is nothing to \
             compare.\nbuild log ends:\n{}",
            &sha[..12],
            log.unwrap_or_default()
        );
        finish(&mut tx, bisect, BisectStatus::Failed, &reason, None).await?;
        tx.commit().await?;
        state.graphs.forget(bisect);
        return Ok(Some(true));
    }
    let mut settings = Settings {
        confidence: row.confidence,
        runs_per_request: row.runs_per_task.max(1) as u32,
        max_runs: row.max_runs.max(1) as u32,
        direction: match row.direction.as_deref() {
            Some("increase") => Some(Direction::Increase),
            Some("decrease") => Some(Direction::Decrease),
            _ => None,
        },
        magnitude: row.magnitude_pct.map(|p| p / 100.0),
        idle_hosts: idle.max(1) as u32,
        first_parent: row.first_parent,
        // A budget set below its cap: the engine still weighs what the cap allows.
        ceiling: row.budget_cap.map(|c| c.max(1) as u32),
        ..Settings::default()
    };
    stages.mark("evidence");
    let used = evidence.runs_spent() + evidence.runs_pending();
    let mut decided;
    (evidence, decided) = decide_apart(&loaded, evidence, settings.clone()).await?;
    // A bisect that just ran out of its budget may finish when what is left is small beside
    // what it used (the engine's budget rule): the engine decides again under the new one.
    if let Ok(e) = &decided
        && matches!(e.decision, Decision::Done(Outcome::Inconclusive { .. }))
        && used >= settings.max_runs
    {
        let findings = crate::findings::to_wire(graph, &e.findings, evidence.costs);
        if let Some(runs) = crate::budget::settle(&mut tx, bisect, &findings, used).await? {
            settings.max_runs = runs;
            (evidence, decided) = decide_apart(&loaded, evidence, settings.clone()).await?;
        }
    }
    stages.mark("decide");
    let prediction;
    let (decision, assessments) = match decided {
        Ok(e) => {
            let mut findings = crate::findings::to_wire(graph, &e.findings, evidence.costs);
            crate::budget::carry_prediction(&mut tx, bisect, &mut findings).await?;
            crate::findings::store(&mut tx, bisect, &findings).await?;
            if !matches!(e.decision, Decision::Done(_)) {
                crate::budget::settle(&mut tx, bisect, &findings, used).await?;
            }
            prediction = findings.prediction;
            (e.decision, e.assessments)
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            finish(
                &mut tx,
                bisect,
                BisectStatus::Failed,
                &format!("the engine failed: {what}"),
                None,
            )
            .await?;
            tx.commit().await?;
            state.graphs.forget(bisect);
            return Ok(Some(true));
        }
    };
    stages.mark("findings");
    crate::assessing::store_round(
        &mut tx,
        bisect,
        &loaded,
        row.assessed_round,
        &evidence,
        &assessments,
        row.confidence,
    )
    .await?;
    stages.mark("assessments");
    let over = matches!(decision, Decision::Done(_));
    match decision {
        Decision::Measure {
            phase,
            requests,
            why,
        } => {
            if idle > 0 {
                let mut queued = 0;
                let sha_of = |p: Point| match p {
                    Point::Good => row.good_sha.clone(),
                    Point::Candidate(i) => graph.id(i).to_string(),
                };
                for req in requests.iter().take(idle as usize) {
                    let sha = sha_of(req.point);
                    let pair_sha = req.pair_with.map(sha_of);
                    store::tasks::queue(
                        &mut tx,
                        &store::tasks::NewTask {
                            bisect,
                            sha: &sha,
                            pair_sha: pair_sha.as_deref(),
                            job_spec_id: row.job_spec_id,
                            host_group: &row.tbox_group,
                            runs: req.runs.max(1) as i32,
                            phase: task_phase(phase),
                            fresh_deploy: req.fresh_deploy,
                        },
                    )
                    .await?;
                    // A sentence first; the engine's reasoning folded below it (after a newline).
                    let fresh = if req.fresh_deploy {
                        " on a deployment of its own (a new boot where the runner keeps one)"
                    } else {
                        ""
                    };
                    let what = match (&pair_sha, phase) {
                        (Some(p), Phase::Reproducing) => format!(
                            "Checking that the change reproduces: {} runs of {} interleaved with \
                             {} on one host.",
                            req.runs,
                            &sha[..12],
                            &p[..12]
                        ),
                        (Some(p), _) => format!(
                            "Verifying: {} runs of {} interleaved with {} on one host.",
                            req.runs,
                            &sha[..12],
                            &p[..12]
                        ),
                        (None, Phase::Reproducing) => format!(
                            "Checking that the change reproduces: {} runs of {}{fresh}.",
                            req.runs,
                            &sha[..12]
                        ),
                        (None, _) => {
                            format!("Measuring {} runs of {}{fresh}.", req.runs, &sha[..12])
                        }
                    };
                    events::record(&mut *tx, bisect, "measure", &format!("{what}\n{why}")).await?;
                    queued += 1;
                }
                if queued > 0 {
                    crate::queue::notify_queued_in(&mut *tx, &row.tbox_group, queued).await?;
                }
            }
            set_phase(&mut tx, bisect, phase, Some(&why)).await?;
        }
        Decision::Wait { phase } => set_phase(&mut tx, bisect, phase, None).await?,
        Decision::Done(Outcome::Found {
            culprit,
            confidence,
        }) => {
            let sha = graph.id(culprit).to_string();
            let reason = format!(
                "The culprit is {} (probability {confidence:.4}).",
                &sha[..12]
            );
            finish(
                &mut tx,
                bisect,
                BisectStatus::Found,
                &reason,
                Some((&sha, confidence)),
            )
            .await?;
        }
        Decision::Done(Outcome::NotReproduced { reason }) => {
            let reason = format!("The change did not reproduce between the endpoints.\n{reason}");
            finish(&mut tx, bisect, BisectStatus::NotReproduced, &reason, None).await?;
        }
        Decision::Done(Outcome::Changes {
            changes,
            settled,
            reason,
        }) => {
            let views = crate::findings::to_wire(
                graph,
                &perfbisect_engine::Findings {
                    changes: changes.clone(),
                    ..Default::default()
                },
                Default::default(),
            )
            .changes;
            let list = crate::findings::describe_changes(&views);
            let first = changes
                .iter()
                .find_map(|c| c.culprit.map(|k| (k, c.probability)));
            match (settled, first) {
                (true, Some((k, p))) => {
                    let sha = graph.id(k).to_string();
                    let reason = format!(
                        "The range holds {} changes: {list}.\n{reason}",
                        changes.len()
                    );
                    finish(
                        &mut tx,
                        bisect,
                        BisectStatus::Found,
                        &reason,
                        Some((&sha, p)),
                    )
                    .await?;
                }
                _ => {
                    let reason =
                        format!("More than one change, not yet told apart: {list}.\n{reason}");
                    finish(&mut tx, bisect, BisectStatus::Inconclusive, &reason, None).await?;
                }
            }
        }
        Decision::Done(Outcome::Inconclusive { reason, candidates }) => {
            let best: Vec<String> = candidates
                .iter()
                .take(5)
                .map(|(i, p)| format!("{} ({:.1}%)", &graph.id(*i)[..12], p * 100.0))
                .collect();
            // Ran out of budget (rather than, say, an unbuildable bad commit): say so.
            let ran_out = evidence.runs_spent() >= settings.max_runs;
            let first = crate::budget::inconclusive_sentence(
                candidates.len(),
                candidates.iter().map(|c| c.1).sum(),
                ran_out.then_some(settings.max_runs),
                prediction.as_ref().filter(|_| ran_out),
                (!ran_out).then_some(reason.as_str()),
            );
            let reason = format!("{first}\n{reason}; best candidates: {}", best.join(", "));
            finish(&mut tx, bisect, BisectStatus::Inconclusive, &reason, None).await?;
        }
    }
    // An upload that began before `finish` cancelled the open tasks stored its run after the
    // evidence was read (the cancellation waited for it): the findings and the verdict would
    // not be those of the runs the bisect shows (a report's change of +2.07% above a table
    // whose means say +1.97%). The cancellation has locked every open task, so the count is
    // final; decide again on the whole evidence.
    if over && !last && store::runs::count(&mut *tx, bisect).await? != evidence_runs as i64 {
        tx.rollback().await?;
        return Ok(None);
    }
    stages.mark("queue");
    crate::change::refresh(&mut tx, bisect, &state.mail.report.kpi_table()).await?;
    stages.mark("change");
    tx.commit().await?;
    stages.mark("commit");
    tracing::debug!(bisect, stages = %stages, "advance stages");
    if over {
        state.graphs.forget(bisect);
    }
    Ok(Some(true))
}

/// The phase a task is queued in for the engine's phase.
/// Where an advance's time went, stage by stage (logged at debug level): the scheduling
/// round of a large range is a target of its own (`perfbisect loadtest`).
struct Stages {
    last: std::time::Instant,
    took: Vec<(&'static str, std::time::Duration)>,
}

impl Stages {
    fn new() -> Self {
        Stages {
            last: std::time::Instant::now(),
            took: Vec::new(),
        }
    }

    /// The stage `name` ended now.
    fn mark(&mut self, name: &'static str) {
        let now = std::time::Instant::now();
        self.took.push((name, now - self.last));
        self.last = now;
    }
}

impl std::fmt::Display for Stages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (name, took)) in self.took.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}{name}={:.1}ms", took.as_secs_f64() * 1000.0)?;
        }
        Ok(())
    }
}

fn task_phase(phase: Phase) -> perfbisect_wire::states::Phase {
    use perfbisect_wire::states::Phase as Task;
    match phase {
        Phase::Reproducing => Task::Reproducing,
        Phase::Searching => Task::Searching,
        Phase::Verifying => Task::Verifying,
    }
}

/// The bisect's status while the engine is in `phase`.
fn phase_status(phase: Phase) -> BisectStatus {
    match phase {
        Phase::Reproducing => BisectStatus::Reproducing,
        Phase::Searching => BisectStatus::Searching,
        Phase::Verifying => BisectStatus::Verifying,
    }
}

async fn set_phase(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
    phase: Phase,
    why: Option<&str>,
) -> sqlx::Result<()> {
    store::bisects::set_phase(tx, bisect, phase_status(phase), why).await
}

/// Ends the bisect: final status, reason, culprit, and no more work for it.
pub async fn finish(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
    status: BisectStatus,
    reason: &str,
    culprit: Option<(&str, f64)>,
) -> sqlx::Result<()> {
    store::bisects::finish(&mut *tx, bisect, status, reason, culprit).await?;
    store::tasks::cancel_open(&mut *tx, bisect).await?;
    events::record(&mut *tx, bisect, status.as_str(), reason).await?;
    // The hosts it held are shared among the group's other bisects now.
    wakeups::wake_group_of(&mut *tx, bisect, wakeups::Reason::ShareChanged).await?;
    // Its own last advance stores its final change (readers compute it until then).
    wakeups::wake(&mut *tx, bisect, wakeups::Reason::Ended).await?;
    // The outcome and its mail commit together (the transactional outbox).
    crate::notify::outbox::enqueue(&mut *tx, bisect, status.as_str()).await?;
    tracing::info!(bisect, %status, reason, "bisect finished");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::runs::Sample;
    use store::tasks::ForEvidence;

    fn run(task: i64, sha: &str, value: f64, since_deploy: Option<i64>) -> Sample {
        Sample {
            task_id: task,
            sha: sha.into(),
            completed: true,
            value: Some(value),
            at: 0.0,
            host_id: 1,
            since_deploy,
        }
    }

    fn done(id: i64, sha: &str, pair: Option<&str>, runs: i32) -> ForEvidence {
        ForEvidence {
            id,
            sha: sha.into(),
            pair_sha: pair.map(str::to_string),
            state: TaskState::Done,
            runs,
            failed_sha: None,
        }
    }

    fn seqs(evidence: &Evidence, point: Point) -> Vec<u32> {
        evidence.taken[&point].iter().map(|t| t.seq).collect()
    }

    #[test]
    fn a_run_s_distance_from_its_deployment_is_the_runner_s_where_it_says_so() {
        let points = HashMap::from([
            ("g".to_string(), Point::Good),
            ("b".into(), Point::Candidate(9)),
        ]);
        // A local runner (nothing deployed): the runs' places in their task, per commit.
        let local = vec![
            run(1, "g", 10.0, None),
            run(1, "g", 10.1, None),
            run(1, "g", 10.2, None),
            run(2, "g", 10.3, None),
        ];
        let e = fold_evidence(
            local,
            vec![done(1, "g", None, 3), done(2, "g", None, 1)],
            &points,
        );
        assert_eq!(seqs(&e, Point::Good), [0, 1, 2, 0]);
        // A couple on a host that boots each commit before each of its runs: every run is the
        // first after a deployment, whatever its place in the task.
        let rebooted: Vec<Sample> = (0..6)
            .map(|i| run(3, if i % 2 == 0 { "g" } else { "b" }, 10.0, Some(0)))
            .collect();
        let e = fold_evidence(rebooted, vec![done(3, "g", Some("b"), 3)], &points);
        assert_eq!(seqs(&e, Point::Good), [0, 0, 0]);
        assert_eq!(seqs(&e, Point::Candidate(9)), [0, 0, 0]);
        assert_eq!(e.pairs[&(Point::Good, Point::Candidate(9))].len(), 3);
        // A host that already ran the commit before this task: its runs go on counting.
        let warm = vec![run(4, "b", 11.0, Some(5)), run(4, "b", 11.0, Some(6))];
        let e = fold_evidence(warm, vec![done(4, "b", None, 2)], &points);
        assert_eq!(seqs(&e, Point::Candidate(9)), [5, 6]);
    }
}
