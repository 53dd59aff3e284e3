//! The change a bisect shows, computed in one place from stored runs, so that the API, the
//! dashboard, the CLI and the report print the same number and say which runs it used.
//!
//! The rule: 100·(bad level − good level)/good level, each level the mean of complete runs
//! (`perfbisect_report::stats::relative_change`), and the runs are, in order of preference:
//! 1. `verification`: a found culprit against the parent it was paired with, the runs of
//!    the paired tasks only (interleaved on one host: the fairest comparison);
//! 2. `culprit_parent`: a found culprit that was not verified in pairs, against its first
//!    parent (or the good endpoint): every run of both;
//! 3. `endpoints`: otherwise, every run of the bad endpoint against the good endpoint.
//!
//! The report (`report_input`) picks its parent-vs-culprit runs with [`paired_parent`] and
//! [`in_pair`] too, so its %change of the bisected metric is this number.

use perfbisect_report::kpi::{KpiTable, Verdict};
use perfbisect_report::stats::{Summary, relative_change};
use perfbisect_wire::api::MeasuredChange;

/// The parent the culprit was verified against: the paired commit of a task for the
/// culprit (the engine always asks for the commit under test with its parent as the pair).
/// A task whose *pair* is the culprit verified a child of the culprit against it (the
/// search's lead before it settled): taking that child as the parent once made a report say
/// "5.5% regression" for a +4.5% change. A merge is verified against each of its parents;
/// then the first parent (`first_parent`) is the one shown, when it was paired. `runs`
/// yields each run's (task commit, task's paired commit).
pub fn paired_parent<'a>(
    runs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    culprit: &str,
    first_parent: &str,
) -> Option<String> {
    let mut found: Option<String> = None;
    for (task_sha, pair_sha) in runs {
        let other = match pair_sha {
            Some(p) if task_sha == culprit => p,
            _ => continue,
        };
        if other == first_parent {
            return Some(other.to_string());
        }
        found.get_or_insert_with(|| other.to_string());
    }
    found
}

/// Whether a run belongs to a task that paired the culprit with this parent.
pub fn in_pair(task_sha: &str, pair_sha: Option<&str>, culprit: &str, parent: &str) -> bool {
    task_sha == culprit && pair_sha == Some(parent)
}

/// One stored run, as far as the change needs it.
pub use crate::store::runs::ChangeRun as RunRow;

/// What the change is measured between.
pub struct Sides<'a> {
    pub good_sha: &'a str,
    pub bad_sha: &'a str,
    /// The found culprit, and its first parent in the candidate set (or the good endpoint).
    pub culprit: Option<(&'a str, &'a str)>,
}

