//! Submitting a bisect: validation, the job spec's row, the mirror brought up to date, the
//! range resolved and the candidate set stored, then the first advance. What `POST
//! /api/v1/bisects` does, and what a watch does when a change opens a bisect.

use crate::error::{ApiError, ApiResult};
use crate::git::{self, RangeError};
use crate::state::AppState;
use perfbisect_wire::api::SubmitBisect;
use perfbisect_wire::states::{BisectStatus, RepoState};
use perfbisect_wire::{JobSpec, JobSpecError};

/// Metric names listed in a refusal, at most.
const NAMES_SHOWN: usize = 20;

fn valid_metric(s: &str) -> bool {
    !s.is_empty() && s.len() <= 200 && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Checks everything that needs no database, and parses the job spec.
fn validate(req: &SubmitBisect) -> ApiResult<JobSpec> {
    if req.repository.trim().is_empty() {
        return Err(ApiError::bad(
            "repository",
            "must name a registered repository",
        ));
    }
    if req.good.trim().is_empty() {
        return Err(ApiError::bad(
            "good",
            "must be a revision (sha, branch or tag)",
        ));
    }
    if req.bad.trim().is_empty() {
        return Err(ApiError::bad(
            "bad",
            "must be a revision (sha, branch or tag)",
        ));
    }
    if !valid_metric(&req.metric) {
        return Err(ApiError::bad(
            "metric",
            "must be a metric name such as `fio.write_iops` (no spaces)",
        ));
    }
    if let Some(d) = &req.direction
        && d != "increase"
        && d != "decrease"
    {
        return Err(ApiError::bad(
            "direction",
            format!("`{d}` is not `increase` or `decrease`"),
        ));
    }
    if let Some(m) = req.magnitude_pct
        && !(m.is_finite() && m > 0.0 && m < 10_000.0)
    {
        return Err(ApiError::bad(
            "magnitude_pct",
            "must be a positive percentage",
        ));
    }
    if let Some(c) = req.confidence
        && !(0.5..=0.9999).contains(&c)
    {
        return Err(ApiError::bad(
            "confidence",
            "must be between 0.5 and 0.9999",
        ));
    }
    if let Some(m) = req.max_runs
        && !(2..=1_000_000).contains(&m)
    {
        return Err(ApiError::bad("max_runs", "must be between 2 and 1000000"));
    }
    if req.notify.len() > crate::mail_policy::MAX_RECIPIENTS {
        return Err(ApiError::unprocessable(
            "notify",
            format!(
                "at most {} addresses (use a mailing list for more)",
                crate::mail_policy::MAX_RECIPIENTS
            ),
        ));
    }
    for (i, addr) in req.notify.iter().enumerate() {
        if addr.len() > crate::mail_policy::MAX_ADDRESS_LEN {
            return Err(ApiError::unprocessable(
                &format!("notify[{i}]"),
                format!(
                    "longer than {} characters",
                    crate::mail_policy::MAX_ADDRESS_LEN
                ),
            ));
        }
        let ok = addr
            .split_once('@')
            .is_some_and(|(l, d)| !l.is_empty() && d.contains('.') && !addr.contains(' '));
        if !ok {
            return Err(ApiError::bad(
                &format!("notify[{i}]"),
                format!("`{addr}` is not an email address"),
            ));
        }
    }
    JobSpec::from_yaml(&req.job).map_err(|e| match &e {
        JobSpecError::Syntax(_) => ApiError::bad("job", e.to_string()),
        JobSpecError::Invalid { key, .. } => ApiError::bad(&format!("job.{key}"), e.to_string()),
    })
}

/// Validates, resolves and stores a bisect, then advances it once: what `POST
/// /api/v1/bisects` does, also called by watches when a change opens a bisect.
pub async fn submit(
    state: &AppState,
    submitted_by: Option<i64>,
    req: &SubmitBisect,
) -> ApiResult<i64> {
    let spec = validate(req)?;
    check_kconfig(state, &spec).await?;
    check_metric(state, &spec.hash(), &req.metric).await?;
    let repo = crate::store::repositories::by_name(&state.db, &req.repository).await?;
    let repo = repo.ok_or_else(|| {
        ApiError::unprocessable(
            "repository",
            format!("no repository named `{}` is registered", req.repository),
        )
    })?;
    let (repo_id, url, repo_state, fetch_error, requested) = (
        repo.id,
        repo.url,
        repo.state,
        repo.fetch_error,
        repo.fetch_requested,
    );
    // A repository registered under an older, looser policy is not fetched again.
    state
        .mirrors
        .check_url_for_request(&url, "repository")
        .await?;
    let phase = std::time::Instant::now();
    let resolution = match repo_state {
        RepoState::Failed => {
            return Err(ApiError::unprocessable(
                "repository",
                format!(
                    "repository `{}` could not be mirrored ({}); register it again once the \
                     remote or the credentials are fixed",
                    req.repository,
                    fetch_error.as_deref().unwrap_or("no error recorded")
                ),
            ));
        }
        // Its first fetch is under way: the bisect waits for it.
        RepoState::Mirroring => crate::fetcher::Resolution::Waiting,
        RepoState::Ready => {
            crate::fetcher::resolve_for_submit(
                state,
                repo_id,
                &url,
                &req.good,
                &req.bad,
                req.use_merge_base,
            )
            .await
        }
    };
    let range = match resolution {
        crate::fetcher::Resolution::Range(range) => range,
        crate::fetcher::Resolution::Waiting => {
            let generation = if repo_state == RepoState::Mirroring {
                requested
            } else {
                crate::store::fetches::request(&state.db, repo_id).await?
            };
            let id = store_waiting(state, submitted_by, req, &spec, repo_id, generation).await?;
            crate::fetcher::spawn(state, repo_id, generation);
            return Ok(id);
        }
    };
    tracing::info!(
        range_ms = phase.elapsed().as_millis() as u64,
        "submit: range resolved"
    );
    let (range, details) = range.map_err(|e| match &e {
        RangeError::UnknownRevision { field, .. } => ApiError::unprocessable(field, e.to_string()),
        RangeError::Unrelated { .. } | RangeError::NotAncestor { .. } => {
            ApiError::unprocessable("good", e.to_string())
        }
        RangeError::Empty { .. } => ApiError::unprocessable("bad", e.to_string()),
        RangeError::Git(_) => ApiError::unprocessable("repository", e.to_string()),
    })?;

    // The graph is built while the range is in memory (on another core, while the
    // candidates are stored), so the first advance need not read the candidates back.
    let graph = {
        let good = range.good.clone();
        let candidates: Vec<(String, Vec<usize>, bool)> = range
            .candidates
            .iter()
            .map(|c| (c.sha.clone(), c.parents.clone(), c.first_parent_outside))
            .collect();
        tokio::task::spawn_blocking(move || {
            let built = std::time::Instant::now();
            crate::graphs::LoadedGraph::build(good, candidates)
                .map(|g| (g, built.elapsed().as_millis() as u64))
        })
    };
    // The subjects and authors are read once the submit has answered (`details`), unless
    // the walk read them already.
    let fill = match details {
        git::Details::Read => None,
        git::Details::Pending { commits, .. } => {
            let good =
                git2::Oid::from_str(&range.good).map_err(|e| ApiError::Internal(e.into()))?;
            Some(std::iter::once(good).chain(commits).collect::<Vec<_>>())
        }
    };
    let job_id = ensure_job(state, req, &spec).await?;
    let mut tx = state.db.begin().await?;
    let id = insert_bisect(
        &mut tx,
        req,
        repo_id,
        job_id,
        submitted_by,
        Ok((&range, fill.is_some())),
        crate::budget::initial(req.max_runs, state.max_runs_ceiling),
    )
    .await?;
    let stored = std::time::Instant::now();
    crate::store::candidates::insert(&mut tx, id, &range).await?;
    if fill.is_none() {
        crate::store::details::insert(&mut tx, id, &range).await?;
    }
    let story = crate::fetcher::submitted_story(&range, &req.good, &req.bad);
    crate::store::events::record(&mut *tx, id, "submitted", &story).await?;
    // Committed with the bisect: should the first advance below fail, the scheduler retries.
    crate::store::wakeups::wake(&mut *tx, id, crate::store::wakeups::Reason::Submitted).await?;
    crate::store::wakeups::wake_group_queued(&mut *tx, &spec.tbox_group, id).await?;
    tx.commit().await?;
    // Without it (it cannot fail for a walked range), the advance reads the graph back.
    let graph_ms = match graph.await {
        Ok(Ok((graph, ms))) => {
            state.graphs.insert(id, std::sync::Arc::new(graph));
            ms
        }
        Ok(Err(e)) => {
            tracing::error!(bisect = id, error = ?e, "candidate graph");
            0
        }
        Err(e) => {
            tracing::error!(bisect = id, error = ?e, "candidate graph");
            0
        }
    };
    tracing::info!(
        bisect = id,
        candidates = range.candidates.len(),
        "bisect submitted"
    );
    let advanced = std::time::Instant::now();
    if let Err(e) = crate::scheduler::advance(state, id).await {
        tracing::error!(bisect = id, error = ?e, "first advance");
    }
    tracing::info!(
        bisect = id,
        total_ms = phase.elapsed().as_millis() as u64,
        graph_ms,
        store_ms = (advanced - stored).as_millis() as u64,
        first_advance_ms = advanced.elapsed().as_millis() as u64,
        "submit: timings"
    );
    if let Some(commits) = fill {
        crate::details::spawn(state, id, commits);
    }
    Ok(id)
}

/// The job spec's row. Outside the bisect's transaction, and without taking the row when it
/// exists: submits of the same job do not queue behind each other.
async fn ensure_job(state: &AppState, req: &SubmitBisect, spec: &JobSpec) -> ApiResult<i64> {
    Ok(crate::store::jobs::ensure(
        &state.db,
        &spec.hash(),
        &serde_json::to_value(spec).map_err(anyhow::Error::from)?,
        &req.job,
        &spec.testcase,
        &spec.tbox_group,
    )
    .await?)
}

/// The bisect's row: with its resolved range (`queued`; and whether its details are still
/// to be read), or waiting for the fetch of a generation (`fetching`, its shas empty until
/// resolved).
async fn insert_bisect(
    tx: &mut sqlx::PgConnection,
    req: &SubmitBisect,
    repo_id: i64,
    job_id: i64,
    submitted_by: Option<i64>,
    range: Result<(&git::Range, bool), i64>,
    max_runs: u32,
) -> sqlx::Result<i64> {
    let (good, bad, candidates, generation, status, details_missing) = match range {
        Ok((r, missing)) => (
            r.good.as_str(),
            r.bad.as_str(),
            Some(r.candidates.len() as i32),
            None,
            BisectStatus::Queued,
            missing,
        ),
        Err(generation) => (
            "",
            "",
            None,
            Some(generation),
            BisectStatus::Fetching,
            false,
        ),
    };
    crate::store::bisects::insert(
        tx,
        &crate::store::bisects::NewBisect {
            repository_id: repo_id,
            job_spec_id: job_id,
            good_rev: &req.good,
            bad_rev: &req.bad,
            good_sha: good,
            bad_sha: bad,
            metric: &req.metric,
            direction: req.direction.as_deref(),
            magnitude_pct: req.magnitude_pct,
            confidence: req.confidence.unwrap_or(0.99),
            max_runs: max_runs as i32,
            notify: serde_json::json!(req.notify),
            submitted_by,
            first_parent: req.first_parent,
            candidates_total: candidates,
            use_merge_base: req.use_merge_base,
            fetch_generation: generation,
            status,
            details_missing,
        },
    )
    .await
}

/// Stores a bisect that waits for its repository's fetch (`fetching`, no range yet): the
/// fetch job resolves it (`fetcher`).
async fn store_waiting(
    state: &AppState,
    submitted_by: Option<i64>,
    req: &SubmitBisect,
    spec: &JobSpec,
    repo_id: i64,
    generation: i64,
) -> ApiResult<i64> {
    let job_id = ensure_job(state, req, spec).await?;
    let mut tx = state.db.begin().await?;
    let id = insert_bisect(
        &mut tx,
        req,
        repo_id,
        job_id,
        submitted_by,
        Err(generation),
        crate::budget::initial(req.max_runs, state.max_runs_ceiling),
    )
    .await?;
    crate::store::events::record(
        &mut *tx,
        id,
        "fetching",
        &format!(
            "Waiting for the repository's fetch; the range {}..{} is resolved once it is done.",
            req.good, req.bad
        ),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(
        bisect = id,
        repository = repo_id,
        generation,
        "bisect waits for a fetch"
    );
    Ok(id)
}

/// Refuses a job whose `kconfig` is not stored: a worker could not build it.
pub async fn check_kconfig(state: &AppState, spec: &JobSpec) -> ApiResult<()> {
    if spec.build.kind != perfbisect_wire::BuildKind::Kernel {
        return Ok(());
    }
    let Some(name) = &spec.kconfig else {
        return Ok(());
    };
    let known = crate::store::kconfigs::exists(&state.db, name).await?;
    if known {
        Ok(())
    } else {
        Err(ApiError::unprocessable(
            "job.kconfig",
            format!(
                "no kconfig named `{name}` is stored; upload it with PUT /api/v1/kconfigs/{name}"
            ),
        ))
    }
}

/// Refuses `metric` when runs of this job are stored and none of them produced it.
async fn check_metric(state: &AppState, job_hash: &str, metric: &str) -> ApiResult<()> {
    let names = crate::store::jobs::metric_names(&state.db, job_hash).await?;
    if names.is_empty() || names.iter().any(|n| n == metric) {
        return Ok(());
    }
    let shown: Vec<&str> = names.iter().take(NAMES_SHOWN).map(String::as_str).collect();
    Err(ApiError::unprocessable(
        "metric",
        format!(
            "earlier runs of this job never produced `{metric}`; they produced {}{}",
            shown.join(", "),
            if names.len() > NAMES_SHOWN {
                ", …"
            } else {
                ""
            }
        ),
    ))
}
