//! One bisect: the page, and its live part, which the page's script fetches again every few
//! seconds while the bisect runs and swaps in place (no reload, one renderer for both).

use super::error::PageError;
use super::format::{self, short_sha};
use super::plot::{self, Cell, Column, Verdict};
use crate::bisect_view;
use crate::state::AppState;
use crate::store;
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
/// Most recent tasks listed (each links to its runs, environments and logs).
const TASKS_SHOWN: i64 = 30;
/// Events read to make the latest `EVENTS_SHOWN` distinct lines.
const EVENTS_READ: i64 = 200;

pub struct CommitRow {
    pub sha: String,
    pub short: String,
    /// The commit on the repository's web view, where the URL tells us one.
    pub web_url: Option<String>,
    /// What its own runs look like: `good` or `bad` (nearer that endpoint's level), or empty.
    pub own: &'static str,
    /// The engine's verdict comes from the commit's place in history, not its own runs
    /// (they look the other way, or there are none).
    pub implied: bool,
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
    /// The event's sentence (its message's first line).
    pub sentence: String,
    /// The rest of the message (the engine's reasoning), folded away on the page.
    pub detail: Option<String>,
    /// How many events in a row said the same sentence (shown once).
    pub repeat: usize,
}

/// The change as measured, at the top of the page.
pub struct ChangeView {
    /// `+4.8%`, `−9.7%`.
    pub text: String,
    /// `regression`, `improvement` or `change`.
    pub kind: String,
    /// `1218093 → 1885792`.
    pub levels: String,
    /// Which runs: `culprit vs its parent, 10 + 10 paired verification runs`.
    pub runs_used: String,
}

/// Measures that move while the bisect runs.
pub struct ProgressView {
    pub top_short: String,
    pub top_p: String,
    /// Fewest candidates holding 90% of the probability.
    pub c90: String,
    pub bits_left: String,
    pub bits_start: String,
    /// For tests and scripts: the raw entropy in bits, and the top probability.
    pub entropy_raw: String,
    pub top_raw: String,
    /// Share of the starting uncertainty resolved, in percent (the bar).
    pub resolved_pct: u32,
    pub eta: String,
    /// P(a change in the range), where it is in doubt: the measures above are given one.
    pub change_p: Option<String>,
}

/// One task of the bisect, linking to its runs and their logs.
pub struct TaskRow {
    pub id: i64,
    pub what: String,
    pub phase: String,
    pub state: String,
    pub runs: String,
    pub host: String,
    pub duration: String,
}

/// Everything that changes while the bisect runs.
pub struct LiveView {
    pub id: i64,
    pub poll_ms: u32,
    pub is_final: bool,
    pub status: String,
    pub status_label: String,
    pub status_class: &'static str,
    /// What the status means, in a sentence; the stored reason's detail folded below it.
    pub outcome: String,
    pub outcome_more: Option<String>,
    pub metric: String,
    pub change: Option<ChangeView>,
    pub progress: Option<ProgressView>,
    /// Why the list of most likely culprits is empty (none stands out), when it is.
    pub top_note: Option<String>,
    pub tasks: Vec<TaskRow>,
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
    /// The engine's findings: change points, range change, direction hint, prediction.
    pub findings: Option<super::findings::FindingsView>,
}

