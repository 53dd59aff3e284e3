//! The bisects page: every bisect, newest first, with filters and pages.

use super::error::PageError;
use super::format::{self, short_sha};
use crate::bisect_view;
use crate::state::AppState;
use crate::store::summaries::ListFilter;
use askama::Template;
use axum::extract::{Query, State};
use axum::response::Html;
use chrono::Utc;
use perfbisect_wire::api::STATUSES;
use serde::{Deserialize, Serialize};

const PAGE_SIZE: i64 = 25;

/// The filters, as the page's form sends them (an empty field means "any").
#[derive(Debug, Default, Clone, Deserialize, Serialize)]
pub struct Filters {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    repository: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    testcase: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    metric: String,
}

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    #[serde(flatten)]
    filters: Filters,
    page: Option<String>,
}

fn some(s: &str) -> Option<&str> {
    Some(s).filter(|s| !s.is_empty())
}

pub struct Row {
    pub id: i64,
    pub repository: String,
    pub good: String,
    pub bad: String,
    pub metric: String,
    pub testcase: String,
    pub status_label: String,
    pub status_class: &'static str,
    pub candidates_remaining: usize,
    pub candidates_total: usize,
    pub runs_done: usize,
    pub culprit: Option<(String, String)>,
    /// The measured change (`+4.8%`) and what it is (`regression`, `improvement`, `change`).
    pub change: Option<(String, String)>,
    /// While the search runs: its most likely culprit's probability and the bits left.
    pub moving: Option<String>,
    /// Which runs it used, for the cell's tooltip.
    pub change_basis: String,
    pub age: String,
    pub created_iso: String,
}

fn row_of(b: &perfbisect_wire::api::Bisect, now: chrono::DateTime<Utc>) -> Row {
    Row {
        id: b.id,
        status_label: format::status_label(&b.status),
        status_class: format::status_class(&b.status),
        culprit: b.culprit.as_ref().map(|c| {
            (
                short_sha(&c.commit.sha).to_string(),
                c.commit.subject.clone(),
            )
        }),
        age: format::age(b.created_at, now),
        created_iso: format::iso(b.created_at),
        repository: b.repository.clone(),
        good: b.good.rev.clone(),
        bad: b.bad.rev.clone(),
        metric: b.metric.clone(),
        testcase: b.testcase.clone(),
        candidates_remaining: b.candidates_remaining,
        candidates_total: b.candidates_total,
        runs_done: b.runs_done,
        change: b
            .measured_change
            .as_ref()
            .map(|m| (crate::change::signed_pct(m.pct), m.kind.clone())),
        change_basis: b
            .measured_change
            .as_ref()
            .map(|m| m.runs_used.clone())
            .unwrap_or_default(),
        moving: b
            .progress
            .as_ref()
            .filter(|_| !perfbisect_wire::api::status_is_final(&b.status))
            .and_then(|p| Some((p.top_probability?, p.entropy_bits?)))
            .map(|(top, bits)| moving(top, bits)),
    }
}

/// The list's progress cell of a running bisect.
fn moving(top: f64, bits: f64) -> String {
    format!("top {} · {bits:.1} bits left", format::probability(top))
}

/// A choice of a filter's `<select>`.
pub struct Choice {
    pub value: String,
    pub label: String,
    pub selected: bool,
}

fn choices(values: Vec<String>, current: &str, label: fn(&str) -> String) -> Vec<Choice> {
    values
        .into_iter()
        .map(|value| Choice {
            selected: value == current,
            label: label(&value),
            value,
        })
        .collect()
}

#[derive(Template)]
#[template(path = "bisects.html")]
struct BisectsPage {
    nav: &'static str,
    rows: Vec<Row>,
    total: i64,
    page: i64,
    pages: i64,
    filtered: bool,
    statuses: Vec<Choice>,
    repositories: Vec<Choice>,
    testcases: Vec<Choice>,
    metrics: Vec<Choice>,
    newer: Option<String>,
    older: Option<String>,
}

/// `?status=…&page=n` for a page link that keeps the filters.
fn page_link(filters: &Filters, page: i64) -> String {
    let mut q = serde_urlencoded::to_string(filters).unwrap_or_default();
    if page > 1 {
        if !q.is_empty() {
            q.push('&');
        }
        q.push_str(&format!("page={page}"));
    }
    if q.is_empty() {
        "/bisects".into()
    } else {
        format!("/bisects?{q}")
    }
}

