//! One bisect: the page, and its live part, which the page's script fetches again every few
//! seconds while the bisect runs and swaps in place (no reload, one renderer for both).

use super::error::PageError;
use super::format::{self, short_sha};
use super::plot::{self, Cell, Column, Verdict};
use crate::AppState;
use crate::api::load_bisect;
use askama::Template;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, Utc};
use perfbisect_wire::api::{Bisect, status_is_final};
use std::collections::HashMap;

/// How often the page asks for a fresh live part, in milliseconds.
const POLL_MS: u32 = 2000;
/// Most recent lines of the bisect's story shown.
const EVENTS_SHOWN: i64 = 12;
/// Most candidates listed by probability, and the least probability worth listing.
const TOP_SHOWN: usize = 10;
const TOP_MIN_P: f64 = 0.001;

pub struct CommitRow {
    pub sha: String,
    pub short: String,
    pub subject: String,
    pub role: &'static str,
    pub verdict: &'static str,
    pub n: usize,
    pub incomplete: usize,
    pub mean: String,
    pub pct_stddev: String,
    pub p: String,
    pub skip_reason: Option<String>,
    pub culprit: bool,
}

pub struct CandidateRow {
    pub short: String,
    pub subject: String,
    pub p: String,
    /// Width of its bar, in percent of the most likely candidate's.
    pub bar: u32,
}

pub struct CulpritView {
    pub sha: String,
    pub subject: String,
    pub author: String,
    pub confidence: String,
    /// The commit on the repository's web view, where its URL tells us one.
    pub web_url: Option<String>,
}

pub struct EventRow {
    pub at: String,
    pub age: String,
    pub kind: String,
    pub message: String,
}

/// Everything that changes while the bisect runs.
pub struct LiveView {
    pub id: i64,
    pub poll_ms: u32,
    pub is_final: bool,
    pub status: String,
    pub status_label: String,
    pub status_class: &'static str,
    pub reason: Option<String>,
    pub candidates_total: usize,
    pub candidates_remaining: usize,
    pub runs_done: usize,
    pub max_runs: u32,
    pub tasks_pending: usize,
    pub elapsed: String,
    pub updated: String,
    pub culprit: Option<CulpritView>,
    pub range_summary: String,
    pub range_svg: String,
    pub plot_svg: Option<String>,
    pub commits: Vec<CommitRow>,
    pub top: Vec<CandidateRow>,
    pub events: Vec<EventRow>,
}

#[derive(Template)]
#[template(path = "bisect.html")]
struct BisectPage {
    nav: &'static str,
    b: Bisect,
    created: String,
    created_iso: String,
    job_short: String,
    live: LiveView,
}

#[derive(Template)]
#[template(path = "live.html")]
struct LiveFragment {
    live: LiveView,
}

