//! The watches pages: `/watches` (every watch, the open changes and their bisects, a form
//! to create a watch) and `/watches/{id}` (a chart per branch and metric, zoomable with
//! `?from=SEQ&to=SEQ`, the change points, a form to change the watch). The forms post to
//! the REST API from the browser with the user's token (`watches.js`).

use super::error::PageError;
use super::format::{self, short_sha};
use super::series_plot::series_svg;
use crate::state::AppState;
use crate::watch::view::{all_watches, load_changes, load_series, load_watch};
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::Html;
use perfbisect_wire::watch::{ChangePoint, Watch};
use serde::Deserialize;

pub struct ChangeView {
    pub id: i64,
    pub watch_id: i64,
    pub watch: String,
    pub branch: String,
    pub metric: String,
    pub change: String,
    pub confidence: String,
    pub range: String,
    pub action: String,
    pub bisect_id: Option<i64>,
    pub bisect_status: String,
    pub culprit: String,
    pub message: String,
    /// Zoom of the watch page around the change.
    pub zoom: String,
}

impl ChangeView {
    fn of(c: &ChangePoint) -> Self {
        ChangeView {
            id: c.id,
            watch_id: c.watch_id,
            watch: c.watch.clone(),
            branch: c.branch.clone(),
            metric: c.metric.clone(),
            change: format!("{:+.2}%", c.change_pct),
            confidence: format::probability(c.confidence),
            range: format!("{}..{}", short_sha(&c.before_sha), short_sha(&c.after_sha)),
            action: c.action.clone(),
            bisect_id: c.bisect_id,
            bisect_status: c
                .bisect_status
                .as_deref()
                .map(format::status_label)
                .unwrap_or_default(),
            culprit: c
                .culprit_sha
                .as_deref()
                .map(|s| short_sha(s).to_string())
                .unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
            zoom: format!(
                "from={}&to={}",
                (c.before_seq - 15).max(0),
                c.detected_seq + 15
            ),
        }
    }
}

pub struct WatchView {
    pub id: i64,
    pub name: String,
    pub repository: String,
    pub branch: String,
    pub testcase: String,
    pub metrics: String,
    pub heads: u64,
    pub enabled: bool,
    pub polled: String,
}

impl WatchView {
    fn of(w: &Watch) -> Self {
        let now = chrono::Utc::now();
        WatchView {
            id: w.id,
            name: w.name.clone(),
            repository: w.repository.clone(),
            branch: w.branch.clone(),
            testcase: w.testcase.clone(),
            metrics: w
                .metrics
                .iter()
                .map(|m| format!("{} ({}, ≥{}%)", m.name, m.direction, m.threshold_pct))
                .collect::<Vec<_>>()
                .join(", "),
            heads: w.heads,
            enabled: w.enabled,
            polled: w
                .polled_at
                .map(|t| format::age(t, now))
                .unwrap_or_else(|| "never".into()),
        }
    }
}

#[derive(Template)]
#[template(path = "watches.html")]
struct WatchesPage {
    nav: &'static str,
    watches: Vec<WatchView>,
    open: Vec<ChangeView>,
}

pub async fn list(State(state): State<AppState>) -> Result<Html<String>, PageError> {
    let watches = all_watches(&state).await?;
    let open = load_changes(&state, None, true).await?;
    Ok(Html(
        WatchesPage {
            nav: "watches",
            watches: watches.iter().map(WatchView::of).collect(),
            open: open.iter().map(ChangeView::of).collect(),
        }
        .render()?,
    ))
}

#[derive(Debug, Deserialize)]
pub struct Zoom {
    from: Option<String>,
    to: Option<String>,
}

pub struct Chart {
    pub branch: String,
    pub metric: String,
    pub svg: Option<String>,
    pub shown: usize,
    pub total: usize,
}

#[derive(Template)]
#[template(path = "watch.html")]
struct WatchPage {
    nav: &'static str,
    watch: WatchView,
    settings: Watch,
    recipients: String,
    charts: Vec<Chart>,
    changes: Vec<ChangeView>,
    zoomed: Option<(i32, i32)>,
}

fn seq_param(field: &str, v: &Option<String>) -> Result<Option<i32>, PageError> {
    match v.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(s) => s.parse::<i32>().map(Some).map_err(|_| {
            PageError::BadRequest(format!("`{field}` must be a head number, not `{s}`"))
        }),
    }
}

pub async fn detail(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    Query(zoom): Query<Zoom>,
) -> Result<Html<String>, PageError> {
    let watch = load_watch(&state, id).await?;
    let from = seq_param("from", &zoom.from)?;
    let to = seq_param("to", &zoom.to)?;
    let zoomed =
        (from.is_some() || to.is_some()).then(|| (from.unwrap_or(0), to.unwrap_or(i32::MAX)));
    let series = load_series(&state, id, None, None).await?;
    let mut charts = Vec::new();
    for (i, s) in series.iter().enumerate() {
        let (lo, hi) = zoomed.unwrap_or((0, i32::MAX));
        let points: Vec<_> = s
            .points
            .iter()
            .filter(|p| p.seq >= lo && p.seq <= hi)
            .cloned()
            .collect();
        charts.push(Chart {
            branch: s.branch.clone(),
            metric: s.metric.clone(),
            svg: series_svg(&format!("series-{i}"), &s.metric, &points, &s.changes),
            shown: points.len(),
            total: s.points.len(),
        });
    }
    let changes = load_changes(&state, Some(id), false).await?;
    Ok(Html(
        WatchPage {
            nav: "watches",
            watch: WatchView::of(&watch),
            recipients: watch.recipients.join(", "),
            settings: watch,
            charts,
            changes: changes.iter().map(ChangeView::of).collect(),
            zoomed,
        }
        .render()?,
    ))
}
