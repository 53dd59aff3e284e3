//! The robot's whole loop with real processes and nobody submitting: a generated repository
//! pushed to over time, a watch on its main branch, a server and two workers. Two planted
//! changes (the second inside a merged topic branch) are detected in the series, each opens
//! one bisect by itself, each bisect finds its planted commit, and its report goes by mail to
//! the watch's recipients through a real SMTP server.

mod common;
#[path = "support/mail.rs"]
mod mail;

use common::Lab;
use mail::{Sink, server_with_mail, until_mail_state};
use perfbisect_cli::example;
use perfbisect_cli::watch_example::{self, WatchHistoryOptions};
use perfbisect_wire::api::status_is_final;
use perfbisect_wire::watch::{CreateWatch, WatchMetric};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// A short history, so that CI can run it: the first change comes with push 2, the second
/// (behind a merge) with push 5, and push 6 confirms it. Each push is measured at its head
/// and at one sample commit; the detector needs 5 commits on a level before a change and 3
/// after it.
fn history_options() -> WatchHistoryOptions {
    WatchHistoryOptions {
        pushes: 6,
        first_change_push: 2,
        second_change_push: 5,
        ..Default::default()
    }
}

const RECIPIENT: &str = "team@example.org";

#[tokio::test]
async fn a_watch_finds_and_bisects_two_changes_by_itself() {
    let lab = Lab::new().await;
    let sink = Sink::start(&lab, "smtp", &[]);
    let _server = server_with_mail(&lab, 30, &[("PERFBISECT_SMTP_URL", sink.url())]).await;
    let _w1 = lab.worker("w1");
    let _w2 = lab.worker("w2");
    let history =
        watch_example::generate(&lab.path().join("watched.git"), &history_options()).unwrap();
    lab.api
        .add_repository("watched", &history.path.display().to_string())
        .await
        .unwrap();
    let watch = lab
        .api
        .create_watch(&CreateWatch {
            name: "main".into(),
            repository: "watched".into(),
            branch: "main".into(),
            job: example::JOB_YAML.into(),
            metrics: vec![WatchMetric {
                name: example::METRIC.into(),
                direction: "either".into(),
                threshold_pct: 3.0,
            }],
            host_group: None,
            // Pushes arrive through the webhook; the poll only finds the first head.
            cadence_secs: Some(3600),
            runs_per_head: Some(3),
            sample_commits: Some(1),
            backfill: Some(5),
            recipients: vec![RECIPIENT.into()],
        })
        .await
        .unwrap();

    // The server's own poll notices the branch: its head and 5 ancestors.
    let start = Instant::now();
    while lab.api.watch(watch.id).await.unwrap().heads < 6 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the first poll never came:\n{}",
            lab.log("server")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Then the pushes, one at a time, each announced by the webhook: a sample and the head.
    for k in 1..history.pushes.len() {
        history.push(k).unwrap();
        let polled = lab.api.push_watch(watch.id).await.unwrap();
        assert_eq!(polled.queued.len(), 2, "push {k}: {polled:?}");
        assert_eq!(polled.queued[1], history.pushes[k]);
    }

    // Wait for two bisects opened by the watch to end.
    let deadline = Instant::now() + Duration::from_secs(120);
    let changes = loop {
        let changes = lab.api.changes(Some(watch.id), false).await.unwrap();
        let opened: Vec<_> = changes.iter().filter(|c| c.bisect_id.is_some()).collect();
        if opened.len() >= 2
            && opened
                .iter()
                .all(|c| c.bisect_status.as_deref().is_some_and(status_is_final))
        {
            break changes;
        }
        assert!(
            Instant::now() < deadline,
            "the two changes were not bisected in time: {changes:#?}\n{}",
            lab.log("server")
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(
        changes.len(),
        2,
        "exactly the two planted changes: {changes:#?}"
    );
    // Newest first: the second change, then the first.
    let (second, first) = (&changes[0], &changes[1]);
    assert!(
        first.change_pct > 6.0 && first.change_pct < 10.0,
        "{first:?}"
    );
    assert!(
        second.change_pct < -5.0 && second.change_pct > -9.0,
        "{second:?}"
    );
    let series = lab.api.series(watch.id).await.unwrap();
    for (c, planted) in [
        (first, &history.first_planted),
        (second, &history.second_planted),
    ] {
        assert_eq!(c.action, "bisecting", "{c:?}");
        let b = lab.api.bisect(c.bisect_id.unwrap()).await.unwrap();
        assert_eq!(b.status, "found", "{b:#?}\n{}", lab.log("server"));
        assert_eq!(
            b.culprit.as_ref().unwrap().commit.sha,
            *planted,
            "bisect {} blamed the wrong commit",
            b.id
        );
        // Between the last commit measured before the change and the first after it.
        assert_eq!(c.after_seq, c.before_seq + 1, "{c:?}");
        // One measured commit wider on each side than the detected pair, where there is one.
        let points = &series
            .iter()
            .find(|s| s.metric == c.metric)
            .expect("the change's series")
            .points;
        let sha_at = |seq: i32| points.iter().find(|p| p.seq == seq).map(|p| p.sha.clone());
        assert_eq!(
            Some(b.good.sha.clone()),
            sha_at(c.before_seq - 1).or(Some(c.before_sha.clone())),
            "{c:?}"
        );
        assert_eq!(
            Some(b.bad.sha.clone()),
            sha_at(c.after_seq + 1).or(Some(c.after_sha.clone())),
            "{c:?}"
        );
        // The report says a watch found it.
        let report = reqwest::get(format!("{}/api/v1/bisects/{}/report", lab.api.base(), b.id))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(report.contains("FYI, we noticed"), "{report}");
        assert!(
            report.contains("found by watching main (watch main)"),
            "{report}"
        );
        // And the watch's recipients got it by mail.
        let row = until_mail_state(&lab, b.id, "sent", Duration::from_secs(60)).await;
        assert_eq!(row["recipients"], serde_json::json!([RECIPIENT]), "{row}");
        let mail = sink
            .messages()
            .into_iter()
            .find(|m| {
                m.text
                    .as_deref()
                    .is_some_and(|t| t.contains("FYI, we noticed") && t.contains(planted.as_str()))
            })
            .unwrap_or_else(|| panic!("no report mail of bisect {}", b.id));
        assert_eq!(mail.rcpt_tos, vec![RECIPIENT.to_string()]);
        assert!(
            mail.text
                .as_deref()
                .unwrap()
                .contains("found by watching main"),
            "{mail:?}"
        );
    }
    // The second change came in through a merge: the planted commit was never a measured
    // head, and the bisect went inside the topic branch to find it.
    let series = lab.api.series(watch.id).await.unwrap();
    let measured: HashSet<&str> = series[0].points.iter().map(|p| p.sha.as_str()).collect();
    assert!(!measured.contains(history.second_planted.as_str()));
    // No bisect was opened twice.
    let all = lab.api.list(None).await.unwrap();
    assert_eq!(all.total, 2, "{:#?}", all.bisects);
    let ranges: HashSet<(String, String)> = all
        .bisects
        .iter()
        .map(|b| (b.good.clone(), b.bad.clone()))
        .collect();
    assert_eq!(ranges.len(), 2);
}

/// `perfbisect watches …` as a user types it, against a real server.
#[tokio::test]
async fn the_watch_commands_create_change_list_and_show_a_watch() {
    let lab = Lab::new().await;
    let _server = lab.server(30).await;
    let ex = example::generate(
        &lab.path().join("ex.git"),
        &example::ExampleOptions {
            commits: 20,
            ..Default::default()
        },
    )
    .unwrap();
    lab.api
        .add_repository("example", &ex.path.display().to_string())
        .await
        .unwrap();
    let job = lab.path().join("job.yaml");
    std::fs::write(&job, example::JOB_YAML).unwrap();
    let job = job.display().to_string();
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(common::EXE)
            .args([
                "watches",
                "--server",
                lab.api.base(),
                "--token",
                common::API_TOKEN,
            ])
            .args(args)
            .output()
            .unwrap();
        (
            out.status,
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (status, out, err) = cli(&[
        "add",
        "nightly",
        "--repo",
        "example",
        "--branch",
        "main",
        "--job",
        &job,
        "--metric",
        "demo.score:increase:3",
        "--runs",
        "2",
        "--backfill",
        "0",
        "--cadence",
        "600",
        "--recipient",
        "team@example.org",
    ]);
    assert!(status.success(), "{out}{err}");
    let id: i64 = out
        .strip_prefix("watch ")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        out.contains(&format!(
            "watch {id} nightly: main of example, testcase demo"
        )),
        "{out}"
    );
    assert!(
        out.contains("metric demo.score (increase, threshold 3%)"),
        "{out}"
    );
    assert!(out.contains("2 runs per commit, poll every 600 s"), "{out}");
    assert!(out.contains("recipients: team@example.org"), "{out}");

    // A refused value names what is wrong, and nothing is stored.
    let (status, out, err) = cli(&[
        "add",
        "broken",
        "--repo",
        "example",
        "--job",
        &job,
        "--metric",
        "demo.score:sideways",
    ]);
    assert!(!status.success(), "{out}");
    assert!(err.contains("sideways"), "{err}");

    let id_s = id.to_string();
    let (status, out, err) = cli(&[
        "set",
        &id_s,
        "--runs",
        "3",
        "--metric",
        "demo.score:either:5",
        "--disable",
    ]);
    assert!(status.success(), "{out}{err}");
    assert!(
        out.contains("(paused)") && out.contains("3 runs per commit"),
        "{out}"
    );
    assert!(
        out.contains("metric demo.score (either, threshold 5%)"),
        "{out}"
    );
    let stored = lab.api.watch(id).await.unwrap();
    assert_eq!((stored.runs_per_head, stored.enabled), (3, false));
    assert_eq!(
        stored.recipients,
        ["team@example.org"],
        "what was not given stays"
    );

    let (status, out, err) = cli(&["list"]);
    assert!(status.success(), "{err}");
    assert_eq!(out.matches("nightly").count(), 1, "{out}");
    assert!(!out.contains("broken"), "{out}");
    let (status, out, err) = cli(&["show", &id_s]);
    assert!(status.success(), "{err}");
    assert!(out.starts_with(&format!("watch {id} nightly")), "{out}");
    let (status, out, err) = cli(&["changes", "--watch", &id_s]);
    assert!(status.success(), "{err}");
    assert!(out.trim().is_empty(), "no change yet: {out}");
    let (status, _, err) = cli(&["show", "999"]);
    assert!(!status.success());
    assert!(err.contains("999") || err.contains("not found"), "{err}");
}
