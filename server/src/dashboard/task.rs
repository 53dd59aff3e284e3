//! One task (`/tasks/{id}`): its runs with their metrics, environment and log, and its
//! builds with theirs. Read as `GET /api/v1/tasks/{id}` reads it (`store::tasks::detail`),
//! so the page and the API show the same rows.

use super::error::PageError;
use super::format::{self, short_sha};
use crate::error::ApiError;
use crate::state::AppState;
use crate::store::tasks;
use askama::Template;
use axum::extract::{Path, State};
use axum::response::Html;
use perfbisect_wire::tasks::TaskDetail;

pub struct RunView {
    pub iteration: u32,
    pub short: String,
    pub host: String,
    pub completed: bool,
    pub duration: String,
    /// `name = value` lines of every metric the run produced.
    pub metrics: Vec<(String, String)>,
    /// Environment facts that were recorded: (what, value).
    pub environment: Vec<(&'static str, String)>,
    pub log: String,
}

pub struct BuildView {
    pub short: String,
    pub host: String,
    pub outcome: &'static str,
    pub duration: String,
    pub log: String,
}

#[derive(Template)]
#[template(path = "task.html")]
struct TaskPage {
    nav: &'static str,
    t: TaskDetail,
    short: String,
    pair_short: Option<String>,
    runs: Vec<RunView>,
    builds: Vec<BuildView>,
    duration: String,
}

pub async fn page(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Html<String>, PageError> {
    let t = tasks::detail(&state.db, id)
        .await
        .map_err(ApiError::from)?
        .ok_or_else(|| PageError::NotFound(format!("no task with id {id}")))?;
    let runs = t
        .runs
        .iter()
        .map(|r| {
            let e = &r.environment;
            let environment = [
                ("Host", e.host.clone()),
                ("Kernel", e.kernel_release.clone()),
                ("Command line", e.kernel_cmdline.clone()),
                ("CPU governor", e.cpu_governor.clone()),
                ("Microcode", e.microcode.clone()),
                ("Boot", e.boot_method.clone()),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
            RunView {
                iteration: r.iteration,
                short: short_sha(&r.sha).to_string(),
                host: r.host.clone(),
                completed: r.completed,
                duration: format::duration((r.finished_at - r.started_at).num_seconds()),
                metrics: r
                    .metrics
                    .iter()
                    .map(|(k, v)| (k.clone(), format::number(*v)))
                    .collect(),
                environment,
                log: r.log.clone(),
            }
        })
        .collect();
    let builds = t
        .builds
        .iter()
        .map(|b| BuildView {
            short: short_sha(&b.sha).to_string(),
            host: b.host.clone(),
            outcome: match (b.succeeded, b.cached) {
                (true, true) => "built (from the cache)",
                (true, false) => "built",
                (false, _) => "failed",
            },
            duration: format!("{:.1} s", b.duration_secs),
            log: b.log.clone(),
        })
        .collect();
    let page = TaskPage {
        nav: "bisects",
        short: short_sha(&t.task.sha).to_string(),
        pair_short: t.task.pair_sha.as_deref().map(|p| short_sha(p).to_string()),
        duration: t
            .task
            .duration_secs
            .map(|s| format::duration(s as i64))
            .unwrap_or_default(),
        runs,
        builds,
        t,
    };
    Ok(Html(page.render()?))
}