/// The change shown for these runs; `None` until both sides have a complete run.
pub fn measure(
    runs: &[RunRow],
    sides: &Sides,
    metric: &str,
    kpi: &KpiTable,
) -> Option<MeasuredChange> {
    let values = |keep: &dyn Fn(&RunRow) -> bool| -> Vec<f64> {
        runs.iter()
            .filter(|r| keep(r))
            .filter_map(|r| r.value)
            .collect()
    };
    let (basis, good_sha, bad_sha, good, bad) = match sides.culprit {
        Some((culprit, first_parent)) => {
            let pairs = runs
                .iter()
                .map(|r| (r.task_sha.as_str(), r.pair_sha.as_deref()));
            match paired_parent(pairs, culprit, first_parent) {
                Some(parent) => {
                    let paired = |sha: &str| {
                        let parent = parent.clone();
                        let sha = sha.to_string();
                        move |r: &RunRow| {
                            r.sha == sha
                                && in_pair(&r.task_sha, r.pair_sha.as_deref(), culprit, &parent)
                        }
                    };
                    let good = values(&paired(&parent));
                    let bad = values(&paired(culprit));
                    (
                        "verification",
                        parent.clone(),
                        culprit.to_string(),
                        good,
                        bad,
                    )
                }
                None => (
                    "culprit_parent",
                    first_parent.to_string(),
                    culprit.to_string(),
                    values(&|r| r.sha == first_parent),
                    values(&|r| r.sha == culprit),
                ),
            }
        }
        None => (
            "endpoints",
            sides.good_sha.to_string(),
            sides.bad_sha.to_string(),
            values(&|r| r.sha == sides.good_sha),
            values(&|r| r.sha == sides.bad_sha),
        ),
    };
    let (basis, good_sha, bad_sha, g, b) = match (Summary::of(&good), Summary::of(&bad)) {
        (Some(g), Some(b)) => (basis, good_sha, bad_sha, g, b),
        // A culprit whose parent was never measured: the endpoints still tell the size.
        _ if basis == "culprit_parent" => (
            "endpoints",
            sides.good_sha.to_string(),
            sides.bad_sha.to_string(),
            Summary::of(&values(&|r| r.sha == sides.good_sha))?,
            Summary::of(&values(&|r| r.sha == sides.bad_sha))?,
        ),
        _ => return None,
    };
    let pct = relative_change(g.mean, b.mean)?;
    let runs_used = match basis {
        "verification" => format!(
            "culprit vs its parent, {} + {} paired verification runs",
            b.n, g.n
        ),
        "culprit_parent" => format!("culprit vs its parent, {} + {} runs", b.n, g.n),
        _ => format!("bad vs good endpoint, {} + {} runs", b.n, g.n),
    };
    Some(MeasuredChange {
        pct,
        good_sha,
        bad_sha,
        good_mean: g.mean,
        bad_mean: b.mean,
        good_runs: g.n,
        bad_runs: b.n,
        basis: basis.to_string(),
        runs_used,
        kind: Verdict::of(kpi.direction(metric), pct).word().to_string(),
    })
}

/// Loads the runs of one bisect and measures its change.
pub async fn load<'e>(
    db: impl sqlx::PgExecutor<'e>,
    bisect: i64,
    metric: &str,
    sides: &Sides<'_>,
    kpi: &KpiTable,
) -> sqlx::Result<Option<MeasuredChange>> {
    let runs = crate::store::runs::for_change(db, bisect, metric).await?;
    Ok(measure(&runs, sides, metric, kpi))
}

/// The change shown for a bisect: its culprit against the culprit's first parent in the
/// candidate set (or the good endpoint), else the endpoints.
pub async fn of_bisect(
    db: &mut sqlx::PgConnection,
    bisect: i64,
    metric: &str,
    good_sha: &str,
    bad_sha: &str,
    culprit_sha: Option<&str>,
    kpi: &KpiTable,
) -> sqlx::Result<Option<MeasuredChange>> {
    let parent: Option<String> = match culprit_sha {
        Some(c) => crate::store::candidates::first_parent(&mut *db, bisect, c).await?,
        None => None,
    };
    let sides = Sides {
        good_sha,
        bad_sha,
        culprit: culprit_sha.map(|c| (c, parent.as_deref().unwrap_or(good_sha))),
    };
    load(db, bisect, metric, &sides, kpi).await
}

/// Measures the bisect's change from its runs now and stores it on its row
/// (`bisects.measured_change`, what the list pages read). Called by the advance.
pub async fn refresh(tx: &mut sqlx::PgConnection, bisect: i64, kpi: &KpiTable) -> sqlx::Result<()> {
    let row = crate::store::bisects::change_sides(&mut *tx, bisect).await?;
    let Some(crate::store::bisects::ChangeSides {
        metric,
        good_sha: good,
        bad_sha: bad,
        culprit_sha: culprit,
    }) = row
    else {
        return Ok(());
    };
    let change = of_bisect(tx, bisect, &metric, &good, &bad, culprit.as_deref(), kpi).await?;
    crate::store::summaries::set_measured_change(tx, bisect, change.as_ref()).await
}

