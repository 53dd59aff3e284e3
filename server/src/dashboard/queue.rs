//! The queue page: tasks waiting and running, per host group, with how long they have waited
//! or run, and how many live hosts serve each group (a group with none waits forever).

use super::error::PageError;
use super::format::{self, short_sha};
use super::hosts::STALE_AFTER_SECS;
use crate::state::AppState;
use askama::Template;
use axum::extract::State;
use axum::response::Html;
use chrono::Utc;
use perfbisect_wire::states::TaskState;
use std::collections::BTreeMap;

/// Most tasks listed; the counts above the tables are always complete.
const MAX_LISTED: i64 = 500;

pub struct TaskView {
    pub id: i64,
    /// The bisect or the watch the task measures for: its page and its label.
    pub owner_href: String,
    pub owner: String,
    pub commits: String,
    pub phase: String,
    pub state: String,
    pub runs: i32,
    pub attempts: i32,
    pub host: String,
    /// Waiting since it was queued, or running since it was claimed.
    pub age: String,
}

pub struct GroupView {
    pub name: String,
    pub live_hosts: i64,
    pub running: usize,
    pub queued: usize,
    pub oldest_wait: String,
    pub tasks: Vec<TaskView>,
}

#[derive(Template)]
#[template(path = "queue.html")]
struct QueuePage {
    nav: &'static str,
    groups: Vec<GroupView>,
    running: usize,
    queued: usize,
}

pub async fn page(State(state): State<AppState>) -> Result<Html<String>, PageError> {
    let tasks = crate::store::tasks::open(&state.db, MAX_LISTED).await?;
    let live = crate::store::hosts::live_per_group(&state.db, STALE_AFTER_SECS as f64).await?;
    let live: BTreeMap<String, i64> = live.into_iter().collect();
    let now = Utc::now();
    let mut groups: BTreeMap<String, GroupView> = BTreeMap::new();
    for t in tasks {
        let g = groups
            .entry(t.host_group.clone())
            .or_insert_with(|| GroupView {
                live_hosts: live.get(&t.host_group).copied().unwrap_or(0),
                name: t.host_group.clone(),
                running: 0,
                queued: 0,
                oldest_wait: String::new(),
                tasks: Vec::new(),
            });
        let since = match t.state {
            TaskState::Running => {
                g.running += 1;
                t.started_at.unwrap_or(t.created_at)
            }
            _ => {
                // Rows come oldest first within a state: the first queued one waited longest.
                if g.queued == 0 {
                    g.oldest_wait = format::duration((now - t.created_at).num_seconds());
                }
                g.queued += 1;
                t.created_at
            }
        };
        let mut commits = short_sha(&t.sha).to_string();
        if let Some(p) = &t.pair_sha {
            commits = format!("{commits} ⇄ {}", short_sha(p));
        }
        g.tasks.push(TaskView {
            id: t.id,
            owner_href: match (t.bisect_id, t.watch_id) {
                (Some(b), _) => format!("/bisects/{b}"),
                (None, w) => format!("/watches/{}", w.unwrap_or_default()),
            },
            owner: match (t.bisect_id, t.watch_id) {
                (Some(b), _) => format!("#{b}"),
                (None, w) => format!("watch #{}", w.unwrap_or_default()),
            },
            commits,
            phase: t.phase.as_str().to_string(),
            state: t.state.as_str().to_string(),
            runs: t.runs,
            attempts: t.attempts,
            host: t.host.unwrap_or_default(),
            age: format::duration((now - since).num_seconds()),
        });
    }
    let groups: Vec<GroupView> = groups.into_values().collect();
    let html = QueuePage {
        nav: "queue",
        running: groups.iter().map(|g| g.running).sum(),
        queued: groups.iter().map(|g| g.queued).sum(),
        groups,
    }
    .render()?;
    Ok(Html(html))
}