#[derive(Template)]
#[template(path = "bisect.html")]
struct BisectPage {
    nav: &'static str,
    b: Bisect,
    created: String,
    created_iso: String,
    job_short: String,
    job_yaml: String,
    /// The report's text, for an ended bisect that has one.
    report: Option<String>,
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
    let job_yaml = store::jobs::yaml_by_hash(&state.db, &b.job_hash)
        .await?
        .unwrap_or_default();
    let report = if live.is_final {
        report_text(&state, id).await
    } else {
        None
    };
    let page = BisectPage {
        job_yaml,
        report,
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

/// The report of an ended bisect as `/api/v1/bisects/{id}/report` serves it; `None` when it
/// cannot be made (the page then offers the link only).
async fn report_text(state: &AppState, id: i64) -> Option<String> {
    let ctx = crate::report_input::ReportContext {
        robot: state.mail.robot(),
        public_url: state.public_url.clone(),
    };
    let mut conn = state.db.acquire().await.ok()?;
    let loaded = crate::report_input::load(&mut conn, id, &ctx).await.ok()?;
    perfbisect_report::render(&loaded.input, &state.mail.report)
        .ok()
        .map(|r| r.text)
}

/// The bisect as the API sees it (`bisect_view::load`), plus what only the page needs: every
/// sample, the engine's view of every candidate, the story, the repository's URL.
async fn load(state: &AppState, id: i64) -> Result<(Bisect, LiveView), PageError> {
    let b = bisect_view::load(state, id).await?;
    let db = &state.db;
    let runs = store::runs::values(db, id, &b.metric).await?;
    let (repo_url, web_template) = store::repositories::of_bisect(db, id).await?;
    // The repository's registered web view first; a guess from the fetch URL otherwise.
    let commit_link = |sha: &str| match &web_template {
        Some(t) => Some(perfbisect_report::materials::commit_url(t, sha)),
        None => commit_web_url(&repo_url, sha),
    };
    // Every candidate's verdict and probability (the verdict bytes and the probability rows).
    let candidates = store::candidates::shas(db, id).await?;
    let assessed = store::assessments::combine(
        candidates.len(),
        store::assessments::load(db, id).await?,
        store::assessments::verdicts(db, id).await?.as_deref(),
    );
    let events: Vec<(DateTime<Utc>, String, String)> = store::events::latest(db, id, EVENTS_READ)
        .await?
        .into_iter()
        .map(|l| (l.at, l.kind, l.message))
        .collect();

    let tasks: Vec<TaskRow> = store::tasks::recent(db, id, TASKS_SHOWN)
        .await?
        .into_iter()
        .map(task_row)
        .collect();

    let mut samples: HashMap<&str, Vec<f64>> = HashMap::new();
    for (sha, v) in &runs {
        samples.entry(sha.as_str()).or_default().push(*v);
    }
    let culprit_sha = b.culprit.as_ref().map(|c| c.commit.sha.as_str());

    // The engine's last word on every candidate, in the candidates' order.
    let cells: Vec<Cell> = candidates
        .iter()
        .zip(&assessed)
        .map(|(sha, &(verdict, p))| {
            let verdict = Verdict::parse(verdict.as_str());
            let p = p.map(f64::from);
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
    let judged = |v: Verdict| cells.iter().filter(|c| c.verdict == v).count();
    let range_summary = format!(
        "{} candidates: {} measured; {} judged good, {} judged bad, {} not yet judged",
        cells.len(),
        cells.iter().filter(|c| c.measured).count(),
        judged(Verdict::Good),
        judged(Verdict::Bad),
        undecided
    );
    let pos_of: HashMap<&str, i64> = candidates
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_str(), i as i64))
        .collect();

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
                pos: pos_of.get(c.sha.as_str()).copied().unwrap_or(-1),
            })
        })
        .collect();
    let plot_svg = plot::samples_svg(&b.metric, &columns, culprit_sha);

    // The endpoints' levels, to tell what a commit's own runs look like.
    let level = |role: &str| {
        b.commits
            .iter()
            .find(|c| c.role == role)
            .and_then(|c| c.mean)
    };
    let (good_level, bad_level) = (level("good_endpoint"), level("bad_endpoint"));
    let commits = b
        .commits
        .iter()
        .map(|c| {
            let own = own_look(c.mean, good_level, bad_level);
            let verdict = Verdict::parse(&c.verdict);
            let implied = matches!(verdict, Verdict::Good | Verdict::Bad)
                && c.role == "candidate"
                && own != verdict.label();
            (c, own, implied)
        })
        .map(|(c, own, implied)| CommitRow {
            own,
            implied,
            web_url: commit_link(&c.sha),
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

    // sha → culprit probability, for the candidates that have one.
    let probabilities: Vec<(&str, f64)> = candidates
        .iter()
        .zip(&assessed)
        .filter_map(|(sha, &(_, p))| p.map(|p| (sha.as_str(), f64::from(p))))
        .collect();
    let is_final = status_is_final(&b.status);
    // A list of ten commits at 0.3% each says nothing: candidates are listed once they stand
    // out from an even spread, and not at all for a bisect that ended without a search result.
    let listed = !is_final || b.status == "inconclusive";
    let floor = TOP_MIN_P.max(1.5 / b.candidates_total.max(1) as f64);
    let top = if listed {
        top_candidates(state, id, &probabilities, floor).await?
    } else {
        Vec::new()
    };
    let top_note = (listed && top.is_empty() && !probabilities.is_empty()).then(|| {
        "No candidate stands out yet: the probability is still spread evenly.".to_string()
    });
    let named = super::findings::shas(&b);
    let subjects: HashMap<String, String> = if named.is_empty() {
        HashMap::new()
    } else {
        store::candidates::subjects(db, id, &named).await?
    };
    let findings = super::findings::view(&b, &subjects);
    let now = Utc::now();
    let (outcome, outcome_more) = outcome(&b.status, b.status_reason.as_deref());
    let change = b.measured_change.as_ref().map(|m| ChangeView {
        text: crate::change::signed_pct(m.pct),
        kind: m.kind.clone(),
        levels: format!(
            "{} \u{2192} {}",
            format::number(m.good_mean),
            format::number(m.bad_mean)
        ),
        runs_used: m.runs_used.clone(),
    });
    let progress = b
        .progress
        .as_ref()
        .filter(|p| p.entropy_bits.is_some() && b.culprit.is_none())
        .map(|p| {
            let h = p.entropy_bits.unwrap_or(p.entropy_bits_start);
            ProgressView {
                top_short: p
                    .top_sha
                    .as_deref()
                    .map(short_sha)
                    .unwrap_or("")
                    .to_string(),
                top_p: p
                    .top_probability
                    .map(format::probability)
                    .unwrap_or_default(),
                c90: p
                    .candidates_90
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "-".into()),
                bits_left: format!("{h:.1}"),
                bits_start: format!("{:.1}", p.entropy_bits_start),
                entropy_raw: format!("{h:.4}"),
                top_raw: format!("{:.6}", p.top_probability.unwrap_or(0.0)),
                resolved_pct: if p.entropy_bits_start > 0.0 {
                    ((1.0 - h / p.entropy_bits_start) * 100.0)
                        .clamp(0.0, 100.0)
                        .round() as u32
                } else {
                    100
                },
                eta: eta_text(is_final, p.eta_secs, p.budget_secs, p.budget_runs_left),
                change_p: p
                    .change_probability
                    .filter(|c| *c < perfbisect_wire::api::CHANGE_SURE)
                    .map(format::probability),
            }
        });
    let live = LiveView {
        id,
        poll_ms: POLL_MS,
        is_final,
        outcome,
        outcome_more,
        metric: b.metric.clone(),
        change,
        progress,
        top_note,
        tasks,
        status_label: format::status_label(&b.status),
        status_class: format::status_class(&b.status),
        status: b.status.clone(),
        candidates_total: b.candidates_total,
        candidates_remaining: b.candidates_remaining,
        runs_done: b.runs_done,
        max_runs: b.max_runs,
        tasks_pending: b.tasks_pending,
        elapsed: format::duration((b.finished_at.unwrap_or(now) - b.created_at).num_seconds()),
        updated: format::age(b.updated_at, now),
        culprit: b.culprit.as_ref().map(|c| CulpritView {
            web_url: commit_link(&c.commit.sha),
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
        events: group_events(events, now),
        findings,
    };
    Ok((b, live))
}

/// The most likely culprits with their subjects, most likely first.
async fn top_candidates(
    state: &AppState,
    id: i64,
    probabilities: &[(&str, f64)],
    floor: f64,
) -> Result<Vec<CandidateRow>, PageError> {
    let mut ranked: Vec<(&str, f64)> = probabilities
        .iter()
        .filter(|(_, p)| *p >= floor)
        .copied()
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    ranked.truncate(TOP_SHOWN);
    if ranked.is_empty() {
        return Ok(Vec::new());
    }
    let shas: Vec<String> = ranked.iter().map(|(s, _)| s.to_string()).collect();
    let subjects = store::candidates::subjects(&state.db, id, &shas).await?;
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

/// What a commit's own runs look like: nearer the good endpoint's level or the bad one's.
fn own_look(mean: Option<f64>, good: Option<f64>, bad: Option<f64>) -> &'static str {
    match (mean, good, bad) {
        (Some(m), Some(g), Some(b)) if g != b => {
            if (m - g).abs() <= (m - b).abs() {
                "good"
            } else {
                "bad"
            }
        }
        _ => "",
    }
}

/// The status in a sentence, and the stored reason: its first line too when it is a
/// sentence (new reasons are "sentence, newline, detail"), the rest folded away.
fn outcome(status: &str, reason: Option<&str>) -> (String, Option<String>) {
    let said = match status {
        "queued" => "Waiting for a host of the job's group.",
        "reproducing" => {
            "Measuring the good and the bad endpoint to check that the change reproduces."
        }
        "searching" => {
            "Searching: measuring the commits that best split the probability of being the culprit."
        }
        "verifying" => {
            "Verifying the most likely culprit against its parent, interleaved on one host."
        }
        "found" => "Found the commit that changed the metric.",
        "not_reproduced" => {
            "The change did not reproduce: the endpoints measure alike within the noise."
        }
        // The scheduler's reasons say which commits and how much more (`budget`).
        "inconclusive"
            if reason.is_some_and(|r| r.trim_start().starts_with("No commit reached")) =>
        {
            "Inconclusive."
        }
        "inconclusive" => {
            "Inconclusive: no commit reached the target confidence within the budget."
        }
        "failed" => "The bisect failed before it could conclude anything about the commits.",
        "cancelled" => "Cancelled.",
        _ => "",
    };
    let Some(reason) = reason.map(str::trim).filter(|r| !r.is_empty()) else {
        return (said.to_string(), None);
    };
    let (first, rest) = reason.split_once('\n').unwrap_or((reason, ""));
    let sentence_like = first.chars().next().is_some_and(char::is_uppercase);
    if status_is_final(status) && sentence_like {
        let rest = rest.trim();
        (
            format!("{said} {first}"),
            (!rest.is_empty()).then(|| rest.to_string()),
        )
    } else {
        (said.to_string(), Some(reason.to_string()))
    }
}

fn eta_text(is_final: bool, eta: Option<i64>, budget: Option<i64>, runs_left: usize) -> String {
    if is_final {
        return "ended".into();
    }
    match (eta, budget) {
        (Some(e), Some(b)) if e < b => format!(
            "about {} at this pace (the budget allows {} more: {} runs)",
            format::duration(e),
            format::duration(b),
            runs_left
        ),
        (_, Some(b)) => format!(
            "at most {} (the budget: {} more runs)",
            format::duration(b),
            runs_left
        ),
        _ => "after the first runs".into(),
    }
}

/// Events newest first, as sentences; a run of events saying the same sentence is shown
/// once with its count (the details of the newest kept).
fn group_events(events: Vec<(DateTime<Utc>, String, String)>, now: DateTime<Utc>) -> Vec<EventRow> {
    let mut out: Vec<EventRow> = Vec::new();
    for (at, kind, message) in events {
        let (first, rest) = message.split_once('\n').unwrap_or((&message, ""));
        let sentence = first.trim().to_string();
        if let Some(last) = out.last_mut()
            && last.kind == kind
            && last.sentence == sentence
        {
            last.repeat += 1;
            continue;
        }
        let rest = rest.trim();
        out.push(EventRow {
            at: format::iso(at),
            age: format::age(at, now),
            kind: kind.replace('_', " "),
            sentence,
            detail: (!rest.is_empty()).then(|| rest.to_string()),
            repeat: 1,
        });
        if out.len() == EVENTS_SHOWN as usize {
            break;
        }
    }
    out
}

/// A stored task as the page lists it.
fn task_row(t: store::tasks::Recent) -> TaskRow {
    let sides = if t.pair_sha.is_some() { 2 } else { 1 };
    TaskRow {
        id: t.id,
        what: match &t.pair_sha {
            Some(p) => format!("{} with {}", short_sha(&t.sha), short_sha(p)),
            None => short_sha(&t.sha).to_string(),
        },
        phase: t.phase.as_str().to_string(),
        state: t.state.as_str().replace('_', " "),
        runs: format!("{} of {}", t.stored, t.runs * sides),
        host: t.host.unwrap_or_default(),
        duration: match t.started_at {
            Some(s) => format::duration((t.finished_at.unwrap_or_else(Utc::now) - s).num_seconds()),
            None => String::new(),
        },
    }
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
    use super::*;

    #[test]
    fn a_commit_looks_like_the_endpoint_it_is_nearer() {
        assert_eq!(own_look(Some(101.0), Some(100.0), Some(110.0)), "good");
        assert_eq!(own_look(Some(108.0), Some(100.0), Some(110.0)), "bad");
        assert_eq!(own_look(None, Some(100.0), Some(110.0)), "");
        assert_eq!(own_look(Some(1.0), Some(2.0), Some(2.0)), "");
    }

    #[test]
    fn outcomes_are_sentences_with_the_plumbing_folded() {
        let (s, more) = outcome(
            "failed",
            Some(
                "A task could not be completed, so the bisect stopped.\nuploading a run: server answered 422",
            ),
        );
        assert!(
            s.starts_with("The bisect failed") && s.ends_with("the bisect stopped."),
            "{s}"
        );
        assert_eq!(
            more.as_deref(),
            Some("uploading a run: server answered 422")
        );
        // An old reason without a sentence: all of it folded.
        let (s, more) = outcome("failed", Some("uploading a run: server answered 422"));
        assert!(!s.contains("422"));
        assert!(more.unwrap().contains("422"));
        // While running, the engine's reasoning is detail.
        let (s, more) = outcome("searching", Some("P(no change) 0.01; quantiles"));
        assert!(s.starts_with("Searching"));
        assert!(more.unwrap().contains("quantiles"));
    }

    #[test]
    fn repeated_events_are_shown_once_with_a_count() {
        let now = Utc::now();
        let e = |m: &str| (now, "measure".to_string(), m.to_string());
        let rows = group_events(
            vec![
                e("Measuring 5 runs of a.\nquantiles 1"),
                e("Measuring 5 runs of a.\nquantiles 2"),
                e("Measuring 5 runs of b.\nquantiles 3"),
            ],
            now,
        );
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].repeat, rows[0].detail.as_deref()),
            (2, Some("quantiles 1"))
        );
        assert_eq!(rows[1].sentence, "Measuring 5 runs of b.");
    }

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