/// A change as the pages and the CLI print it: `+4.8%`, `−9.7%` (a real minus sign).
pub fn signed_pct(pct: f64) -> String {
    let s = format!("{:.1}%", pct.abs());
    if s == "0.0%" {
        s
    } else if pct > 0.0 {
        format!("+{s}")
    } else {
        format!("\u{2212}{s}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfbisect_report::kpi::KpiTable;

    #[test]
    fn a_merge_verified_against_both_parents_shows_its_first_parent() {
        // The second parent (a topic tip) was paired first; the first parent later. A
        // child of the culprit verified against it earlier is not a parent.
        let runs = [
            ("child", Some("m")),
            ("m", Some("topic")),
            ("m", Some("topic")),
            ("m", None),
            ("m", Some("main")),
        ];
        assert_eq!(
            paired_parent(runs.iter().copied(), "m", "main").as_deref(),
            Some("main")
        );
        // Without a couple with the first parent, the one it has.
        assert_eq!(
            paired_parent(runs[..4].iter().copied(), "m", "main").as_deref(),
            Some("topic")
        );
        // Only a child's verification: no parent was paired.
        assert_eq!(paired_parent(runs[..1].iter().copied(), "m", "main"), None);
    }

    fn run(sha: &str, task: &str, pair: Option<&str>, v: Option<f64>) -> RunRow {
        RunRow {
            sha: sha.into(),
            task_sha: task.into(),
            pair_sha: pair.map(str::to_string),
            value: v,
        }
    }

    #[test]
    fn endpoints_until_a_culprit_then_its_paired_runs() {
        let kpi: KpiTable = yaml_serde::from_str("demo.score: higher").unwrap();
        let mut runs = vec![
            run("g", "g", None, Some(100.0)),
            run("g", "g", None, Some(102.0)),
            run("b", "b", None, Some(110.0)),
            run("b", "b", None, None),
            // A search run of the culprit, far off: not part of the verification.
            run("c", "c", None, Some(130.0)),
        ];
        let endpoints = Sides {
            good_sha: "g",
            bad_sha: "b",
            culprit: None,
        };
        let m = measure(&runs, &endpoints, "demo.score", &kpi).unwrap();
        assert_eq!(m.basis, "endpoints");
        assert!((m.pct - 100.0 * (110.0 - 101.0) / 101.0).abs() < 1e-9);
        assert_eq!(
            (m.good_runs, m.bad_runs),
            (2, 1),
            "the incomplete run is left out"
        );
        assert_eq!(m.runs_used, "bad vs good endpoint, 1 + 2 runs");
        assert_eq!(m.kind, "improvement", "demo.score: higher is better");

        let found = Sides {
            good_sha: "g",
            bad_sha: "b",
            culprit: Some(("c", "p")),
        };
        // The parent not measured yet: the endpoints.
        let m = measure(&runs, &found, "demo.score", &kpi).unwrap();
        assert_eq!(m.basis, "endpoints");
        runs.push(run("p", "p", None, Some(50.0)));
        let m = measure(&runs, &found, "demo.score", &kpi).unwrap();
        assert_eq!(m.basis, "culprit_parent");
        assert!((m.pct - 160.0).abs() < 1e-9);

        runs.push(run("c", "c", Some("p"), Some(90.0)));
        runs.push(run("p", "c", Some("p"), Some(100.0)));
        let m = measure(&runs, &found, "demo.score", &kpi).unwrap();
        assert_eq!(m.basis, "verification");
        assert_eq!((m.good_sha.as_str(), m.bad_sha.as_str()), ("p", "c"));
        assert!((m.pct + 10.0).abs() < 1e-9, "{}", m.pct);
        assert_eq!(m.kind, "regression");
        assert_eq!(
            m.runs_used,
            "culprit vs its parent, 1 + 1 paired verification runs"
        );
    }

    #[test]
    fn nothing_until_both_sides_have_a_complete_run() {
        let runs = vec![run("g", "g", None, Some(1.0)), run("b", "b", None, None)];
        let sides = Sides {
            good_sha: "g",
            bad_sha: "b",
            culprit: None,
        };
        assert!(measure(&runs, &sides, "x", &KpiTable::builtin()).is_none());
    }

    #[test]
    fn signs_are_always_written() {
        assert_eq!(signed_pct(4.84), "+4.8%");
        assert_eq!(signed_pct(-9.66), "\u{2212}9.7%");
        assert_eq!(signed_pct(0.01), "0.0%");
    }
}
