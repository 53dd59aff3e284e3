//! The engine's verdicts on real processes (issue 9): a range whose good commit builds slowly
//! (runs must not pile onto the bad endpoint while it builds), and a range with two planted
//! steps (both reported, each with its size, in the API, the report, the mail and the
//! dashboard). Real `perfbisect server` and two `perfbisect worker` children, the suite's
//! PostgreSQL, a real SMTP server and git repositories made here with `git`.

mod common;
#[path = "support/mail.rs"]
mod mail;

use common::Lab;
use mail::{Sink, get, server_with_mail, until_mail_state};
use perfbisect_cli::demo::watch;
use perfbisect_wire::api::{Bisect, SubmitBisect};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The job: `build.sh` sleeps when the commit holds a `slow` file, `bench.sh` prints the
/// commit's level with Gaussian noise of `cv` (drawn by awk from /dev/urandom).
const JOB: &str = "\
testcase: steps
tbox_group: local
build:
  command: sh build.sh
run:
  command: sh bench.sh
  format: key_value
runs_per_task: 5
timeouts:
  build_secs: 120
  run_secs: 60
";

const BUILD_SH: &str = "if [ -f slow ]; then sleep \"$(cat slow)\"; fi\ncp level built-level\n";

fn bench_sh(cv: f64) -> String {
    bench_sh_cold(cv, 0.0)
}

/// Like `bench_sh`, but the first run of each commit in a task (`PERFBISECT_RUN` 0: right
/// after the worker deployed it) reads `cold` higher, as a benchmark does on a cold cache.
///
/// The seed is taken below 2^31: mawk (Debian's awk) clamps a larger `srand` seed to
/// 2^31 − 1, so without it half of all runs drew the same "random" value (+1.18 sd), a noise
/// of one repeated value that a Gaussian model reads as deployments with levels of their own.
fn bench_sh_cold(cv: f64, cold: f64) -> String {
    format!(
        "seed=$(( $(od -An -N4 -tu4 /dev/urandom | tr -d ' ') % 2147483647 ))\n\
         first=0; if [ \"$PERFBISECT_RUN\" = 0 ]; then first=1; fi\n\
         awk -v seed=\"$seed\" -v cv={cv} -v cold={cold} -v first=\"$first\" \
             -v level=\"$(cat built-level)\" 'BEGIN {{\n\
           srand(seed); u = rand(); if (u < 1e-12) u = 1e-12; v = rand();\n\
           z = sqrt(-2 * log(u)) * cos(6.283185307179586 * v);\n\
           printf \"score: %.6f\\n\", level * (1 + cold * first) * (1 + cv * z) }}'\n"
    )
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Range Maker")
        .env("GIT_AUTHOR_EMAIL", "range@example.org")
        .env("GIT_COMMITTER_NAME", "Range Maker")
        .env("GIT_COMMITTER_EMAIL", "range@example.org")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A linear history, one commit per level (the first is `good`, the last `bad`); the good
/// commit's build sleeps `slow_secs`. Returns every commit's sha, oldest first.
fn make_repo(dir: &Path, levels: &[f64], cv: f64, slow_secs: u64) -> Vec<String> {
    make_repo_with(dir, levels, &bench_sh(cv), slow_secs)
}

fn make_repo_with(dir: &Path, levels: &[f64], bench: &str, slow_secs: u64) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("build.sh"), BUILD_SH).unwrap();
    std::fs::write(dir.join("bench.sh"), bench).unwrap();
    let mut shas = Vec::new();
    for (i, level) in levels.iter().enumerate() {
        std::fs::write(dir.join("level"), format!("{level}\n")).unwrap();
        std::fs::write(dir.join("step"), format!("{i}\n")).unwrap();
        let slow = dir.join("slow");
        if i == 0 && slow_secs > 0 {
            std::fs::write(&slow, format!("{slow_secs}\n")).unwrap();
        } else if slow.exists() {
            std::fs::remove_file(&slow).unwrap();
        }
        git(dir, &["add", "-A"]);
        git(
            dir,
            &["commit", "-q", "-m", &format!("step {i}: level {level}")],
        );
        shas.push(git(dir, &["rev-parse", "HEAD"]));
    }
    git(dir, &["tag", "good", &shas[0]]);
    git(dir, &["tag", "bad", &shas[shas.len() - 1]]);
    shas
}

