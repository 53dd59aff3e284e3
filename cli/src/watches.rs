//! `perfbisect watches …`: create, change and read watches from the command line.

use crate::api::Api;
use anyhow::Context;
use perfbisect_wire::watch::{ChangePoint, CreateWatch, UpdateWatch, Watch, WatchMetric};
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum WatchesCmd {
    /// Create a watch: measure every new head of a branch, bisect the changes.
    Add {
        name: String,
        /// Registered repository name.
        #[arg(long)]
        repo: String,
        /// Branch name, or a glob over branch names.
        #[arg(long, default_value = "main")]
        branch: String,
        /// Job spec (YAML file).
        #[arg(long)]
        job: PathBuf,
        /// `NAME[:DIRECTION[:THRESHOLD_PCT]]`, e.g. `demo.score:either:2`; repeat for more.
        #[arg(long = "metric", required = true)]
        metrics: Vec<String>,
        #[arg(long)]
        host_group: Option<String>,
        /// Seconds between polls.
        #[arg(long)]
        cadence: Option<u32>,
        /// Runs per measured commit.
        #[arg(long)]
        runs: Option<u32>,
        /// Commits of a push that brought many to measure besides its head.
        #[arg(long)]
        sample: Option<u32>,
        /// First-parent ancestors to measure on first sight of a branch.
        #[arg(long)]
        backfill: Option<u32>,
        /// Who is mailed the reports; repeat for more.
        #[arg(long = "recipient")]
        recipients: Vec<String>,
    },
    /// Change a watch; what is not given stays.
    Set {
        id: i64,
        #[arg(long)]
        branch: Option<String>,
        /// Replaces every metric: `NAME[:DIRECTION[:THRESHOLD_PCT]]`, repeat for more.
        #[arg(long = "metric")]
        metrics: Vec<String>,
        #[arg(long)]
        host_group: Option<String>,
        #[arg(long)]
        cadence: Option<u32>,
        #[arg(long)]
        runs: Option<u32>,
        #[arg(long)]
        sample: Option<u32>,
        /// Replaces the recipients; repeat for more.
        #[arg(long = "recipient")]
        recipients: Vec<String>,
        #[arg(long, conflicts_with = "disable")]
        enable: bool,
        #[arg(long)]
        disable: bool,
    },
    /// List the watches.
    List,
    /// Show a watch, its series and its change points.
    Show { id: i64 },
    /// Fetch now and measure the new heads (what the push webhook does).
    Push { id: i64 },
    /// List change points (all watches, or one), newest first.
    Changes {
        #[arg(long)]
        watch: Option<i64>,
        /// Only those whose bisect is still to open or running.
        #[arg(long)]
        open: bool,
    },
}

/// `NAME[:DIRECTION[:THRESHOLD_PCT]]`.
pub fn parse_metric(s: &str) -> anyhow::Result<WatchMetric> {
    let mut parts = s.splitn(3, ':');
    let name = parts.next().unwrap_or_default().to_string();
    let direction = parts.next().unwrap_or("either").to_string();
    let threshold_pct = match parts.next() {
        Some(t) => t
            .parse()
            .with_context(|| format!("threshold `{t}` of metric `{name}` is not a number"))?,
        None => 2.0,
    };
    Ok(WatchMetric {
        name,
        direction,
        threshold_pct,
    })
}

fn print_watch(w: &Watch) {
    println!(
        "watch {} {}: {} of {}, testcase {}, {} commits measured{}",
        w.id,
        w.name,
        w.branch,
        w.repository,
        w.testcase,
        w.heads,
        if w.enabled { "" } else { " (paused)" }
    );
    for m in &w.metrics {
        println!(
            "  metric {} ({}, threshold {}%)",
            m.name, m.direction, m.threshold_pct
        );
    }
    println!(
        "  {} runs per commit, poll every {} s, sample {}, backfill {}, host group {}, recipients: {}",
        w.runs_per_head,
        w.cadence_secs,
        w.sample_commits,
        w.backfill,
        w.host_group,
        if w.recipients.is_empty() {
            "none".to_string()
        } else {
            w.recipients.join(", ")
        }
    );
}