pub async fn page(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Html<String>, PageError> {
    let (b, live) = load(&state, id).await?;
    let page = BisectPage {
        nav: "bisects",
        created: format::age(b.created_at, Utc::now()),
        created_iso: format::iso(b.created_at),
        job_short: short_sha(&b.job_hash).to_string(),
        b,
        live,
    };
    Ok(Html(page.render()?))
}

pub async fn live(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Response, PageError> {
    let (_, live) = load(&state, id).await?;
    let html = LiveFragment { live }.render()?;
    Ok(([(header::CACHE_CONTROL, "no-store")], Html(html)).into_response())
}

/// The bisect as the API sees it (`load_bisect`), plus what only the page needs: every
/// sample, the engine's view of every candidate, the story, the repository's URL.
async fn load(state: &AppState, id: i64) -> Result<(Bisect, LiveView), PageError> {
    let b = load_bisect(state, id).await?;
    let db = &state.db;
    let runs: Vec<(String, f64)> = sqlx::query_as(
        "SELECT sha, (metrics ->> $2)::float8 FROM runs
         WHERE bisect_id = $1 AND completed AND metrics ? $2 ORDER BY id",
    )
    .bind(id)
    .bind(&b.metric)
    .fetch_all(db)
    .await?;
    let repo_url: String = sqlx::query_scalar(
        "SELECT r.url FROM bisects b JOIN repositories r ON r.id = b.repository_id
         WHERE b.id = $1",
    )
    .bind(id)
    .fetch_one(db)
    .await?;
    // Every candidate's verdict, from the incrementally written table.
    let assessments = crate::store::assessments::as_json(db, id).await?;
    let candidates: Vec<String> = sqlx::query_scalar(
        "SELECT sha FROM bisect_commits WHERE bisect_id = $1 AND idx >= 0 ORDER BY idx",
    )
    .bind(id)
    .fetch_all(db)
    .await?;
    let events: Vec<(DateTime<Utc>, String, String)> = sqlx::query_as(
        "SELECT at, kind, message FROM bisect_events WHERE bisect_id = $1 ORDER BY id DESC LIMIT $2",
    )
    .bind(id)
    .bind(EVENTS_SHOWN)
    .fetch_all(db)
    .await?;

    let mut samples: HashMap<&str, Vec<f64>> = HashMap::new();
    for (sha, v) in &runs {
        samples.entry(sha.as_str()).or_default().push(*v);
    }
    // sha → (verdict, culprit probability): the engine's last word on every candidate.
    let assessed: HashMap<&str, (Verdict, Option<f64>)> = assessments
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| {
            let sha = a["sha"].as_str()?;
            let verdict = Verdict::parse(a["verdict"].as_str().unwrap_or(""));
            Some((sha, (verdict, a["p"].as_f64())))
        })
        .collect();
    let culprit_sha = b.culprit.as_ref().map(|c| c.commit.sha.as_str());

    let cells: Vec<Cell> = candidates
        .iter()
        .map(|sha| {
            let (verdict, p) = assessed
                .get(sha.as_str())
                .copied()
                .unwrap_or((Verdict::Undecided, None));
            Cell {
                verdict,
                p,
                measured: samples.contains_key(sha.as_str()),
                culprit: culprit_sha == Some(sha.as_str()),
            }
        })
        .collect();
    let undecided = cells
        .iter()
        .filter(|c| c.verdict == Verdict::Undecided)
        .count();
    let range_summary = format!(
        "{} of {} candidates undecided; {} measured",
        undecided,
        cells.len(),
        cells.iter().filter(|c| c.measured).count()
    );

    let columns: Vec<Column> = b
        .commits
        .iter()
        .filter_map(|c| {
            let values = samples.get(c.sha.as_str())?;
            Some(Column {
                sha: &c.sha,
                subject: &c.subject,
                verdict: Verdict::parse(&c.verdict),
                values,
            })
        })
        .collect();
    let plot_svg = plot::samples_svg(&b.metric, &columns, culprit_sha);

    let commits = b
        .commits
        .iter()
        .map(|c| CommitRow {
            sha: c.sha.clone(),
            short: short_sha(&c.sha).to_string(),
            subject: c.subject.clone(),
            role: match c.role.as_str() {
                "good_endpoint" => "good endpoint",
                "bad_endpoint" => "bad endpoint",
                _ => "",
            },
            verdict: Verdict::parse(&c.verdict).label(),
            n: c.n,
            incomplete: c.incomplete_runs,
            mean: c.mean.map(format::number).unwrap_or_else(|| "-".into()),
            pct_stddev: format::pct_stddev(c.mean, c.stddev),
            p: c.culprit_probability
                .map(format::probability)
                .unwrap_or_default(),
            skip_reason: c.skip_reason.clone(),
            culprit: culprit_sha == Some(c.sha.as_str()),
        })
        .collect();

    let top = top_candidates(state, id, &assessed).await?;
    let now = Utc::now();
    let live = LiveView {
        id,
        poll_ms: POLL_MS,
        is_final: status_is_final(&b.status),
        status_label: format::status_label(&b.status),
        status_class: format::status_class(&b.status),
        status: b.status.clone(),
        reason: b.status_reason.clone(),
        candidates_total: b.candidates_total,
        candidates_remaining: b.candidates_remaining,
        runs_done: b.runs_done,
        max_runs: b.max_runs,
        tasks_pending: b.tasks_pending,
        elapsed: format::duration((b.finished_at.unwrap_or(now) - b.created_at).num_seconds()),
        updated: format::age(b.updated_at, now),
        culprit: b.culprit.as_ref().map(|c| CulpritView {
            web_url: commit_web_url(&repo_url, &c.commit.sha),
            sha: c.commit.sha.clone(),
            subject: c.commit.subject.clone(),
            author: c.commit.author.clone(),
            confidence: format::probability(c.confidence),
        }),
        range_summary,
        range_svg: plot::range_svg(&cells, &format!("{undecided} undecided")),
        plot_svg,
        commits,
        top,
        events: events
            .into_iter()
            .map(|(at, kind, message)| EventRow {
                at: format::iso(at),
                age: format::age(at, now),
                kind,
                message,
            })
            .collect(),
    };
    Ok((b, live))
}

/// The most likely culprits with their subjects, most likely first.
async fn top_candidates(
    state: &AppState,
    id: i64,
    assessed: &HashMap<&str, (Verdict, Option<f64>)>,
) -> Result<Vec<CandidateRow>, PageError> {
    let mut ranked: Vec<(&str, f64)> = assessed
        .iter()
        .filter_map(|(sha, (_, p))| p.filter(|p| *p >= TOP_MIN_P).map(|p| (*sha, p)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    ranked.truncate(TOP_SHOWN);
    if ranked.is_empty() {
        return Ok(Vec::new());
    }
    let shas: Vec<String> = ranked.iter().map(|(s, _)| s.to_string()).collect();
    let subjects: HashMap<String, String> = sqlx::query_as(
        "SELECT sha, subject FROM bisect_commits WHERE bisect_id = $1 AND sha = ANY($2)",
    )
    .bind(id)
    .bind(&shas)
    .fetch_all(&state.db)
    .await?
    .into_iter()
    .collect();
    let best = ranked[0].1;
    Ok(ranked
        .into_iter()
        .map(|(sha, p)| CandidateRow {
            short: short_sha(sha).to_string(),
            subject: subjects.get(sha).cloned().unwrap_or_default(),
            p: format::probability(p),
            bar: ((p / best) * 100.0).round() as u32,
        })
        .collect())
}

/// A link to the commit on the forge that hosts the repository, for the URL shapes whose
/// commit pages are known; local paths and unknown hosts get none.
fn commit_web_url(repo_url: &str, sha: &str) -> Option<String> {
    let base = repo_url.trim_end_matches('/');
    let base = base.strip_suffix(".git").unwrap_or(base);
    let host = base.strip_prefix("https://")?.split('/').next()?;
    match host {
        "github.com" | "gitlab.com" | "codeberg.org" => Some(format!("{base}/commit/{sha}")),
        "git.kernel.org" => Some(format!(
            "{}/commit/?id={sha}",
            repo_url.trim_end_matches('/')
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::commit_web_url;

    #[test]
    fn commit_links_for_known_forges_only() {
        assert_eq!(
            commit_web_url("https://github.com/o/r.git", "abc").as_deref(),
            Some("https://github.com/o/r/commit/abc")
        );
        assert_eq!(
            commit_web_url(
                "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git",
                "abc"
            )
            .as_deref(),
            Some(
                "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git/commit/?id=abc"
            )
        );
        assert_eq!(commit_web_url("/srv/git/linux.git", "abc"), None);
        assert_eq!(commit_web_url("http://github.com/o/r", "abc"), None);
    }
}