/// The bisect's story (its decisions and why), for failure messages.
async fn events(lab: &Lab, id: i64) -> String {
    let db = sqlx::PgPool::connect(&lab.db_url).await.unwrap();
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT kind, message FROM bisect_events WHERE bisect_id = $1 ORDER BY id")
            .bind(id)
            .fetch_all(&db)
            .await
            .unwrap();
    rows.iter()
        .map(|(k, m)| format!("{k}: {m}"))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn bisect(lab: &Lab, repo: &Path, notify: &[&str]) -> Bisect {
    lab.api
        .add_repository("steps", &repo.display().to_string())
        .await
        .unwrap();
    let submitted = lab
        .api
        .submit(&SubmitBisect {
            repository: "steps".into(),
            good: "good".into(),
            bad: "bad".into(),
            job: JOB.into(),
            metric: "steps.score".into(),
            direction: None,
            magnitude_pct: None,
            confidence: None,
            max_runs: None,
            notify: notify.iter().map(|s| s.to_string()).collect(),
            use_merge_base: false,
            first_parent: false,
        })
        .await
        .unwrap();
    watch(&lab.api, submitted.id, Duration::from_secs(240))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_slow_good_build_does_not_pile_runs_on_the_bad_endpoint() {
    // 13 commits, +2% at commit 7, the good commit's build sleeps 12 s (the issue's
    // repository slept 60 s; 12 s keeps CI short and is still many runs long). The noise is
    // 0.5%: at the 3% a +2% step needs ~260 runs at 99% (bisect-sim, and the
    // information bound alone is above 40), so 40 runs is only reachable at a clearer step.
    let lab = Lab::new().await;
    let _server = lab.server(30).await;
    let _w1 = lab.worker("w1");
    let _w2 = lab.worker("w2");
    let levels: Vec<f64> = (0..13)
        .map(|i| if i >= 7 { 1020.0 } else { 1000.0 })
        .collect();
    let repo = lab.path().join("slow-good");
    let shas = make_repo(&repo, &levels, 0.005, 12);
    let done = bisect(&lab, &repo, &[]).await;
    assert_eq!(
        done.status,
        "found",
        "{:?}\n{}",
        done.status_reason,
        lab.log("server")
    );
    let culprit = done.culprit.as_ref().expect("a culprit");
    assert_eq!(culprit.commit.sha, shas[7], "{done:#?}");
    // The figure the issue names, printed for whoever reruns this to measure it.
    eprintln!("slow good build: found in {} runs", done.runs_done);
    assert!(
        done.runs_done <= 40,
        "{} runs: {done:#?}\n{}",
        done.runs_done,
        events(&lab, done.id).await
    );
    let bad = done
        .commits
        .iter()
        .find(|c| c.role == "bad_endpoint")
        .expect("bad endpoint measured");
    assert!(bad.n <= 15, "runs piled onto the bad endpoint: {bad:?}");
    // The change is shown against the good level, (bad − good) / good of the endpoints'
    // samples, not against the median of all runs (which showed −75% for a −43% step).
    let findings = done.findings.as_ref().expect("the engine's findings");
    let change = findings.change.expect("measured change");
    let good = done
        .commits
        .iter()
        .find(|c| c.role == "good_endpoint")
        .expect("good endpoint measured");
    let (g, b) = (good.mean.unwrap(), bad.mean.unwrap());
    assert!(
        (change - (b - g) / g).abs() < 1e-9,
        "change {change} is not (bad − good) / good of {good:?} and {bad:?}"
    );
    // And it is +2% within the endpoints' own sampling error: the slow good endpoint may
    // hold as few as 2 samples, so a fixed ±0.6% would fail about one run in ten.
    let se = |c: &perfbisect_wire::api::CommitStats| {
        c.stddev.unwrap_or(0.0).max(0.005 * g) / (c.n as f64).sqrt()
    };
    let tolerance = 4.0 * (se(good).powi(2) + se(bad).powi(2)).sqrt() / g;
    assert!(
        (change - 0.02).abs() < tolerance,
        "change {change} is not +2% within ±{tolerance}: {good:?} {bad:?}"
    );
    assert_eq!(findings.changes.len(), 1, "{findings:?}");
}

#[tokio::test]
async fn a_first_run_after_each_deployment_that_reads_high_does_not_mislead_the_search() {
    // 25 commits, +3% at commit 12, 0.5% noise, and the first run of each commit in every
    // task reads 20% high (a cold cache after the worker deployed it). The engine sees which
    // runs came first in their task and fits that start apart from the commits' levels.
    // Without it, a commit measured once a task reads 20% high against endpoints measured
    // five times a task: 82-100 runs in four tries, against 29-40 in five with it.
    let lab = Lab::new().await;
    let _server = lab.server(30).await;
    let _w1 = lab.worker("w1");
    let _w2 = lab.worker("w2");
    let levels: Vec<f64> = (0..25)
        .map(|i| if i >= 12 { 1030.0 } else { 1000.0 })
        .collect();
    let repo = lab.path().join("cold-start");
    let shas = make_repo_with(&repo, &levels, &bench_sh_cold(0.005, 0.2), 0);
    let done = bisect(&lab, &repo, &[]).await;
    let story = events(&lab, done.id).await;
    assert_eq!(done.status, "found", "{:?}\n{story}", done.status_reason);
    let culprit = done.culprit.as_ref().expect("a culprit");
    assert_eq!(culprit.commit.sha, shas[12], "{story}");
    assert!(done.runs_done <= 70, "{} runs:\n{story}", done.runs_done);
}

#[tokio::test]
async fn two_planted_steps_are_both_reported_with_their_sizes() {
    // 30 commits, +10% at commit 10 and another +10% at commit 22, 1% noise.
    let lab = Lab::new().await;
    let sink = Sink::start(&lab, "smtp", &[]);
    let _server = server_with_mail(&lab, 30, &[("PERFBISECT_SMTP_URL", sink.url())]).await;
    let _w1 = lab.worker("w1");
    let _w2 = lab.worker("w2");
    let levels: Vec<f64> = (0..30)
        .map(|i| 1000.0 * if i >= 10 { 1.1 } else { 1.0 } * if i >= 22 { 1.1 } else { 1.0 })
        .collect();
    let repo = lab.path().join("two-steps");
    let shas = make_repo(&repo, &levels, 0.01, 0);
    let done = bisect(&lab, &repo, &["dev@example.invalid"]).await;
    assert_eq!(
        done.status,
        "found",
        "{:?}\n{}",
        done.status_reason,
        lab.log("server")
    );
    let findings = done.findings.as_ref().expect("the engine's findings");
    assert!(findings.more_than_one_change, "{findings:?}");
    let named: Vec<(&str, f64)> = findings
        .changes
        .iter()
        .map(|c| (c.culprit.as_deref().expect("each step named"), c.change))
        .collect();
    assert_eq!(named.len(), 2, "{findings:?}");
    assert_eq!(named[0].0, shas[10]);
    assert_eq!(named[1].0, shas[22]);
    // Sizes against the good level: +10% and +11% (1.1 × 1.1 − 1.1).
    assert!((named[0].1 - 0.10).abs() < 0.02, "{named:?}");
    assert!((named[1].1 - 0.11).abs() < 0.02, "{named:?}");
    let reason = done.status_reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains(&shas[10][..12]) && reason.contains(&shas[22][..12]),
        "{reason}"
    );

    // Every surface shows both culprits, each with its size as the findings give it.
    let sizes: Vec<String> = named
        .iter()
        .map(|(_, c)| format!("{:+.1}%", 100.0 * c))
        .collect();
    let id = done.id;
    // The API's JSON, as served.
    let (status, json) = get(&lab, &format!("/api/v1/bisects/{id}")).await;
    assert_eq!(status, 200, "{json}");
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let steps = json["findings"]["changes"].as_array().unwrap();
    assert_eq!(steps[0]["culprit"], shas[10].as_str());
    assert_eq!(steps[1]["culprit"], shas[22].as_str());
    // The report: a line per step with its size, probability and commit.
    let (status, report) = get(&lab, &format!("/api/v1/bisects/{id}/report")).await;
    assert_eq!(status, 200, "{report}");
    let step_lines = |text: &str| {
        for ((sha, _), size) in named.iter().zip(&sizes) {
            let line = text
                .lines()
                .find(|l| l.contains(&sha[..10]) && l.trim_start().starts_with(size.as_str()))
                .unwrap_or_else(|| panic!("no line with {size} and {sha}:\n{text}"));
            assert!(line.contains('%'), "{line}");
        }
        assert!(
            text.contains("more than one change of steps.score"),
            "{text}"
        );
    };
    step_lines(&report);
    // The delivered mail carries the same report.
    until_mail_state(&lab, id, "sent", Duration::from_secs(120)).await;
    let mail = sink
        .messages()
        .into_iter()
        .find(|m| m.text.as_deref().is_some_and(|t| t.contains("noticed")))
        .expect("the report's mail");
    step_lines(mail.text.as_deref().unwrap());
    // `perfbisect status`, the real command.
    let out = Command::new(common::EXE)
        .args(["status", &id.to_string(), "--server", lab.api.base()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let status_text = String::from_utf8(out.stdout).unwrap();
    assert!(
        status_text.contains("more than one change, in history order:"),
        "{status_text}"
    );
    for ((sha, _), size) in named.iter().zip(&sizes) {
        assert!(
            status_text
                .lines()
                .any(|l| l.contains(&sha[..12]) && l.trim_start().starts_with(size.as_str())),
            "{size} {sha}: {status_text}"
        );
    }
    // The dashboard's bisect page: the change points' table.
    let (status, page) = get(&lab, &format!("/bisects/{id}")).await;
    assert_eq!(status, 200);
    let table = &page[page
        .find("id=\"changes\"")
        .expect("the change points' table")..];
    let table = &table[..table.find("</table>").unwrap()];
    let mut at = 0;
    for ((sha, _), size) in named.iter().zip(&sizes) {
        // In history order: each step after the one before it.
        let row = at
            + table[at..]
                .find(size.as_str())
                .unwrap_or_else(|| panic!("{size}: {table}"));
        let commit = row
            + table[row..]
                .find(&format!("data-sha=\"{sha}\""))
                .expect("its commit");
        at = commit;
    }
}