fn print_change(c: &ChangePoint) {
    println!(
        "{:>5}  {:<12} {:<10} {:<24} {:>+8.2}%  {}..{}  {:<10} {}",
        c.id,
        c.watch,
        c.branch,
        c.metric,
        c.change_pct,
        &c.before_sha[..12],
        &c.after_sha[..12],
        c.action,
        match c.bisect_id {
            Some(b) => format!(
                "bisect {b} {}{}",
                c.bisect_status.as_deref().unwrap_or(""),
                c.culprit_sha
                    .as_deref()
                    .map(|s| format!(" culprit {}", &s[..12]))
                    .unwrap_or_default()
            ),
            None => c.message.clone().unwrap_or_default(),
        }
    );
}

pub async fn run(cmd: WatchesCmd, api: &Api) -> anyhow::Result<()> {
    match cmd {
        WatchesCmd::Add {
            name,
            repo,
            branch,
            job,
            metrics,
            host_group,
            cadence,
            runs,
            sample,
            backfill,
            recipients,
        } => {
            let job = std::fs::read_to_string(&job)
                .with_context(|| format!("reading job spec {}", job.display()))?;
            let w = api
                .create_watch(&CreateWatch {
                    name,
                    repository: repo,
                    branch,
                    job,
                    metrics: metrics
                        .iter()
                        .map(|m| parse_metric(m))
                        .collect::<anyhow::Result<_>>()?,
                    host_group,
                    cadence_secs: cadence,
                    runs_per_head: runs,
                    sample_commits: sample,
                    backfill,
                    recipients,
                })
                .await?;
            print_watch(&w);
        }
        WatchesCmd::Set {
            id,
            branch,
            metrics,
            host_group,
            cadence,
            runs,
            sample,
            recipients,
            enable,
            disable,
        } => {
            let metrics = if metrics.is_empty() {
                None
            } else {
                Some(
                    metrics
                        .iter()
                        .map(|m| parse_metric(m))
                        .collect::<anyhow::Result<_>>()?,
                )
            };
            let w = api
                .update_watch(
                    id,
                    &UpdateWatch {
                        branch,
                        metrics,
                        host_group,
                        cadence_secs: cadence,
                        runs_per_head: runs,
                        sample_commits: sample,
                        recipients: (!recipients.is_empty()).then_some(recipients),
                        enabled: match (enable, disable) {
                            (true, _) => Some(true),
                            (_, true) => Some(false),
                            _ => None,
                        },
                    },
                )
                .await?;
            print_watch(&w);
        }
        WatchesCmd::List => {
            for w in api.watches().await? {
                print_watch(&w);
            }
        }
        WatchesCmd::Show { id } => {
            print_watch(&api.watch(id).await?);
            for s in api.series(id).await? {
                let measured = s.points.iter().filter(|p| p.mean.is_some()).count();
                println!(
                    "\n  {} on {}: {} commits, {} measured",
                    s.metric,
                    s.branch,
                    s.points.len(),
                    measured
                );
                for p in s.points.iter().rev().take(10).rev() {
                    println!(
                        "    #{:<4} {} {:<8} {:>12} {}",
                        p.seq,
                        &p.sha[..12],
                        p.kind,
                        p.mean
                            .map(|m| format!("{m:.3}"))
                            .unwrap_or_else(|| p.state.clone()),
                        p.subject.chars().take(50).collect::<String>()
                    );
                }
            }
            let changes = api.changes(Some(id), false).await?;
            if !changes.is_empty() {
                println!("\n  change points:");
                changes.iter().for_each(print_change);
            }
        }
        WatchesCmd::Push { id } => {
            let r = api.push_watch(id).await?;
            println!("{} commits queued for measurement", r.queued.len());
            for s in r.queued {
                println!("  {s}");
            }
        }
        WatchesCmd::Changes { watch, open } => {
            api.changes(watch, open)
                .await?
                .iter()
                .for_each(print_change);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_parse_with_defaults() {
        let m = parse_metric("demo.score").unwrap();
        assert_eq!((m.direction.as_str(), m.threshold_pct), ("either", 2.0));
        let m = parse_metric("fio.write_iops:decrease:5").unwrap();
        assert_eq!(m.name, "fio.write_iops");
        assert_eq!((m.direction.as_str(), m.threshold_pct), ("decrease", 5.0));
        assert!(parse_metric("x:either:lots").is_err());
    }
}