pub async fn page(
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Result<Html<String>, PageError> {
    let f = q.filters;
    if some(&f.status).is_some_and(|s| !STATUSES.contains(&s)) {
        return Err(PageError::BadRequest(format!(
            "`{}` is not a status; the statuses are {}",
            f.status,
            STATUSES.join(", ")
        )));
    }
    let page = match q.page.as_deref().filter(|p| !p.is_empty()) {
        None => 1,
        Some(p) => p
            .parse::<i64>()
            .ok()
            .filter(|p| *p >= 1)
            .ok_or_else(|| PageError::BadRequest(format!("`{p}` is not a page number")))?,
    };
    // The same filters and summary loader as `GET /api/v1/bisects`.
    let filter = ListFilter {
        status: some(&f.status),
        repository: some(&f.repository),
        testcase: some(&f.testcase),
        metric: some(&f.metric),
    };
    let version = state.lists.version(&state.db).await?;
    let found = (state.lists)
        .page(
            &state.db,
            version,
            filter,
            PAGE_SIZE,
            (page - 1) * PAGE_SIZE,
        )
        .await?;
    let total = found.total;
    let now = Utc::now();
    let mut rows = Vec::with_capacity(found.rows.len());
    for s in &found.rows {
        let finished = s.status.is_final();
        rows.push(match (s.candidates_total, s.candidates_remaining) {
            // A running bisect's moving progress is its stored belief; without one (not yet
            // advanced, or stored before the summary columns) the full view.
            (Some(total), Some(remaining)) if finished || s.belief.is_some() => {
                let change = bisect_view::summary_change(&state, s).await?;
                Row {
                    id: s.id,
                    status_label: format::status_label(s.status.as_str()),
                    status_class: format::status_class(s.status.as_str()),
                    culprit: s.culprit_sha.as_ref().map(|sha| {
                        (
                            short_sha(sha).to_string(),
                            s.culprit_subject.clone().unwrap_or_default(),
                        )
                    }),
                    age: format::age(s.created_at, now),
                    created_iso: format::iso(s.created_at),
                    // As `bisect_view::load` counts them, so the row reads as the bisect's own page.
                    candidates_remaining: if s.culprit_sha.is_some() {
                        1
                    } else {
                        remaining as usize
                    },
                    candidates_total: total as usize,
                    runs_done: s.runs_done as usize,
                    moving: s
                        .belief
                        .as_ref()
                        .filter(|_| !finished)
                        .and_then(|b| Some((b.top_probability?, b.entropy_bits?)))
                        .map(|(top, bits)| moving(top, bits)),
                    repository: s.repository.clone(),
                    good: s.good_rev.clone(),
                    bad: s.bad_rev.clone(),
                    metric: s.metric.clone(),
                    testcase: s.testcase.clone(),
                    change: change
                        .as_ref()
                        .map(|m| (crate::change::signed_pct(m.pct), m.kind.clone())),
                    change_basis: change.map(|m| m.runs_used).unwrap_or_default(),
                }
            }
            _ => row_of(&bisect_view::load(&state, s.id).await?, now),
        });
    }
    let options = state.lists.choices(&state.db, version).await?;
    let pages = ((total + PAGE_SIZE - 1) / PAGE_SIZE).max(1);
    let html = BisectsPage {
        nav: "bisects",
        rows,
        total,
        page,
        pages,
        filtered: f.status.len() + f.repository.len() + f.testcase.len() + f.metric.len() > 0,
        statuses: choices(
            STATUSES.iter().map(|s| s.to_string()).collect(),
            &f.status,
            format::status_label,
        ),
        repositories: choices(options.repositories.clone(), &f.repository, str::to_string),
        testcases: choices(options.testcases.clone(), &f.testcase, str::to_string),
        metrics: choices(options.metrics.clone(), &f.metric, str::to_string),
        newer: (page > 1).then(|| page_link(&f, page - 1)),
        older: (page < pages).then(|| page_link(&f, page + 1)),
    }
    .render()?;
    Ok(Html(html))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_links_keep_the_filters_and_escape_them() {
        let f = Filters {
            status: "found".into(),
            metric: "a b&c".into(),
            ..Default::default()
        };
        assert_eq!(
            page_link(&f, 2),
            "/bisects?status=found&metric=a+b%26c&page=2"
        );
        assert_eq!(page_link(&Filters::default(), 1), "/bisects");
    }
}
